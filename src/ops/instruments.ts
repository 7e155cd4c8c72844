import { Counter, Gauge, type Registry } from "prom-client"
import { CellHistogram } from "./cells.js"

/**
 * Every Tollgate metric, registered in one gateway's own registry (never
 * prom-client's global one: tests run several gateways in one process).
 * docs/operations.md documents each name, type and label.
 */

/** Upstream latency buckets, seconds: first-token times of LLM APIs run from ~0.2 s to tens of seconds. */
export const UPSTREAM_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120]

/** Tollgate-added latency buckets, seconds (the clock has 1 ms resolution, so 0 lands in the first). */
export const OVERHEAD_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

/** End-to-end request duration buckets, seconds: refusals take milliseconds, long streams up to `timeouts.total` (600 s). */
export const REQUEST_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
]

/** Queue wait buckets, seconds: from a moment to a long `max_wait`. */
export const QUEUE_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** The numeric value of `tollgate_breaker_state`. */
export const BREAKER_STATE_VALUE = { closed: 0, half_open: 1, open: 2 } as const

/** The token kinds of `tollgate_tokens_total`, as in the usage record. */
export const TOKEN_KINDS = ["input", "output", "cache_read", "cache_write"] as const

export const makeInstruments = (registry: Registry) => {
  const registers = [registry]
  /** A counter by route and target (provider and upstream model). */
  const byTarget = (name: string, help: string) =>
    new Counter({ name, help, labelNames: ["route", "provider", "model"] as const, registers })
  return {
    requests: new Counter({
      name: "tollgate_requests_total",
      help: "Authenticated proxy requests, by tenant, route, serving provider and the status sent to the client.",
      labelNames: ["tenant", "route", "provider", "status"] as const,
      registers,
    }),
    attempts: new Counter({
      name: "tollgate_upstream_attempts_total",
      help: "Requests sent upstream, by provider, model and what the result means for the breaker.",
      labelNames: ["provider", "model", "result"] as const,
      registers,
    }),
    extraAttempts: new Counter({
      name: "tollgate_extra_attempts_total",
      help: "Attempts after the first of a request: the same target again (retry) or the next one (fallback).",
      labelNames: ["kind"] as const,
      registers,
    }),
    retryBudgetRefusals: new Counter({
      name: "tollgate_retry_budget_refusals_total",
      help: "Extra attempts the retry budget refused.",
      registers,
    }),
    rateLimitRefusals: new Counter({
      name: "tollgate_rate_limit_refusals_total",
      help: "Requests refused with 429 by a tenant rate limit.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    budgetRefusals: new Counter({
      name: "tollgate_budget_refusals_total",
      help: "Requests refused with 402 by a hard budget.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    budgetCutoffs: new Counter({
      name: "tollgate_budget_cutoffs_total",
      help: "Streams stopped by the hard-budget cutoff after their first byte.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    spend: new Counter({
      name: "tollgate_spend_micro_usd_total",
      help: "Charged cost in micro-USD (1 USD = 1,000,000), as in the usage records, by tenant, route and upstream model.",
      labelNames: ["tenant", "route", "model"] as const,
      registers,
    }),
    tokens: new Counter({
      name: "tollgate_tokens_total",
      help: "Tokens metered, as in the usage records, by tenant, route, upstream model and kind.",
      labelNames: ["tenant", "route", "model", "kind"] as const,
      registers,
    }),
    cacheReadTokens: byTarget(
      "tollgate_cache_read_tokens_total",
      "Prompt tokens read from the provider's prompt cache, by route, provider and upstream model.",
    ),
    promptTokens: byTarget(
      "tollgate_prompt_tokens_total",
      "Prompt tokens of every kind (input + cache read + cache write), by route, provider and upstream model: the denominator of the cache-hit ratio.",
    ),
    cacheSaved: byTarget(
      "tollgate_cache_saved_micro_usd_total",
      "micro-USD the prompt cache saved: cache-read tokens at the input price less their cache-read price, by route, provider and upstream model.",
    ),
    sessionMoves: byTarget(
      "tollgate_session_moves_total",
      "Sessions of sticky routes that left the target that served them (it was unavailable), by route and the provider and model they moved to.",
    ),
    unpriced: byTarget(
      "tollgate_unpriced_requests_total",
      "Requests served (2xx) by a target with no price in the price table: their cost was recorded as 0.",
    ),
    configReloads: new Counter({
      name: "tollgate_config_reloads_total",
      help: "Config reloads (SIGHUP, POST /admin/reload): applied (ok) or refused as invalid (error).",
      labelNames: ["result"] as const,
      registers,
    }),
    authFailures: new Counter({
      name: "tollgate_auth_failures_total",
      help: "Requests refused with 401: no key, or a key no tenant has.",
      registers,
    }),
    storeErrors: new Counter({
      name: "tollgate_store_errors_total",
      help: "Limit store operations that failed (the gateway then uses local limits for 5 s).",
      registers,
    }),
    buffersFull: new Counter({
      name: "tollgate_buffers_full_total",
      help: "Requests refused with 503 because request bodies in memory were at server.max_buffered_bytes (or the tenant's half).",
      labelNames: ["tenant"] as const,
      registers,
    }),
    connectionsDropped: new Counter({
      name: "tollgate_connections_dropped_total",
      help: "Client connections closed as they arrived because server.max_connections were open.",
      registers,
    }),
    sessionsEvicted: new Counter({
      name: "tollgate_sessions_evicted_total",
      help: "Live sessions evicted (least recently used first) to keep a tenant within sessions.max_per_tenant.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    queueTimeouts: new Counter({
      name: "tollgate_queue_timeouts_total",
      help: "Requests refused with 429 after waiting limits.queue.max_wait in their tenant's queue.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    queueLength: new Gauge({
      name: "tollgate_queue_length",
      help: "Requests waiting in the tenant's queue on this copy now (for a concurrency place or a rate window).",
      labelNames: ["tenant"] as const,
      registers,
    }),
    queueWait: new CellHistogram<"tenant">(
      "tollgate_queue_wait_seconds",
      "Time requests spent in their tenant's queue, whether then served, gone or refused.",
      QUEUE_BUCKETS,
      registers,
    ),
    // Histograms observed on every request: cells (cells.ts), read at scrape time.
    upstreamLatency: new CellHistogram<"provider" | "model">(
      "tollgate_upstream_latency_seconds",
      "Time from sending an attempt to its response (status for errors, first content for 2xx).",
      UPSTREAM_BUCKETS,
      registers,
    ),
    requestDuration: new CellHistogram<"route" | "status">(
      "tollgate_request_duration_seconds",
      "Time from a request's arrival to its end (a stream's last event), as duration_ms in its usage record.",
      REQUEST_BUCKETS,
      registers,
    ),
    overhead: new CellHistogram<never>(
      "tollgate_overhead_seconds",
      "Latency Tollgate added to a request: time to the first response byte not spent waiting upstream.",
      OVERHEAD_BUCKETS,
      registers,
    ),
    openStreams: new Gauge({
      name: "tollgate_open_streams",
      help: "Event streams being relayed to clients now.",
      registers,
    }),
    relayBuffered: new Gauge({
      name: "tollgate_relay_buffered_bytes",
      help: "Bytes held in memory for responses being relayed now (upstream read buffers and client write buffers).",
      registers,
    }),
    breakerStoreErrors: new Counter({
      name: "tollgate_breaker_store_errors_total",
      help: "Calls to Redis for the shared breakers and retry budget (breaker.shared) that failed; after each, this copy uses its own for 5 s.",
      registers,
    }),
    traceSpans: new Counter({
      name: "tollgate_trace_spans_total",
      help: "Spans handed to the OTLP collector, by result: exported (the collector took the batch) or dropped (collector down, slow, refusing, or too many posts in flight).",
      labelNames: ["result"] as const,
      registers,
    }),
    usageDbPending: new Gauge({
      name: "tollgate_usage_db_pending_records",
      help: "Usage records in the usage file (or waiting to be written to it) that the usage database has not confirmed yet.",
      registers,
    }),
    usageDbErrors: new Counter({
      name: "tollgate_usage_db_errors_total",
      help: "Batches of usage records the usage database did not take (down, slow, refusing); they stay in the usage file and are sent again.",
      registers,
    }),
    usageBacklogRecords: new Gauge({
      name: "tollgate_usage_backlog_records",
      help: "Usage records held in memory because the usage file refuses writes (a full disk); written in order once it takes them.",
      registers,
    }),
    usageBacklogBytes: new Gauge({
      name: "tollgate_usage_backlog_bytes",
      help: "Bytes of the usage records held in memory because the usage file refuses writes, at most usage.backlog_max_bytes.",
      registers,
    }),
    usageDropped: new Counter({
      name: "tollgate_usage_records_dropped_total",
      help: "Usage records given up because the usage file refused writes and the backlog was full.",
      registers,
    }),
    bodyBuffered: new Gauge({
      name: "tollgate_buffered_bytes",
      help: "Request-body bytes held in memory now, counted against server.max_buffered_bytes.",
      registers,
    }),
    breakerState: new Gauge({
      name: "tollgate_breaker_state",
      help: "Circuit breaker state per target: 0 closed, 1 half-open, 2 open.",
      labelNames: ["provider", "model"] as const,
      registers,
    }),
    breakerFailureRatio: new Gauge({
      name: "tollgate_breaker_failure_ratio",
      help: "Failed share of the attempts a closed breaker counted in the recent minute.",
      labelNames: ["provider", "model"] as const,
      registers,
    }),
    tenantBreakersOpen: new Gauge({
      name: "tollgate_tenant_breakers_open",
      help: "Tenants' own breakers (per tenant, provider and model) that are open or half-open.",
      registers,
    }),
    cooldowns: new Gauge({
      name: "tollgate_cooldowns_active",
      help: "Targets skipped now because of an upstream retry-after.",
      registers,
    }),
    openRequests: new Gauge({
      name: "tollgate_open_requests",
      help: "Admitted requests not yet settled, by tenant.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    overspendBound: new Gauge({
      name: "tollgate_overspend_bound_micro_usd",
      help: "Worst-case budget overspend of the open requests with an output limit, micro-USD, by tenant.",
      labelNames: ["tenant"] as const,
      registers,
    }),
    unboundedRequests: new Gauge({
      name: "tollgate_open_requests_unbounded",
      help: "Open requests without an output limit (their overspend has no bound), by tenant.",
      labelNames: ["tenant"] as const,
      registers,
    }),
  }
}

export type Instruments = ReturnType<typeof makeInstruments>
