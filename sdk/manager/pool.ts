import { z } from "zod";
import type { Logger } from "../logger.js";

/**
 * Warm members are provisioned and running while they wait (on paid backends they bill), carry no
 * user or agent, and are handed out only by claimWorkspace (ids derived from a user or agent are
 * deterministic and cannot come from a pool). Unclaimed members are disposed on shutdown.
 */
export const PrewarmSchema = z.strictObject({
  /** Provisioned, unassigned workspaces to keep ready; 0 disables the pool. */
  size: z.number().int().min(0),
  /** Builds running at once. */
  maxCreating: z.number().int().positive().default(2),
  /** Cap on builds started per second (refills never stampede a backend's create API). */
  maxPerSecond: z.number().positive().default(5),
});
export type PrewarmOptions = z.input<typeof PrewarmSchema>;

export interface PoolStats {
  ready: number;
  building: number;
  hits: number;
  misses: number;
  failures: number;
}

interface PoolHooks<W> {
  /** Provisions and initializes one unassigned member; rejects after cleaning up on failure. */
  build(): Promise<W>;
  /** Releases a member nobody claimed (manager shutdown). */
  dispose(member: W): Promise<void>;
  onReady(member: W, durationMs: number): void;
  onError(error: unknown, durationMs: number): void;
  logger: Logger;
}

const MAX_BACKOFF_MS = 30_000;

/**
 * Warm members, oldest first. A claim takes only a member that is ready now (a half-built one
 * is never handed out) and starts the refill at once; refills are capped by `maxCreating` and
 * `maxPerSecond`, and back off exponentially while builds keep failing.
 */
export class WarmPool<W> {
  readonly #options: z.output<typeof PrewarmSchema>;
  readonly #hooks: PoolHooks<W>;
  readonly #ready: W[] = [];
  readonly #builds = new Set<Promise<void>>();
  #hits = 0;
  #misses = 0;
  #failures = 0;
  #consecutiveFailures = 0;
  #nextStartAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: z.output<typeof PrewarmSchema>, hooks: PoolHooks<W>) {
    this.#options = options;
    this.#hooks = hooks;
  }

  stats(): PoolStats {
    return { ready: this.#ready.length, building: this.#builds.size, hits: this.#hits, misses: this.#misses, failures: this.#failures };
  }

  /** A ready member, or undefined (a miss). Either way the pool refills. */
  claim(): W | undefined {
    const member = this.#ready.shift();
    if (member === undefined) this.#misses++;
    else this.#hits++;
    this.refill();
    return member;
  }

  refill(): void {
    if (this.#stopped) return;
    const { size, maxCreating, maxPerSecond } = this.#options;
    while (this.#ready.length + this.#builds.size < size && this.#builds.size < maxCreating) {
      const now = Date.now();
      if (now < this.#nextStartAt) {
        this.#schedule(this.#nextStartAt - now);
        return;
      }
      this.#nextStartAt = Math.max(now, this.#nextStartAt) + 1000 / maxPerSecond;
      this.#startBuild();
    }
  }

  #schedule(delayMs: number): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.refill();
    }, delayMs);
    this.#timer.unref();
  }

  #startBuild(): void {
    const started = performance.now();
    const build = this.#hooks
      .build()
      .then(
        async (member) => {
          this.#consecutiveFailures = 0;
          if (this.#stopped) {
            await this.#hooks.dispose(member);
            return;
          }
          this.#ready.push(member);
          this.#hooks.onReady(member, performance.now() - started);
        },
        (error: unknown) => {
          this.#failures++;
          this.#consecutiveFailures++;
          const backoff = Math.min(MAX_BACKOFF_MS, (1000 / this.#options.maxPerSecond) * 2 ** this.#consecutiveFailures);
          this.#nextStartAt = Math.max(this.#nextStartAt, Date.now() + backoff);
          this.#hooks.onError(error, performance.now() - started);
        },
      )
      .finally(() => {
        this.#builds.delete(build);
        this.refill();
      });
    this.#builds.add(build);
  }

  /** Stops refilling, lets running builds finish, and disposes every unclaimed member. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#builds.size) await Promise.allSettled([...this.#builds]);
    const members = this.#ready.splice(0);
    await Promise.all(
      members.map((m) => this.#hooks.dispose(m).catch((e: unknown) => this.#hooks.logger.warn("disposing a warm workspace failed", { error: String(e) }))),
    );
  }
}
