import type { Translations } from "./translation.js"
import type { PriceEntry, RouteConfig, TargetConfig } from "../config/model.js"
import type { ApiFormat, Endpoint } from "../domain/endpoint.js"
import { recordBudgetName, type BudgetName } from "../domain/errors.js"
import type { ParsedRequest } from "../domain/request.js"
import type { Admission } from "../limits/Limits.js"
import type { SessionTargetKey } from "../limits/Store.js"
import { cacheSavedMicroUsd, costMicroUsd } from "../meter/cost.js"
import type { UsageRecord } from "../meter/record.js"
import type { StreamMeter } from "../meter/stream.js"
import { makeUsageAcc, type UsageAcc } from "../meter/usage.js"
import { isoTime } from "../ops/jsonText.js"
import type { Plan } from "./admission.js"
import type { Principal } from "./auth.js"
import type { CallerContext, RequestTrace } from "./trace.js"

/**
 * The values one request produces, stage by stage (ARCHITECTURE.md "One
 * request"): who and what it is when it arrives, the plan, the admission,
 * the attempts, the committed response, and how it ended. The usage record
 * is built from them in one function, `usageRecord`.
 */

/** Fixed when the request arrives (after auth). */
export interface RequestInfo {
  readonly id: string
  /** Epoch ms the request arrived. */
  readonly startMs: number
  readonly endpoint: Endpoint
  readonly api: ApiFormat
  readonly principal: Principal
  /** The request's spans, when tracing is on (src/gateway/trace.ts). */
  readonly trace: RequestTrace | undefined
  /** The caller's W3C trace context, when it sent a valid `traceparent`. */
  readonly caller: CallerContext | undefined
}

/**
 * The attempts so far, kept by the attempt loop as it goes: the record and
 * the headers name the last attempt even when it produced no response.
 */
export interface AttemptTally {
  attempts: number
  target: TargetConfig | undefined
  /** The API endpoint the last attempt called (a translation's, on a translating route). */
  endpoint: Endpoint | undefined
  /** ms spent waiting for upstream attempts before the commit (the `upstream` part of server-timing). */
  upstreamMs: number
  /** Why the first target in the request's order did not serve it (an outcome's reason), once known. */
  firstReason: string | undefined
}

export const makeTally = (): AttemptTally => ({
  attempts: 0,
  target: undefined,
  endpoint: undefined,
  upstreamMs: 0,
  firstReason: undefined,
})

/** A sticky route's session (ADR 0073): whose target the store was asked for, and what it remembered. */
export interface StickySession {
  readonly key: SessionTargetKey
  /** The store's name of the target that served the session's last request (undefined: none). */
  readonly remembered: string | undefined
  /** Set when the session left its target: the target it left (`provider/model`) and why. */
  moved: { readonly from: string; readonly reason: string } | undefined
}

/** The response that went to the client: decided once its first byte was written (no retry after it). */
export interface Committed {
  readonly status: number
  /** `upstream_status_N` for an upstream error sent on unchanged; null for a 2xx. */
  readonly error: string | null
  readonly target: TargetConfig
  /** The API endpoint its attempt called. */
  readonly endpoint: Endpoint
  readonly price: PriceEntry | undefined
  /** Estimated cost at this target's price, micro-USD: the floor of an estimated or incomplete charge. */
  readonly targetEstimate: number
  /** A metered 2xx event stream: a failure after the commit ends it with an error event; anything else is cut. */
  readonly eventStream: boolean
  /** Epoch ms of the commit: with the tally's `upstreamMs`, Tollgate's own share of the time to first byte. */
  readonly committedMs: number
  /** The usage as it accumulates (the stream meter's, or the JSON body's at its end). */
  readonly usage: UsageAcc
  readonly meter: StreamMeter | undefined
}

/** How the request ended, for its record and its response. */
export interface Ending {
  readonly status: number
  readonly error: string | null
  readonly incomplete: boolean
  readonly usageEstimated: boolean
}

