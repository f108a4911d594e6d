/**
 * The fallback for sandboxes without python3 (the runner, sdk/kit/runner, does all of this
 * otherwise). File operations that must resolve paths as the sandbox sees them run as small bash scripts inside
 * the E2B sandbox: `realpath -m` resolves every symlink and anything leaving the workspace is refused,
 * so a link the agent planted never leads a file call out of the root. Bytes travel through E2B's
 * files API to a private staging folder outside the workspace; a script then moves them into place.
 * Exit codes and the scripts without a transport of their own: kit/shell-files.ts.
 */
import { shellPrelude, shQuote as quote, SHELL_SCRIPTS } from "../../kit/shell-files.js";

export const E2B_WORKDIR = "/home/user/workspace";
/** Staging for uploads: outside the workspace (never listed in it), on the same filesystem (rename is atomic). */
export const E2B_STAGING = "/home/user/.agentws-staging";

const PRELUDE = shellPrelude(E2B_WORKDIR);

export const SCRIPTS = {
  // list, stat, remove, mkdir, rename: the shared ones; the rest take their bytes from a staged upload.
  ...SHELL_SCRIPTS,
  /** Prints "<size>\\t<resolved path>" of a regular file, or fails 71 with the size when over the limit. */
  locate: `res "$1"; [ -e "$p" ] || exit 66; [ -d "$p" ] && exit 67
s=$(stat -c %s -- "$p"); if [ "$2" != "-" ] && [ "$s" -gt "$2" ]; then printf %s "$s" >&2; exit 71; fi
printf '%s\\t%s' "$s" "$p"`,
  /** Moves a staged upload ($2) into place: atomically replacing, or (x) only if the name is free. */
  place: `t=$2; trap 'rm -f -- "$t"' EXIT
resp "$1"; [ -L "$p" ] && exit 70; [ -d "$p" ] && exit 67
mkdir -p -- "$d" 2>/dev/null || exit 68
m=$3; [ "$m" = - ] && { m=644; [ -f "$p" ] && m=$(stat -c %a -- "$p"); }
chmod "$m" -- "$t" || exit 1
if [ "$4" = x ]; then
  ln -T -- "$t" "$p" 2>/dev/null && exit 0
  exists "$p" && exit 69; exit 1
fi
mv -fT -- "$t" "$p"`,
  append: `t=$2; trap 'rm -f -- "$t"' EXIT
resp "$1"; [ -L "$p" ] && exit 70; [ -d "$p" ] && exit 67
mkdir -p -- "$d" 2>/dev/null || exit 68
cat -- "$t" >> "$p"`,
  /** Unpacks a staged tar ($2) holding one entry named $3 and moves it to $1, which must not exist. */
  unpack: `a=$2; x=$(mktemp -d "${E2B_STAGING}/x.XXXXXX"); trap 'rm -rf -- "$a" "$x"' EXIT
resp "$1"; exists "$p" && exit 69
mkdir -p -- "$d" 2>/dev/null || exit 68
tar -xf "$a" -C "$x" --no-same-owner || exit 1
exists "$p" && exit 69
mv -T -- "$x/$3" "$p"`,
  /** Checks a working directory, then runs the command in it. */
  cwd: `res "$1"; [ -e "$p" ] || { printf 'agentws:cwd-missing' >&2; exit 213; }; [ -d "$p" ] || { printf 'agentws:cwd-notdir' >&2; exit 213; }`,
} as const;

/** One bash command line running a script with its arguments (the SDK runs commands as `bash -l -c`). */
export function scriptCommand(name: keyof typeof SCRIPTS, args: string[]): string {
  return `bash -c ${quote(PRELUDE + SCRIPTS[name])} agentws ${args.map(quote).join(" ")}`;
}

/** argv run in a checked workspace-relative cwd: the check is in the same command, so one round trip. */
export function commandIn(argv: string[], cwd: string): string {
  const run = `exec ${argv.map(quote).join(" ")}`;
  if (cwd === "") return `cd ${quote(E2B_WORKDIR)} && ${run}`;
  // 65 (escape) is reported the same way as the other refusals, by a marker on stderr.
  const check = `${PRELUDE}${SCRIPTS.cwd}\nprintf %s "$p"`;
  return `__agentws_cwd=$(bash -c ${quote(check)} agentws ${quote(cwd)}); __s=$?; if [ $__s = 65 ]; then printf 'agentws:cwd-escape' >&2; exit 213; fi; [ $__s = 0 ] || exit 213; cd -- "$__agentws_cwd" && ${run}`;
}

export { quote };
