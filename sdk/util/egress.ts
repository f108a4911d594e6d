// Size: one policy end to end (parsing, DNS answers pinned per connection, the checked HTTP agent and the
// fetch wrapper), kept in one file so an audit of where the host may connect reads one place.
import { promises as dns } from "node:dns";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { Readable } from "node:stream";
import zlib from "node:zlib";
import { z } from "zod";
import { ForbiddenError, UnavailableError, InvalidArgumentError } from "../errors.js";

/**
 * The egress policy: where the host may connect when workspace content or an API caller picks the
 * destination (HTTP MCP servers). An agent can write `.mcp`; without this the service host would
 * connect to any URL it names (its own loopback, the cloud metadata service, the private network)
 * and hand the reply back. Public addresses are allowed; everything else only when listed.
 */

/** One allowlist entry: a host name, `*.suffix`, an IP address or a CIDR, each with an optional `:port`. */
const AllowEntrySchema = z.string().superRefine((value, ctx) => {
  try {
    parseAllowEntry(value);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
  }
});

export const EgressPolicySchema = z.strictObject({
  /**
   * Destinations allowed besides public addresses: `"mcp.internal.example.com"`, `"*.internal.example.com"`
   * (any subdomain), `"127.0.0.1:8080"`, `"[::1]:8080"`, `"10.0.0.0/8"`, `"10.1.0.0/16:443"`, `"[fd00::/8]:443"`.
   * No port: any port. A name entry allows whatever the name resolves to, except cloud metadata,
   * unspecified, multicast and broadcast addresses, which only an address or CIDR entry allows.
   */
  allow: z.array(AllowEntrySchema).optional(),
  /**
   * Local development only: loopback and private ranges (RFC 1918, CGNAT 100.64/10, IPv6 ULA) are
   * allowed without listing them. Link-local and cloud metadata addresses stay refused.
   */
  allowPrivate: z.boolean().optional(),
});
export type EgressPolicy = z.input<typeof EgressPolicySchema>;

/** What an address is, for the policy: anything but `public` is refused unless allowed. */
export type AddressClass = "public" | "loopback" | "private" | "link-local" | "metadata" | "unspecified" | "multicast" | "broadcast" | "reserved";

/** Never allowed by a name entry or allowPrivate: only an address or CIDR entry covering them. */
const ADDRESS_ONLY: ReadonlySet<AddressClass> = new Set(["metadata", "unspecified", "multicast", "broadcast"]);
const PRIVATE_DEV: ReadonlySet<AddressClass> = new Set(["loopback", "private"]);

