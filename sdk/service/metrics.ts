import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { ManagerEvent } from "../manager/events.js";
import type { WorkspaceManager } from "../manager/manager.js";

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The service's Prometheus metrics, on a registry of its own (two apps in one process do not
 * clash). Workspace states come from the manager's events: a workspace is "running" once
 * provisioned, "paused" or "closed" once evicted. Labels are bounded: backend kinds, states,
 * error codes, route patterns; never ids or paths.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly lookups: Counter;
  readonly cacheHits: Counter;
  readonly limitRefusals: Counter<"limit">;
  readonly errors: Counter<"code">;
  readonly requests: Histogram<"method" | "route" | "status">;
  readonly #states = new Map<string, { backend: string; state: string }>();
  readonly #provision: Histogram<"backend" | "outcome">;
  readonly #resume: Histogram<"backend">;
  readonly #misses: Counter;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registry = this.registry;
    if (options.defaultMetrics !== false) {
      collectDefaultMetrics({ register: registry, prefix: "agentws_" });
      // prom-client's gauges named like counters; each has a twin without `_total` that stays.
      for (const name of ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"])
        registry.removeSingleMetric(`agentws_${name}`);
    }
    this.requests = new Histogram({
      name: "agentws_http_request_duration_seconds",
      help: "HTTP requests by route pattern and status",
      labelNames: ["method", "route", "status"],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
    this.errors = new Counter({ name: "agentws_errors_total", help: "Errors answered, by error code", labelNames: ["code"], registers: [registry] });
    this.lookups = new Counter({ name: "agentws_workspace_lookups_total", help: "Workspace lookups through the manager", registers: [registry] });
    this.#misses = new Counter({
      name: "agentws_workspace_cache_misses_total",
      help: "Lookups that provisioned (created, reattached or resumed) a workspace",
      registers: [registry],
    });
    this.cacheHits = new Counter({
      name: "agentws_workspace_cache_hits_total",
      help: "Lookups of a workspace already open in the manager's cache",
      registers: [registry],
    });
    this.limitRefusals = new Counter({
      name: "agentws_limit_refusals_total",
      help: "Requests refused with 429 by a rate limit or quota (user_rate, global_rate, sessions_per_user, live_workspaces_per_user, live_workspaces)",
      labelNames: ["limit"],
      registers: [registry],
    });
    this.#provision = new Histogram({
      name: "agentws_workspace_provision_seconds",
      help: "Provisioning latency (create or reattach)",
      labelNames: ["backend", "outcome"],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
    this.#resume = new Histogram({
      name: "agentws_workspace_resume_seconds",
      help: "Resume latency of paused workspaces",
      labelNames: ["backend"],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
    const states = this.#states;
    new Gauge({
      name: "agentws_workspaces",
      help: "Workspaces this process has seen, by backend and state",
      labelNames: ["backend", "state"],
      registers: [registry],
      collect() {
        this.reset();
        for (const { backend, state } of states.values()) this.inc({ backend, state });
      },
    });
  }

  /** Follows a manager's events; `backend` labels its workspaces. Returns the unsubscribe. */
  follow(manager: WorkspaceManager<never> | { onEvent(l: (e: ManagerEvent) => void): () => void }, backend: string): () => void {
    return manager.onEvent((e) => this.observe(e, backend));
  }

  observe(e: ManagerEvent, backend: string): void {
    switch (e.type) {
      case "create":
      case "reattach":
        this.#misses.inc();
        this.#provision.observe({ backend, outcome: e.type }, e.durationMs / 1000);
        this.#states.set(e.workspaceId, { backend, state: "running" });
        break;
      case "resume":
        this.#misses.inc();
        this.#resume.observe({ backend }, e.durationMs / 1000);
        this.#states.set(e.workspaceId, { backend, state: "running" });
        break;
      case "evict":
        this.#states.set(e.workspaceId, { backend, state: e.paused ? "paused" : "closed" });
        break;
      case "error":
        this.errors.inc({ code: e.code });
        break;
      default:
        break;
    }
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }
}
