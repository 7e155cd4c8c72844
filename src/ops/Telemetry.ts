import { Context } from "effect"
import type { UsageRecord } from "../meter/record.js"

/** What telemetry learns of a finished request. */
export interface RequestDone {
  readonly record: UsageRecord
  /** The configured route that served it; "" when the request named none (never the client's own string). */
  readonly route: string
  /** Its response started with an upstream's answer (a budget refusal after that is the stream cutoff). */
  readonly committed: boolean
  /** Tollgate's own time until the commit (or the end when nothing was relayed), upstream waits left out, ms. */
  readonly overheadMs: number
  /** A 2xx served by a target that has no price in the price table: its cost was recorded as 0. */
  readonly unpriced: boolean
}

/** How one upstream attempt ended, for metrics. */
export type AttemptResult = "success" | "failure" | "neutral"

/**
 * What the request path tells operations about (metrics, logs). The
 * gateway calls these synchronously at a handful of points per request —
 * never per chunk — so an implementation must be cheap and must not throw.
 */
export interface TelemetryService {
  /** One request is done: its usage record was written (every authenticated request, once). */
  readonly requestDone: (done: RequestDone) => void
  /** One upstream attempt ended (or was handed to the relay), `ms` after it was sent. */
  readonly attempt: (provider: string, model: string, result: AttemptResult, ms: number) => void
  /** Another attempt follows: the same target again (`retry`) or the next one (`fallback`). */
  readonly nextAttempt: (kind: "retry" | "fallback") => void
  /** The retry budget refused an extra attempt. */
  readonly retryBudgetRefused: () => void
  /** The limit store failed (ADR 0006). */
  readonly storeError: () => void
  /** An admission evicted `count` of the tenant's least recently used sessions (`sessions.max_per_tenant`). */
  readonly sessionsEvicted: (tenant: string, count: number) => void
  /** A request came without a valid key (401). */
  readonly authFailed: () => void
  /** A client connection was closed as it arrived (`server.max_connections`). */
  readonly connectionDropped: () => void
  /** An event stream was committed to a client / ended. */
  readonly streamOpened: () => void
  readonly streamClosed: () => void
  /**
   * A request was served by a target without a price (cost recorded as 0). `requestDone` counts
   * this itself when its `unpriced` is set; route, provider and model come from the config.
   */
  readonly unpriced: (route: string, provider: string, model: string) => void
  /** A sticky route's session left the target that served it for `provider`/`model` (ADR 0073). */
  readonly sessionMoved: (route: string, provider: string, model: string) => void
  /** A config reload (SIGHUP, `POST /admin/reload`) was applied (`ok`) or refused (`error`). */
  readonly configReloaded: (result: "ok" | "error") => void
  /** A request of `tenant` began waiting in its queue (ADR 0057). */
  readonly queueEntered: (tenant: string) => void
  /** It stopped waiting after `waitedMs`: served, gone, or refused when `max_wait` ran out (`timedOut`). */
  readonly queueLeft: (tenant: string, waitedMs: number, timedOut: boolean) => void
}

export class Telemetry extends Context.Service<Telemetry, TelemetryService>()("tollgate/ops/Telemetry") {}

const noop = () => {}

/** Telemetry that records nothing (the default of `Limits.make` outside a gateway). */
export const noopTelemetry: TelemetryService = {
  requestDone: noop,
  attempt: noop,
  nextAttempt: noop,
  retryBudgetRefused: noop,
  storeError: noop,
  sessionsEvicted: noop,
  authFailed: noop,
  connectionDropped: noop,
  streamOpened: noop,
  streamClosed: noop,
  unpriced: noop,
  sessionMoved: noop,
  configReloaded: noop,
  queueEntered: noop,
  queueLeft: noop,
}