/** Ranges per class, checked in this order (metadata before the link-local and ULA ranges holding it). */
const RANGES: ReadonlyArray<[AddressClass, ReadonlyArray<string>]> = [
  // AWS/GCP/Azure/OCI IMDS, AWS ECS task credentials, Alibaba Cloud, Azure WireServer, AWS IMDS over IPv6.
  ["metadata", ["169.254.169.254/32", "169.254.170.2/32", "100.100.100.200/32", "168.63.129.16/32", "fd00:ec2::254/128"]],
  ["unspecified", ["0.0.0.0/8", "::/128"]],
  ["loopback", ["127.0.0.0/8", "::1/128"]],
  ["broadcast", ["255.255.255.255/32"]],
  ["multicast", ["224.0.0.0/4", "ff00::/8"]],
  ["link-local", ["169.254.0.0/16", "fe80::/10"]],
  // RFC 1918, CGNAT, IETF protocol assignments, IPv6 ULA and the deprecated site-local range.
  ["private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "192.0.0.0/24", "fc00::/7", "fec0::/10"]],
  // Documentation, benchmarking, the old 6to4 relay, class E; IPv6 discard, documentation, ORCHID, Teredo.
  [
    "reserved",
    [
      "192.0.2.0/24",
      "198.51.100.0/24",
      "203.0.113.0/24",
      "198.18.0.0/15",
      "192.88.99.0/24",
      "240.0.0.0/4",
      "100::/64",
      "2001:db8::/32",
      "3fff::/20",
      "2001:10::/28",
      "2001::/32",
    ],
  ],
];

const CLASS_LISTS: ReadonlyArray<[AddressClass, net.BlockList]> = RANGES.map(([cls, cidrs]) => {
  const list = new net.BlockList();
  for (const c of cidrs) {
    const [addr, len] = c.split("/") as [string, string];
    list.addSubnet(addr, Number(len), net.isIPv6(addr) ? "ipv6" : "ipv4");
  }
  return [cls, list];
});

/** Host names of metadata services: refused unless listed exactly (a wildcard does not cover them). */
const METADATA_NAMES: ReadonlySet<string> = new Set([
  "metadata.google.internal",
  "metadata.goog",
  "metadata",
  "instance-data",
  "instance-data.ec2.internal",
  "metadata.azure.internal",
]);

/** The 16 bytes of an IPv6 address (zone dropped), or undefined when it is not one. */
function ipv6Bytes(address: string): Uint8Array | undefined {
  const addr = address.replace(/%.*$/, "");
  if (!net.isIPv6(addr)) return undefined;
  let text = addr;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    tail.push(...dotted[1]!.split(".").map(Number));
    text = text.slice(0, -dotted[1]!.length) + "0:0";
  }
  const [head, rest] = text.includes("::") ? (text.split("::") as [string, string]) : [text, undefined];
  const groups = (s: string) => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const h = groups(head);
  const r = rest === undefined ? [] : groups(rest);
  const all = rest === undefined ? h : [...h, ...new Array<number>(8 - h.length - r.length).fill(0), ...r];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  if (tail.length) out.set(tail, 12);
  return out;
}

const v4 = (b: Uint8Array, at: number) => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;

/** `::ffff:a.b.c.d` (in any spelling) as `a.b.c.d`; any other address unchanged. Both reach the same socket. */
export function canonicalAddress(address: string): string {
  const b = ipv6Bytes(address);
  if (!b) return address;
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) return v4(b, 12);
  return address.replace(/%.*$/, "").toLowerCase();
}

/** IPv4 addresses an IPv6 address carries and a gateway may forward to (IPv4-compatible, NAT64, 6to4). */
function embeddedIpv4(address: string): string[] {
  const b = ipv6Bytes(address);
  if (!b) return [];
  const out: string[] = [];
  const zero = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zero(0, 12)) out.push(v4(b, 12)); // ::a.b.c.d (deprecated IPv4-compatible)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) out.push(v4(b, 12)); // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) out.push(v4(b, 2)); // 2002::/16
  return out;
}

function classOf(address: string): AddressClass {
  const family = net.isIPv6(address) ? "ipv6" : "ipv4";
  for (const [cls, list] of CLASS_LISTS) if (list.check(address, family)) return cls;
  return "public";
}

/**
 * Classifies an IP address (v4 or v6, IPv4-mapped forms as their IPv4 address). An IPv6 address
 * embedding an IPv4 one (NAT64, 6to4, IPv4-compatible) takes the embedded address's class when that
 * is not public. Anything that is not an IP address is `reserved`.
 */
export function classifyAddress(address: string): AddressClass {
  const addr = canonicalAddress(address);
  if (!net.isIP(addr)) return "reserved";
  const own = classOf(addr);
  if (own !== "public") return own;
  for (const inner of embeddedIpv4(addr)) {
    const cls = classOf(inner);
    if (cls !== "public") return cls;
  }
  return "public";
}

type AllowEntry = { kind: "name"; name: string; wildcard: boolean; port: number | undefined } | { kind: "net"; list: net.BlockList; port: number | undefined };

function parsePort(text: string | undefined, entry: string): number | undefined {
  if (text === undefined) return undefined;
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65535)) throw new InvalidArgumentError(`'${entry}': the port must be 1-65535`);
  return port;
}

