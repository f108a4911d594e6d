/**
 * Shell scripts the Daytona sandbox runs through the toolbox's `process/execute`. Paths resolve as
 * the sandbox sees them (`realpath -m`), and anything leaving the workspace root is refused, so no
 * host-side code ever decides on a sandbox path. The fallback for sandboxes without python3 (the runner
 * does all of this otherwise); exit codes and the transport-free scripts are kit/shell-files.ts.
 */
import { shellKillScript, shQuote as q, SHELL_SCRIPTS } from "../../kit/shell-files.js";

export { q };
export { SHELL_EXIT as EXIT, shellPrelude as prelude } from "../../kit/shell-files.js";

/** `sh -c <script> sh <args...>` as one command line for the toolbox. */
export function shLine(script: string, args: string[]): string {
  return ["sh", "-c", q(script), "sh", ...args.map(q)].join(" ");
}

export const SCRIPTS = {
  // append, list, stat, remove, mkdir, rename, resolveRead, publish: the shared ones (kit/shell-files.ts).
  ...SHELL_SCRIPTS,
  kill: shellKillScript("AGENTWS_EXEC"),
  /** Unpacks the uploaded tar $2 (one top folder or file named x) at $1, which must not exist. */
  unpack: `u=$2; trap 'rm -f -- "$u"' EXIT
resp "$1"; exists "$p" && exit 69
mkdir -p -- "$d" 2>/dev/null || exit 68
x=$(mktemp -d -- "$d/.agentws-copy-XXXXXX") || exit 1
tar -xf "$u" -C "$x" --no-same-owner --no-same-permissions || { rm -rf -- "$x"; exit 1; }
if exists "$p"; then rm -rf -- "$x"; exit 69; fi
mv -T -- "$x/x" "$p"; r=$?; rm -rf -- "$x"; exit $r`,
} as const;

/**
 * The wrapper every exec runs in: the command's stdin from a file, stdout and stderr into files,
 * then one line `AGENTWS-RESULT <rc>` and both streams in base64, each cut at the cap + 1 byte (the
 * toolbox answers with one combined text, so the streams travel apart and byte-exact this way).
 * Few processes: empty streams cost none, the root as cwd needs no realpath.
 * $1 root-relative cwd, $2 stdin file or "-", $3 output cap, $4 timeout seconds or "-", $5 marker, then argv.
 */
export const EXEC_WRAPPER = `c=$W
if [ -n "$1" ]; then c=$(realpath -m -- "$W/$1") || exit 65
  case "$c" in "$W"|"$W"/*) ;; *) echo "AGENTWS-RESULT escape"; exit 0;; esac
  [ -d "$c" ] || { echo "AGENTWS-RESULT nocwd"; exit 0; }
fi
i=$2; [ "$i" = - ] && i=/dev/null
n=$(($3 + 1)); to=$4; export AGENTWS_EXEC="$5"; o=/tmp/.agentws-$5.o; e=/tmp/.agentws-$5.e; shift 5
cd -- "$c" || { echo "AGENTWS-RESULT nocwd"; exit 0; }
if [ "$to" = - ]; then "$@" < "$i" > "$o" 2> "$e"; else timeout -k 2 "$to" "$@" < "$i" > "$o" 2> "$e"; fi
rc=$?
printf '\nAGENTWS-RESULT %s\n' "$rc"
[ -s "$o" ] && head -c "$n" -- "$o" | base64 -w0; printf '\n'
[ -s "$e" ] && head -c "$n" -- "$e" | base64 -w0; printf '\n'
if [ "$i" = /dev/null ]; then rm -f -- "$o" "$e"; else rm -f -- "$o" "$e" "$i"; fi`;
