import { Clock, Context, Effect, Layer } from "effect"
import { collectDefaultMetrics, Registry } from "prom-client"
import { LiveConfig } from "../config/LiveConfig.js"
import { BodyBuffers } from "./BodyBuffers.js"
import { Breakers, type BreakerView } from "../reliability/Breakers.js"
import {
  cache1,
  cache2,
  cache3,
  cache4,
  CounterCells,
  type CounterCell,
  type HistogramCell,
} from "./cells.js"
import { BREAKER_STATE_VALUE, makeInstruments } from "./instruments.js"
import { Deadlines } from "../reliability/Deadlines.js"
import { RetryBudget } from "../reliability/RetryBudget.js"
import { OpenRequests, type OverspendBound } from "./OpenRequests.js"
import { Tracing, type SpanCounts } from "./Tracing.js"
import { UsageBacklog, type UsageBacklogCounts } from "./UsageBacklog.js"
import { UsageDbStats, type UsageDbCounts } from "./UsageDbStats.js"
import { Telemetry, type AttemptResult, type RequestDone, type TelemetryService } from "./Telemetry.js"

/** This gateway's Prometheus metrics (GET /metrics). */
export interface MetricsService {
  /** The request-path hooks that feed the metrics (the default `Telemetry`). */
  readonly telemetry: TelemetryService
  /**
   * The exposition text: this gateway's `tollgate_*` metrics (scrape-time
   * gauges read from the breakers and open requests first), then the
   * process metrics (`tollgate_process_*`, `tollgate_nodejs_*`).
   */
  readonly scrape: Effect.Effect<string>
  /** The content type of the exposition text (Prometheus text format 0.0.4). */
  readonly contentType: string
}

export class Metrics extends Context.Service<Metrics, MetricsService>()("tollgate/ops/Metrics") {}

/** What the metrics read at scrape time. */
export interface MetricsDeps {
  /** Configured tenant names: their counters show up at 0 before their first request. */
  /** The configured tenants, now (a reload may change them). */
  readonly tenants: () => ReadonlyArray<string>
  readonly breakers: () => ReadonlyArray<BreakerView>
  readonly overspend: (tenant: string) => OverspendBound
  /** Current epoch ms (the clock the request path uses for `startMs`). */
  readonly now: () => number
  /** Bytes held by open relays now. */
  readonly relayBuffered: () => number
  /** Request-body bytes held now (src/ops/BodyBuffers.ts). */
  readonly bodyBuffered: () => number
  /** Failed shared-breaker calls so far (`breaker.shared`); absent in tests. */
  readonly breakerStoreErrors?: () => number
  /** Spans exported and dropped so far (src/ops/Tracing.ts); absent in tests that do not trace. */
  readonly traceSpans?: Readonly<SpanCounts> | undefined
  /** How far the usage database is behind (src/usagedb/Writer.ts); absent in tests. */
  readonly usageDb?: Readonly<UsageDbCounts> | undefined
  /** The usage records held in memory while the usage file refuses writes (src/meter/UsageLog.ts); absent in tests. */
  readonly usageBacklog?: Readonly<UsageBacklogCounts> | undefined
}

let processRegistry: Registry | undefined

/** CPU, memory, event-loop lag and GC are per process, not per gateway: one registry, made on first use. */
const processMetrics = (): Registry => {
  if (processRegistry === undefined) {
    processRegistry = new Registry()
    collectDefaultMetrics({ register: processRegistry, prefix: "tollgate_" })
  }
  return processRegistry
}

/** Spend and tokens of one tenant, route and upstream model. */
interface UsageCells {
  readonly spend: CounterCell
  readonly tokens: readonly [CounterCell, CounterCell, CounterCell, CounterCell]
}

interface TenantCells {
  readonly rateLimited: CounterCell
  readonly budgetRefused: CounterCell
  readonly cutoff: CounterCell
  readonly sessionsEvicted: CounterCell
  readonly buffersFull: CounterCell
  readonly queueTimeouts: CounterCell
  readonly queueWait: HistogramCell
  /** Requests waiting in the tenant's queue now. */
  queued: number
}

