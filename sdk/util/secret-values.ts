/**
 * Secret values this process has handed to Pulumi (fleet literals marked secret, config secrets a
 * fleet resolved), so engine events and output of an inline program can be masked even where the
 * engine itself would print them. Bounded: the oldest values go first past the cap.
 */
const MAX_KNOWN = 10_000;
const known = new Set<string>();

export function rememberSecret(value: string): void {
  // maskSecrets skips values this short anyway.
  if (value.length < 4 || known.has(value)) return;
  if (known.size >= MAX_KNOWN) known.delete(known.values().next().value as string);
  known.add(value);
}

export function knownSecrets(): string[] {
  return [...known];
}