function netEntry(addr: string, prefix: string | undefined, port: number | undefined, entry: string): AllowEntry {
  const family = net.isIPv6(addr) ? "ipv6" : net.isIPv4(addr) ? "ipv4" : undefined;
  if (!family) throw new InvalidArgumentError(`'${entry}' is not a host name, IP address or CIDR`);
  const max = family === "ipv6" ? 128 : 32;
  const len = prefix === undefined ? max : /^\d{1,3}$/.test(prefix) ? Number(prefix) : NaN;
  if (!(len >= 0 && len <= max)) throw new InvalidArgumentError(`'${entry}': the prefix length must be 0-${max}`);
  const list = new net.BlockList();
  list.addSubnet(family === "ipv6" ? canonicalAddress(addr) : addr, len, family);
  return { kind: "net", list, port };
}

/**
 * Parses an allowlist entry: `host`, `*.domain`, `a.b.c.d`, `a.b.c.d/n`, IPv6 (bare, or in brackets
 * to carry a port: `[::1]:8080`, `[fd00::/8]:443`), each but bare IPv6 with an optional `:port`.
 * Names and addresses are normalised as URLs normalise them (`2130706433` is 127.0.0.1).
 */
export function parseAllowEntry(entry: string): AllowEntry {
  const text = entry.trim().toLowerCase();
  if (!text) throw new InvalidArgumentError("an allowlist entry must not be empty");
  const bracketed = /^\[([^\]]+)\](?::([^:]*))?$/.exec(text);
  if (bracketed) {
    const [addr, prefix] = bracketed[1]!.split("/") as [string, string | undefined];
    if (!net.isIPv6(addr)) throw new InvalidArgumentError(`'${entry}': only IPv6 addresses go in brackets`);
    return netEntry(addr, prefix, parsePort(bracketed[2], entry), entry);
  }
  if ((text.match(/:/g) ?? []).length >= 2) {
    const [addr, prefix] = text.split("/") as [string, string | undefined];
    return netEntry(addr, prefix, undefined, entry);
  }
  const colon = text.lastIndexOf(":");
  const host = colon === -1 ? text : text.slice(0, colon);
  const port = parsePort(colon === -1 ? undefined : text.slice(colon + 1), entry);
  if (host.includes("/")) {
    const [addr, prefix] = host.split("/") as [string, string];
    return netEntry(addr, prefix, port, entry);
  }
  const wildcard = host.startsWith("*.");
  const bare = wildcard ? host.slice(2) : host;
  let name: string;
  try {
    name = new URL(`http://${bare}/`).hostname;
  } catch {
    throw new InvalidArgumentError(`'${entry}' is not a host name, IP address or CIDR`);
  }
  if (net.isIPv4(name)) {
    if (wildcard) throw new InvalidArgumentError(`'${entry}': a wildcard takes a domain, not an address`);
    return netEntry(name, undefined, port, entry);
  }
  name = name.replace(/\.$/, "");
  if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(name)) throw new InvalidArgumentError(`'${entry}' is not a host name, IP address or CIDR`);
  return { kind: "name", name, wildcard, port };
}

/** Resolves a host name to every address (the system resolver, as connections would use). */
export type EgressLookup = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: EgressLookup = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

/** A checked destination: the connection goes to `address`, never to a second resolution of the name. */
export interface EgressTarget {
  host: string;
  port: number;
  address: string;
  family: 4 | 6;
}

export interface EgressGuardOptions {
  /** Name resolution (tests point names anywhere). Default: the system resolver. */
  lookup?: EgressLookup;
}

const DESCRIBE: Record<AddressClass, string> = {
  public: "a public address",
  loopback: "a loopback address",
  private: "a private-network address",
  "link-local": "a link-local address",
  metadata: "a cloud metadata address",
  unspecified: "an unspecified address (0.0.0.0 or ::)",
  multicast: "a multicast address",
  broadcast: "a broadcast address",
  reserved: "a reserved address",
};

/** Redirects followed by the guarded fetch before it gives up. */
const MAX_REDIRECTS = 5;
const REDIRECTS: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/**
 * Applies one egress policy: `check` resolves a URL's host once and checks every address; `fetch`
 * is a fetch (for the MCP SDK's transports) that connects only to checked addresses and checks
 * every redirect hop again.
 */
