import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { UnavailableError } from "../../errors.js";

/**
 * Host firewall rules for `network: "internet"`. Docker keeps one bridge network from another, but
 * a container still reaches the engine host itself (its gateway address, every other host address,
 * services on 0.0.0.0) through the host's INPUT chain, which Docker never filters, and link-local
 * metadata services through FORWARD. These rules close both for every per-workspace bridge (all
 * named `aw-...`), leaving forwarded traffic to the outside as Docker set it up.
 */
export const BRIDGE_PREFIX = "aw-";
const IFACE = `${BRIDGE_PREFIX}+`;
const REJECT = ["-j", "REJECT", "--reject-with", "icmp-host-prohibited"];
interface Rule {
  cmd: "iptables" | "ip6tables";
  chain: string;
  args: string[];
  /** Containers get no IPv6 unless a network asks for it: where ip6tables is missing, skip. */
  optional?: boolean;
}
export const HOST_FIREWALL_RULES: readonly Rule[] = [
  // Anything from a workspace bridge to an address of the host itself (INPUT): refused.
  { cmd: "iptables", chain: "INPUT", args: ["-i", IFACE, ...REJECT] },
  // Cloud metadata and other link-local services, and Alibaba's metadata address (FORWARD, before Docker's rules).
  { cmd: "iptables", chain: "DOCKER-USER", args: ["-i", IFACE, "-d", "169.254.0.0/16", ...REJECT] },
  { cmd: "iptables", chain: "DOCKER-USER", args: ["-i", IFACE, "-d", "100.100.100.200/32", ...REJECT] },
  { cmd: "ip6tables", chain: "INPUT", args: ["-i", IFACE, "-j", "REJECT"], optional: true },
];

/** Rules re-checked at most this often (a flushed firewall is noticed on a later create or connect). */
const RECHECK_MS = 30_000;
let checkedAt = 0;
let inFlight: Promise<void> | undefined;

/**
 * Makes sure the rules are in place before a workspace container on `bridge` runs. The bridge must
 * be visible here (this process shares the engine host's network namespace) and this process must
 * be allowed to change its firewall (root): otherwise the workspace is refused, never started open.
 */
export async function ensureHostFirewall(bridge: string): Promise<void> {
  if (!existsSync(`/sys/class/net/${bridge}`))
    throw new UnavailableError(
      `network "internet": the workspace bridge ${bridge} is not visible from this process, so the engine runs on another host (or namespace) and its firewall cannot be set from here; use network "none", or run the service on the engine's host as root`,
    );
  if (Date.now() - checkedAt < RECHECK_MS) return;
  inFlight ??= installRules().finally(() => (inFlight = undefined));
  await inFlight;
}

async function installRules(): Promise<void> {
  for (const rule of HOST_FIREWALL_RULES) {
    if ((await iptables(rule.cmd, ["-C", rule.chain, ...rule.args])).ok) continue;
    const added = await iptables(rule.cmd, ["-I", rule.chain, "1", ...rule.args]);
    if (added.ok) continue;
    if (rule.optional && added.missing) continue;
    throw new UnavailableError(
      `network "internet" needs host firewall rules this process could not install (${rule.cmd} -I ${rule.chain} ${rule.args.join(" ")}: ${added.output.trim().slice(0, 300) || "failed"}); run the service as root on the engine's host, or use network "none"`,
    );
  }
  checkedAt = Date.now();
}

function iptables(cmd: string, args: string[]): Promise<{ ok: boolean; missing: boolean; output: string }> {
  return new Promise((resolve) => {
    // Wait up to 10 s for the xtables lock (the engine changes rules too); a fixed PATH, no service environment.
    execFile(
      cmd,
      ["-w", "10", ...args],
      { timeout: 20_000, env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" } },
      (err, stdout, stderr) => {
        const code = (err as NodeJS.ErrnoException | null)?.code;
        resolve({ ok: !err, missing: code === "ENOENT", output: `${stderr}${stdout}` });
      },
    );
  });
}
