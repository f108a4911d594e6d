/** A failure the runner reported: an errno name (ENOENT, EEXIST...) or ESCAPE / TOOBIG / SPECIAL / EROOT. */
export class RunnerFailure extends Error {
  constructor(
    readonly code: string,
    readonly detail: string,
  ) {
    super(`${code}${detail ? `: ${detail}` : ""}`);
  }
}