export class EgressGuard {
  readonly #entries: AllowEntry[];
  readonly #allowPrivate: boolean;
  readonly #lookup: EgressLookup;
  readonly #agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(policy: EgressPolicy | undefined = {}, options: EgressGuardOptions = {}) {
    const parsed = EgressPolicySchema.parse(policy);
    this.#entries = (parsed.allow ?? []).map(parseAllowEntry);
    this.#allowPrivate = parsed.allowPrivate ?? false;
    this.#lookup = options.lookup ?? systemLookup;
  }

  /** Resolves the URL's host and checks it and every address; throws `forbidden` naming the host. */
  async check(input: string | URL): Promise<EgressTarget> {
    const url = new URL(input);
    const host = url.hostname;
    const refuse = (why: string) =>
      new ForbiddenError(
        `connection to '${host}' refused by the egress policy: ${why}; an operator can list it in the egress allowlist (egress.allow, agentws serve --egress-allow) to permit it`,
        { details: { host, port: url.port } },
      );
    if (url.protocol !== "http:" && url.protocol !== "https:") throw refuse(`the scheme ${url.protocol} is not http(s)`);
    const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
    const bare = host.startsWith("[") ? host.slice(1, -1) : host;
    let addresses: Array<{ address: string; family: number }>;
    let nameAllowed = false;
    if (net.isIP(bare)) addresses = [{ address: bare, family: net.isIP(bare) }];
    else {
      const name = bare.replace(/\.$/, "");
      const exact = this.#entries.some((e) => e.kind === "name" && !e.wildcard && e.name === name && (e.port === undefined || e.port === port));
      if (METADATA_NAMES.has(name) && !exact) throw refuse("it names a cloud metadata service");
      nameAllowed =
        exact || this.#entries.some((e) => e.kind === "name" && e.wildcard && name.endsWith(`.${e.name}`) && (e.port === undefined || e.port === port));
      try {
        addresses = await this.#lookup(name);
      } catch (e) {
        throw new UnavailableError(`could not resolve '${host}': ${(e as NodeJS.ErrnoException).code ?? "lookup failed"}`, { details: { host } });
      }
      if (addresses.length === 0) throw new UnavailableError(`could not resolve '${host}': no addresses`, { details: { host } });
    }
    // Every address must pass: the name is resolved once here and the connection pinned to one of them.
    for (const { address } of addresses) {
      const cls = this.#refusal(address, port, nameAllowed);
      if (cls) throw refuse(net.isIP(bare) ? `it is ${DESCRIBE[cls]}` : `it resolves to ${DESCRIBE[cls]}`);
    }
    const first = addresses[0]!;
    const address = canonicalAddress(first.address);
    return { host, port, address, family: net.isIPv4(address) ? 4 : 6 };
  }

  /** The class that refuses this address, or undefined when the policy allows it. */
  #refusal(raw: string, port: number, nameAllowed: boolean): AddressClass | undefined {
    const address = canonicalAddress(raw);
    const family = net.isIPv6(address) ? "ipv6" : "ipv4";
    const cls = classifyAddress(address);
    if (this.#entries.some((e) => e.kind === "net" && (e.port === undefined || e.port === port) && e.list.check(address, family))) return undefined;
    if (ADDRESS_ONLY.has(cls)) return cls;
    if (nameAllowed || cls === "public") return undefined;
    if (this.#allowPrivate && PRIVATE_DEV.has(cls)) return undefined;
    return cls;
  }

  /** A fetch that goes only where the policy allows: each hop checked, connections pinned to the checked address. */
  readonly fetch = async (input: string | URL, init: RequestInit = {}): Promise<Response> => {
    let url = new URL(input);
    let method = (init.method ?? "GET").toUpperCase();
    const headers = new Headers(init.headers);
    let body = await bodyBytes(init.body, headers);
    const mode = init.redirect ?? "follow";
    for (let hop = 0; ; hop++) {
      const response = await this.#request(url, method, headers, body, init.signal ?? undefined);
      const location = REDIRECTS.has(response.status) ? response.headers.get("location") : null;
      if (!location || mode === "manual") return response;
      await response.body?.cancel().catch(() => undefined);
      if (mode === "error") throw new TypeError(`redirect from '${url.hostname}' refused (redirect: "error")`);
      if (hop >= MAX_REDIRECTS) throw new UnavailableError(`'${url.hostname}' redirected more than ${MAX_REDIRECTS} times`);
      const next = new URL(location, url);
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === "POST")) {
        method = method === "HEAD" ? "HEAD" : "GET";
        body = undefined;
        for (const h of ["content-type", "content-length", "content-encoding"]) headers.delete(h);
      }
      // Credentials are for the origin they were given to.
      if (next.origin !== url.origin) for (const h of ["authorization", "cookie", "proxy-authorization"]) headers.delete(h);
      url = next;
    }
  };

  /** Closes idle keep-alive connections. */
  close(): void {
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }

  async #request(url: URL, method: string, headers: Headers, body: Buffer | undefined, signal: AbortSignal | undefined): Promise<Response> {
    signal?.throwIfAborted();
    const target = await this.check(url);
    const secure = url.protocol === "https:";
    const outgoing: Record<string, string> = {};
    headers.forEach((value, key) => (outgoing[key] = value));
    if (body !== undefined) outgoing["content-length"] = String(body.length);
    outgoing["accept-encoding"] ??= "gzip, deflate, br";
    return new Promise<Response>((resolve, reject) => {
      const req = (secure ? https : http).request(
        url,
        {
          method,
          headers: outgoing,
          agent: secure ? this.#agents.https : this.#agents.http,
          ...(signal ? { signal } : {}),
          // The connection goes to the checked address: no second resolution, so no DNS rebinding.
          lookup: ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
            if (opts.all) cb(null, [{ address: target.address, family: target.family }]);
            else cb(null, target.address, target.family);
          }) as unknown as net.LookupFunction,
        },
        (res) => {
          try {
            resolve(toResponse(res, method, url));
          } catch (e) {
            res.destroy();
            reject(new UnavailableError(`'${url.hostname}' answered with something that is not HTTP (${(e as Error).message})`));
          }
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }
}