/** Builds one registry and the hooks that feed it. */
export const make = (deps: MetricsDeps): MetricsService => {
  const registry = new Registry()
  const m = makeInstruments(registry)
  const counters = {
    requests: new CounterCells(m.requests),
    attempts: new CounterCells(m.attempts),
    extraAttempts: new CounterCells(m.extraAttempts),
    retryBudgetRefusals: new CounterCells(m.retryBudgetRefusals),
    rateLimitRefusals: new CounterCells(m.rateLimitRefusals),
    budgetRefusals: new CounterCells(m.budgetRefusals),
    budgetCutoffs: new CounterCells(m.budgetCutoffs),
    spend: new CounterCells(m.spend),
    tokens: new CounterCells(m.tokens),
    storeErrors: new CounterCells(m.storeErrors),
    sessionsEvicted: new CounterCells(m.sessionsEvicted),
    authFailures: new CounterCells(m.authFailures),
    buffersFull: new CounterCells(m.buffersFull),
    connectionsDropped: new CounterCells(m.connectionsDropped),
    unpriced: new CounterCells(m.unpriced),
    cacheReadTokens: new CounterCells(m.cacheReadTokens),
    promptTokens: new CounterCells(m.promptTokens),
    cacheSaved: new CounterCells(m.cacheSaved),
    sessionMoves: new CounterCells(m.sessionMoves),
    configReloads: new CounterCells(m.configReloads),
    queueTimeouts: new CounterCells(m.queueTimeouts),
  }
  // Every label value below comes from the config (tenants, routes, targets) or is a status
  // code: never a string a client sent (an unknown route is "").
  const requestCell = cache4((tenant: string, route: string, provider: string, status: number) =>
    counters.requests.add({ tenant, route, provider, status: String(status) }),
  )
  const durationCell = cache2((route: string, status: number) =>
    m.requestDuration.add({ route, status: String(status) }),
  )
  const usageCells = cache3((tenant: string, route: string, model: string): UsageCells => ({
    spend: counters.spend.add({ tenant, route, model }),
    tokens: [
      counters.tokens.add({ tenant, route, model, kind: "input" }),
      counters.tokens.add({ tenant, route, model, kind: "output" }),
      counters.tokens.add({ tenant, route, model, kind: "cache_read" }),
      counters.tokens.add({ tenant, route, model, kind: "cache_write" }),
    ],
  }))
  /** The prompt cache of one route and target: cache reads, all prompt tokens, µUSD saved. */
  const cacheCells = cache3((route: string, provider: string, model: string) => ({
    read: counters.cacheReadTokens.add({ route, provider, model }),
    prompt: counters.promptTokens.add({ route, provider, model }),
    saved: counters.cacheSaved.add({ route, provider, model }),
  }))
  const sessionMoveCell = cache3((route: string, provider: string, model: string) =>
    counters.sessionMoves.add({ route, provider, model }),
  )
  const unpricedCell = cache3((route: string, provider: string, model: string) =>
    counters.unpriced.add({ route, provider, model }),
  )
  const reloads = {
    ok: counters.configReloads.add({ result: "ok" }),
    error: counters.configReloads.add({ result: "error" }),
  }
  const attemptCell = cache3((provider: string, model: string, result: AttemptResult) =>
    counters.attempts.add({ provider, model, result }),
  )
  const latency = cache2((provider: string, model: string) => m.upstreamLatency.add({ provider, model }))
  const overhead = m.overhead.add({})
  const retries = counters.extraAttempts.add({ kind: "retry" })
  const fallbacks = counters.extraAttempts.add({ kind: "fallback" })
  const retryBudgetRefused = counters.retryBudgetRefusals.add({})
  const storeErrors = counters.storeErrors.add({})
  const authFailures = counters.authFailures.add({})
  const connectionsDropped = counters.connectionsDropped.add({})
  const tenantCells = cache1((tenant: string): TenantCells => ({
    rateLimited: counters.rateLimitRefusals.add({ tenant }),
    budgetRefused: counters.budgetRefusals.add({ tenant }),
    cutoff: counters.budgetCutoffs.add({ tenant }),
    sessionsEvicted: counters.sessionsEvicted.add({ tenant }),
    buffersFull: counters.buffersFull.add({ tenant }),
    queueTimeouts: counters.queueTimeouts.add({ tenant }),
    queueWait: m.queueWait.add({ tenant }),
    queued: 0,
  }))
  for (const tenant of deps.tenants()) tenantCells(tenant)
  let openStreams = 0

  const requestDone = ({ record, route, committed, overheadMs, unpriced }: RequestDone): void => {
    const provider = record.provider ?? ""
    const model = record.model ?? ""
    requestCell(record.tenant, route, provider, record.status).inc()
    durationCell(route, record.status).observe(record.duration_ms / 1000)
    const usage = usageCells(record.tenant, route, model)
    usage.spend.inc(record.cost_micro_usd)
    usage.tokens[0].inc(record.input_tokens)
    usage.tokens[1].inc(record.output_tokens)
    usage.tokens[2].inc(record.cache_read_tokens)
    usage.tokens[3].inc(record.cache_write_tokens)
    if (unpriced) unpricedCell(route, provider, model).inc()
    const prompt = record.input_tokens + record.cache_read_tokens + record.cache_write_tokens
    if (prompt > 0) {
      const cache = cacheCells(route, provider, model)
      cache.prompt.inc(prompt)
      cache.read.inc(record.cache_read_tokens)
      cache.saved.inc(record.cache_saved_micro_usd)
    }
    const tenant = tenantCells(record.tenant)
    // Refusals are answered before any upstream byte (402/429); the stream cutoff ends a committed 200.
    if (record.error === "rate_limited") tenant.rateLimited.inc()
    else if (record.error === "buffers_full") tenant.buffersFull.inc()
    else if (record.error === "budget_exceeded") {
      if (committed) tenant.cutoff.inc()
      else tenant.budgetRefused.inc()
    }
    overhead.observe(Math.max(0, overheadMs) / 1000)
  }

  const telemetry: TelemetryService = {
    requestDone,
    attempt: (provider, model, result, ms) => {
      attemptCell(provider, model, result).inc()
      latency(provider, model).observe(ms / 1000)
    },
    nextAttempt: (kind) => (kind === "retry" ? retries : fallbacks).inc(),
    retryBudgetRefused: () => retryBudgetRefused.inc(),
    storeError: () => storeErrors.inc(),
    sessionsEvicted: (tenant, count) => tenantCells(tenant).sessionsEvicted.inc(count),
    authFailed: () => authFailures.inc(),
    connectionDropped: () => connectionsDropped.inc(),
    streamOpened: () => {
      openStreams++
    },
    streamClosed: () => {
      openStreams--
    },
    unpriced: (route, provider, model) => unpricedCell(route, provider, model).inc(),
    sessionMoved: (route, provider, model) => sessionMoveCell(route, provider, model).inc(),
    configReloaded: (result) => reloads[result].inc(),
    queueEntered: (tenant) => {
      tenantCells(tenant).queued++
    },
    queueLeft: (tenant, waitedMs, timedOut) => {
      const cells = tenantCells(tenant)
      cells.queued--
      cells.queueWait.observe(waitedMs / 1000)
      if (timedOut) cells.queueTimeouts.inc()
    },
  }

  /** The failed shared-breaker calls already moved into `tollgate_breaker_store_errors_total`. */
  let breakerErrorsSeen = 0
  /** The failed batches already moved into `tollgate_usage_db_errors_total`. */
  let usageDbErrorsSeen = 0
  /** The dropped records already moved into `tollgate_usage_records_dropped_total`. */
  let usageDroppedSeen = 0
  /** The span counts already moved into `tollgate_trace_spans_total`. */
  const spansSeen: SpanCounts = { exported: 0, dropped: 0 }
  /** Moves the counted cells into prom-client and reads the scrape-time gauges. */
  const refresh = (): void => {
    for (const cells of Object.values(counters)) cells.sync()
    const breakerErrors = deps.breakerStoreErrors?.() ?? 0
    m.breakerStoreErrors.inc(breakerErrors - breakerErrorsSeen)
    breakerErrorsSeen = breakerErrors
    const spans = deps.traceSpans
    if (spans !== undefined) {
      m.traceSpans.inc({ result: "exported" }, spans.exported - spansSeen.exported)
      m.traceSpans.inc({ result: "dropped" }, spans.dropped - spansSeen.dropped)
      spansSeen.exported = spans.exported
      spansSeen.dropped = spans.dropped
    }
    const usageDb = deps.usageDb
    if (usageDb !== undefined) {
      m.usageDbPending.set(usageDb.pending)
      m.usageDbErrors.inc(usageDb.errors - usageDbErrorsSeen)
      usageDbErrorsSeen = usageDb.errors
    }
    const backlog = deps.usageBacklog
    if (backlog !== undefined) {
      m.usageBacklogRecords.set(backlog.records)
      m.usageBacklogBytes.set(backlog.bytes)
      m.usageDropped.inc(backlog.dropped - usageDroppedSeen)
      usageDroppedSeen = backlog.dropped
    }
    m.openStreams.set(openStreams)
    m.bodyBuffered.set(deps.bodyBuffered())
    m.relayBuffered.set(deps.relayBuffered())
    m.breakerState.reset()
    m.breakerFailureRatio.reset()
    let cooling = 0
    let tenantsOpen = 0
    for (const b of deps.breakers()) {
      // A tenant's own breaker is listed only when not closed; no tenant label (cardinality).
      if (b.tenant !== null) {
        tenantsOpen++
        continue
      }
      const labels = { provider: b.provider, model: b.model }
      m.breakerState.set(labels, BREAKER_STATE_VALUE[b.state])
      m.breakerFailureRatio.set(labels, b.failureRatio)
      if (b.cooldownUntil > 0) cooling++
    }
    m.cooldowns.set(cooling)
    m.tenantBreakersOpen.set(tenantsOpen)
    for (const tenant of deps.tenants()) {
      const bound = deps.overspend(tenant)
      m.openRequests.set({ tenant }, bound.open)
      m.overspendBound.set({ tenant }, bound.microUsd)
      m.unboundedRequests.set({ tenant }, bound.unbounded)
      m.queueLength.set({ tenant }, tenantCells(tenant).queued)
    }
  }

  const scrape = Effect.suspend(() => {
    refresh()
    return Effect.promise(() => Promise.all([registry.metrics(), processMetrics().metrics()]))
  }).pipe(Effect.map(([own, process]) => own + process))

  return { telemetry, scrape, contentType: registry.contentType }
}

