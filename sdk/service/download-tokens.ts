import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { UnauthenticatedError } from "../errors.js";

/**
 * Signed, short-lived download links (the reference's section 9.4 format,
 * `<expiresAt>.<b64url(user)>.<b64url(hmac)>`), bound here to the session and the path as well as
 * the user: a token opens exactly one file of one session of one user until it expires. The
 * secret must be shared by every replica (a random per-process default breaks tokens across them).
 */
export class DownloadTokens {
  readonly #secret: Buffer;
  readonly ttlSeconds: number;

  constructor(options: { secret?: string | undefined; ttlSeconds?: number | undefined } = {}) {
    this.#secret = options.secret ? Buffer.from(options.secret, "utf8") : randomBytes(32);
    this.ttlSeconds = options.ttlSeconds ?? 60;
  }

  sign(userId: string, sessionId: string, path: string, now = Date.now()): { token: string; expiresAt: number } {
    const expiresAt = Math.floor(now / 1000) + this.ttlSeconds;
    const sig = this.#mac(expiresAt, userId, sessionId, path);
    return { token: `${expiresAt}.${Buffer.from(userId, "utf8").toString("base64url")}.${sig.toString("base64url")}`, expiresAt };
  }

  /** The user the token was minted for; 401 when malformed, for another session or path, forged, or expired. */
  verify(token: string, sessionId: string, path: string, now = Date.now()): string {
    const parts = token.split(".");
    if (parts.length !== 3 || !/^\d{1,12}$/.test(parts[0]!) || !parts[1] || !parts[2]) throw new UnauthenticatedError("malformed download token");
    const expiresAt = Number(parts[0]);
    const userId = Buffer.from(parts[1], "base64url").toString("utf8");
    const given = Buffer.from(parts[2], "base64url");
    const want = this.#mac(expiresAt, userId, sessionId, path);
    if (given.length !== want.length || !timingSafeEqual(given, want))
      throw new UnauthenticatedError("invalid download token (another session, path or user, or another secret)");
    if (expiresAt < Math.floor(now / 1000)) throw new UnauthenticatedError("expired download token");
    return userId;
  }

  #mac(expiresAt: number, userId: string, sessionId: string, path: string): Buffer {
    return createHmac("sha256", this.#secret).update(`${expiresAt}\0${userId}\0${sessionId}\0${path}`, "utf8").digest();
  }
}