async function bodyBytes(body: RequestInit["body"], headers: Headers): Promise<Buffer | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof Uint8Array) return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  // Anything else (URLSearchParams, Blob, FormData, a stream): let Response encode it, with its content type.
  const encoded = new Response(body as ConstructorParameters<typeof Response>[0]);
  const type = encoded.headers.get("content-type");
  if (type && !headers.has("content-type")) headers.set("content-type", type);
  return Buffer.from(await encoded.arrayBuffer());
}

function toResponse(res: http.IncomingMessage, method: string, url: URL): Response {
  const status = res.statusCode ?? 0;
  const headers = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    try {
      headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
    } catch {
      // a header value fetch would refuse is dropped
    }
  }
  const noBody = method === "HEAD" || status === 204 || status === 205 || status === 304;
  let stream: Readable | null = res;
  if (noBody) {
    res.resume();
    stream = null;
  } else {
    const encoding = (res.headers["content-encoding"] ?? "").trim().toLowerCase();
    const decoder =
      encoding === "gzip" || encoding === "x-gzip"
        ? zlib.createGunzip()
        : encoding === "deflate"
          ? zlib.createInflate()
          : encoding === "br"
            ? zlib.createBrotliDecompress()
            : undefined;
    if (decoder) {
      res.on("error", (e) => decoder.destroy(e));
      stream = res.pipe(decoder);
    }
  }
  const response = new Response(stream ? (Readable.toWeb(stream) as ReadableStream<Uint8Array>) : null, {
    status,
    statusText: res.statusMessage ?? "",
    headers,
  });
  Object.defineProperty(response, "url", { value: url.href });
  return response;
}