/** What one request reached: each stage's value, set once by the pipeline when its stage completes. */
export interface Progress {
  request: ParsedRequest | undefined
  /** The route the request named, once resolved and allowed. */
  route: RouteConfig | undefined
  plan: Plan | undefined
  /** On a translating route: the request translated for each upstream endpoint its targets need. */
  translations: Translations | undefined
  admission: Admission | undefined
  /** The budget that refused the admission or cut the stream (the record's `budget`). */
  budget: BudgetName | undefined
  readonly tally: AttemptTally
  /** On a sticky route, for a request with a session. */
  sticky: StickySession | undefined
  committed: Committed | undefined
}

export const makeProgress = (): Progress => ({
  request: undefined,
  route: undefined,
  plan: undefined,
  translations: undefined,
  admission: undefined,
  budget: undefined,
  tally: makeTally(),
  sticky: undefined,
  committed: undefined,
})

const NO_USAGE: UsageAcc = makeUsageAcc()

const ok = (status: number): boolean => status >= 200 && status < 300

/** The charge for the request in micro-USD (limits-and-budgets.md "Reserve and settle", step 3). */
export const costOf = (info: RequestInfo, progress: Progress, ending: Ending): number => {
  const committed = progress.committed
  if (committed?.price === undefined || !ok(ending.status)) return 0
  if (info.endpoint === "/v1/messages/count_tokens") return 0
  const used = costMicroUsd(committed.usage, committed.price)
  if (ending.usageEstimated || ending.incomplete) return Math.max(used, committed.targetEstimate)
  return used
}

/** What the prompt cache saved on the request, micro-USD (0 unless a priced 2xx read the cache). */
export const cacheSavedOf = (progress: Progress, ending: Ending): number => {
  const committed = progress.committed
  if (committed?.price === undefined || !ok(ending.status)) return 0
  return cacheSavedMicroUsd(committed.usage.cacheReadTokens, committed.price)
}

/** Tokens to count against tokens_per_minute at settle: the reported usage, else the admission's estimate. */
export const settledTokens = (progress: Progress, ending: Ending): number => {
  if (!ok(ending.status)) return 0
  const usage = progress.committed?.usage
  if (usage === undefined || !usage.reported) return progress.admission?.tokenCost ?? 0
  return usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
}

/** The usage record of the request (SPEC "Usage records"), from its stage values. */
export const usageRecord = (
  info: RequestInfo,
  progress: Progress,
  ending: Ending,
  cost: number,
  nowMs: number,
): UsageRecord => {
  const { request, route, plan } = progress
  const target = progress.committed?.target ?? progress.tally.target
  const usage = progress.committed?.usage ?? NO_USAGE
  return {
    ts: isoTime(info.startMs),
    request_id: info.id,
    tenant: info.principal.tenant.name,
    key_id: info.principal.keyId,
    route: route?.name ?? request?.model ?? "",
    endpoint: info.endpoint,
    stream: request?.stream ?? false,
    provider: target?.provider ?? null,
    model: target?.model ?? null,
    attempts: progress.tally.attempts,
    status: ending.status,
    input_tokens: usage.inputTokens,
    output_tokens: usage.outputTokens,
    cache_read_tokens: usage.cacheReadTokens,
    cache_write_tokens: usage.cacheWriteTokens,
    reserved_micro_usd: progress.admission?.reserved ?? 0,
    cost_micro_usd: cost,
    usage_estimated: ending.usageEstimated,
    incomplete: ending.incomplete,
    session: plan?.sessionId ?? null,
    duration_ms: Math.max(0, nowMs - info.startMs),
    error: ending.error,
    upstream_endpoint: progress.committed?.endpoint ?? progress.tally.endpoint ?? null,
    trace_id: info.trace?.traceId ?? info.caller?.traceId ?? null,
    budget: progress.budget === undefined ? null : recordBudgetName(progress.budget),
    cache_saved_micro_usd: cacheSavedOf(progress, ending),
    moved_from: progress.sticky?.moved?.from ?? null,
    moved_reason: progress.sticky?.moved?.reason ?? null,
  }
}

/**
 * Tollgate's own time on the request, ms: until the commit for a relayed
 * response (what follows is the upstream's pace), until `nowMs` otherwise,
 * less the time spent waiting for upstream attempts.
 */
export const overheadMs = (info: RequestInfo, progress: Progress, nowMs: number): number => {
  const end = progress.committed?.committedMs ?? nowMs
  return Math.max(0, end - info.startMs - progress.tally.upstreamMs)
}
