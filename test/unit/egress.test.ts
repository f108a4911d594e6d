import { describe, expect, it } from "vitest";
import { egressPolicy } from "../../sdk/cli/serve.js";
import { WorkspaceOptionsSchema } from "../../sdk/workspace/workspace.js";
import {
  EgressGuard,
  EgressPolicySchema,
  canonicalAddress,
  classifyAddress,
  parseAllowEntry,
  type AddressClass,
  type EgressLookup,
} from "../../sdk/util/egress.js";

/** A resolver from a table; unknown names fail as the system resolver would. */
function table(names: Record<string, string[]>): EgressLookup & { calls: string[] } {
  const calls: string[] = [];
  const lookup = async (host: string) => {
    calls.push(host);
    const addrs = names[host];
    if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return addrs.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(lookup, { calls });
}

async function refusal(p: Promise<unknown>): Promise<Error & { code?: string }> {
  return p.then(
    () => {
      throw new Error("expected a refusal");
    },
    (e: unknown) => e as Error & { code?: string },
  );
}

describe("address classifier", () => {
  const cases: Array<[string, AddressClass]> = [
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["0:0:0:0:0:ffff:7f00:0001", "loopback"],
    ["::127.0.0.1", "loopback"], // IPv4-compatible
    ["64:ff9b::7f00:1", "loopback"], // NAT64 of 127.0.0.1
    ["2002:7f00:1::", "loopback"], // 6to4 of 127.0.0.1
    ["2002:a00:1::1", "private"], // 6to4 of 10.0.0.1
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"], // CGNAT
    ["::ffff:10.0.0.1", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["169.254.1.1", "link-local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["169.254.169.254", "metadata"],
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:a9fe:a9fe", "metadata"],
    ["fd00:ec2::254", "metadata"],
    ["169.254.170.2", "metadata"],
    ["100.100.100.200", "metadata"],
    ["168.63.129.16", "metadata"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.1", "reserved"],
    ["198.18.0.1", "reserved"],
    ["2001:db8::1", "reserved"],
    ["not an address", "reserved"],
    ["8.8.8.8", "public"],
    ["172.32.0.1", "public"],
    ["100.128.0.1", "public"],
    ["::ffff:8.8.8.8", "public"],
    ["2606:4700:4700::1111", "public"],
    ["64:ff9b::808:808", "public"],
  ];
  it.each(cases)("%s is %s", (address, cls) => {
    expect(classifyAddress(address)).toBe(cls);
  });

  it("writes IPv4-mapped IPv6 as IPv4, in every spelling", () => {
    expect(canonicalAddress("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(canonicalAddress("::FFFF:7F00:1")).toBe("127.0.0.1");
    expect(canonicalAddress("0:0:0:0:0:ffff:a9fe:a9fe")).toBe("169.254.169.254");
    expect(canonicalAddress("2001:DB8::1")).toBe("2001:db8::1");
    expect(canonicalAddress("10.0.0.1")).toBe("10.0.0.1");
  });
});

describe("allowlist entries", () => {
  it("parses names, wildcards, addresses, CIDRs and ports", () => {
    expect(parseAllowEntry("MCP.Example.com")).toMatchObject({ kind: "name", name: "mcp.example.com", wildcard: false, port: undefined });
    expect(parseAllowEntry("*.internal.example.com:8443")).toMatchObject({ kind: "name", name: "internal.example.com", wildcard: true, port: 8443 });
    expect(parseAllowEntry("localhost.")).toMatchObject({ kind: "name", name: "localhost" });
    for (const e of [
      "127.0.0.1",
      "127.0.0.1:8080",
      "10.0.0.0/8",
      "10.1.0.0/16:443",
      "::1",
      "[::1]",
      "[::1]:8080",
      "fd00::/8",
      "[fd00::/8]:443",
      "2130706433:80",
    ])
      expect(parseAllowEntry(e).kind, e).toBe("net");
  });

  it("refuses what is none of them, saying which entry", () => {
    for (const bad of [
      "",
      "*",
      "*.",
      "http://x",
      "a b",
      "host:0",
      "host:70000",
      "host:x",
      "10.0.0.0/33",
      "[::1]/129",
      "fd00::/200",
      "[example.com]:80",
      "*.127.0.0.1",
      "a/b",
    ]) {
      const r = EgressPolicySchema.safeParse({ allow: [bad] });
      expect(r.success, bad).toBe(false);
    }
    const r = WorkspaceOptionsSchema.safeParse({ egress: { allow: ["ok.example.com", "10.0.0.0/99"] } });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error!.issues)).toContain("10.0.0.0/99");
    expect(r.error!.issues[0]!.path).toEqual(["egress", "allow", 1]);
  });

  it("the CLI reads --egress-allow (repeated or comma-separated) and AGENTWS_EGRESS_ALLOW, refusing a bad entry before start", () => {
    expect(egressPolicy(["127.0.0.1:8080", "10.0.0.0/8,*.corp.example"], false, { AGENTWS_EGRESS_ALLOW: "mcp.internal" })).toEqual({
      allow: ["127.0.0.1:8080", "10.0.0.0/8", "*.corp.example", "mcp.internal"],
      allowPrivate: false,
    });
    expect(egressPolicy([], false, { AGENTWS_EGRESS_ALLOW_PRIVATE: "1" })).toEqual({ allow: [], allowPrivate: true });
    expect(() => egressPolicy(["10.0.0.0/40"], false, {})).toThrow(/--egress-allow.*10\.0\.0\.0\/40/);
  });
});

describe("egress guard decisions", () => {
  it("refuses loopback in every URL spelling without resolving anything", async () => {
    const lookup = table({});
    const guard = new EgressGuard({}, { lookup });
    for (const [url, host] of [
      ["http://127.0.0.1/", "127.0.0.1"],
      ["http://2130706433/", "127.0.0.1"],
      ["http://0x7f000001/", "127.0.0.1"],
      ["http://0177.0.0.1/", "127.0.0.1"],
      ["http://017700000001:8080/", "127.0.0.1"],
      ["http://127.1/", "127.0.0.1"],
      ["http://[::1]:9/", "[::1]"],
      ["http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"],
      ["https://[0:0:0:0:0:ffff:7f00:1]/", "[::ffff:7f00:1]"],
      ["http://0/", "0.0.0.0"],
      ["http://[::]/", "[::]"],
      ["http://169.254.169.254/latest/", "169.254.169.254"],
      ["http://[fd00:ec2::254]/", "[fd00:ec2::254]"],
      ["http://10.0.0.1/", "10.0.0.1"],
      ["http://user:hunter2@192.168.0.1/?token=s3cret", "192.168.0.1"],
    ] as const) {
      const e = await refusal(guard.check(url));
      expect(e.code, url).toBe("forbidden");
      expect(e.message).toContain(`connection to '${host}'`);
      expect(e.message).not.toMatch(/hunter2|s3cret/);
    }
    expect(lookup.calls).toEqual([]);
  });

  it("checks every address a name resolves to, and pins the connection to a checked one", async () => {
    const lookup = table({
      "rebind.example": ["127.0.0.1"],
      "mixed.example": ["93.184.216.34", "10.0.0.7"],
      "v6.example": ["::ffff:169.254.169.254"],
      "public.example": ["93.184.216.34", "2606:2800:220:1::1"],
    });
    const guard = new EgressGuard({}, { lookup });
    const e = await refusal(guard.check("http://rebind.example:8080/mcp"));
    expect(e).toMatchObject({ code: "forbidden" });
    expect(e.message).toContain("'rebind.example'");
    expect(e.message).toContain("resolves to a loopback address");
    expect(e.message).not.toContain("127.0.0.1"); // what an internal name resolves to is not told
    expect((await refusal(guard.check("http://mixed.example/"))).message).toContain("private-network");
    expect((await refusal(guard.check("http://v6.example/"))).message).toContain("cloud metadata");
    expect(await guard.check("https://public.example/mcp")).toEqual({ host: "public.example", port: 443, address: "93.184.216.34", family: 4 });
    const missing = await refusal(guard.check("http://nowhere.example/"));
    expect(missing).toMatchObject({ code: "unavailable" });
    expect(missing.message).toContain("'nowhere.example'");
  });

  it("allows what the allowlist names: names, wildcards, addresses, CIDRs, each with its port", async () => {
    const lookup = table({
      "mcp.corp.example": ["10.1.2.3"],
      "a.b.corp.example": ["10.1.2.4"],
      "corp.example": ["10.1.2.5"],
      localhost: ["127.0.0.1", "::1"],
      "metadata.google.internal": ["169.254.169.254"],
      "meta.corp.example": ["169.254.169.254"],
      "zero.corp.example": ["0.0.0.0"],
    });
    const guard = new EgressGuard({ allow: ["*.corp.example", "localhost:8080", "192.168.0.0/16:443", "[fd00::/8]", "127.0.0.1:9000"] }, { lookup });
    const ok = (url: string) =>
      guard.check(url).then(
        () => "ok",
        (e: Error & { code?: string }) => e.code,
      );
    expect(await ok("http://mcp.corp.example/")).toBe("ok");
    expect(await ok("http://a.b.corp.example:1234/")).toBe("ok");
    expect(await ok("http://corp.example/")).toBe("forbidden"); // a wildcard covers subdomains, not the domain
    expect(await ok("http://localhost:8080/")).toBe("ok");
    expect(await ok("http://localhost:8081/")).toBe("forbidden");
    expect(await ok("https://192.168.7.7/")).toBe("ok");
    expect(await ok("http://192.168.7.7/")).toBe("forbidden");
    expect(await ok("http://[fd00::1]:5/")).toBe("ok");
    expect(await ok("http://127.0.0.1:9000/")).toBe("ok");
    expect(await ok("http://[::ffff:127.0.0.1]:9000/")).toBe("ok"); // the same destination
    expect(await ok("http://127.0.0.1:9001/")).toBe("forbidden");
    // Metadata and unspecified addresses need an address entry; a name entry or a wildcard is not enough.
    expect(await ok("http://meta.corp.example/")).toBe("forbidden");
    expect(await ok("http://zero.corp.example/")).toBe("forbidden");
    expect(await ok("http://metadata.google.internal/")).toBe("forbidden");
    expect(await ok("ftp://mcp.corp.example/")).toBe("forbidden");
    const meta = new EgressGuard({ allow: ["169.254.169.254:80"] }, { lookup });
    expect(await meta.check("http://169.254.169.254/").then(() => "ok")).toBe("ok");
  });

  it("allowPrivate opens loopback and private ranges only", async () => {
    const guard = new EgressGuard({ allowPrivate: true }, { lookup: table({ localhost: ["127.0.0.1"] }) });
    const ok = (url: string) =>
      guard.check(url).then(
        () => "ok",
        (e: Error & { code?: string }) => e.code,
      );
    for (const url of ["http://localhost:1/", "http://10.0.0.1/", "http://[fd12::1]/", "http://100.64.0.1/"]) expect(await ok(url), url).toBe("ok");
    for (const url of [
      "http://169.254.169.254/",
      "http://[fd00:ec2::254]/",
      "http://169.254.1.1/",
      "http://0.0.0.0/",
      "http://224.0.0.1/",
      "http://100.100.100.200/",
    ])
      expect(await ok(url), url).toBe("forbidden");
  });
});