/** The metrics of one gateway; needs the config (tenants), the breakers and the open requests. */
export const layer: Layer.Layer<
  Metrics,
  never,
  LiveConfig | Breakers | RetryBudget | OpenRequests | Deadlines | BodyBuffers | UsageDbStats | UsageBacklog
> = Layer.effect(
  Metrics,
  Effect.gen(function* () {
    const live = yield* LiveConfig
    const breakers = yield* Breakers
    const openRequests = yield* OpenRequests
    const deadlines = yield* Deadlines
    const clock = yield* Clock.Clock
    const bodyBuffers = yield* BodyBuffers
    const tracing = yield* Tracing
    const retryBudget = yield* RetryBudget
    const usageDb = yield* UsageDbStats
    const usageBacklog = yield* UsageBacklog
    return make({
      usageDb,
      usageBacklog,
      tenants: () => [...live.get().tenants.keys()],
      breakers: breakers.view,
      overspend: openRequests.bound,
      now: () => clock.currentTimeMillisUnsafe(),
      relayBuffered: deadlines.bufferedBytes,
      bodyBuffered: bodyBuffers.held,
      traceSpans: tracing.counts,
      breakerStoreErrors: () => breakers.storeErrors() + retryBudget.storeErrors(),
    })
  }),
)

/** `Telemetry` that feeds the metrics (what `appLayer` provides unless a test overrides it). */
export const layerTelemetry: Layer.Layer<Telemetry, never, Metrics> = Layer.effect(
  Telemetry,
  Metrics.useSync((metrics) => metrics.telemetry),
)
