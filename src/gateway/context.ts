import { isoTime } from "../ops/jsonText.js"
import type { Fiber } from "effect"
import type { ApiFormat, PriceEntry, RouteConfig, TargetConfig } from "../config/model.js"
import { costMicroUsd } from "../meter/cost.js"
import type { Admission } from "../limits/Limits.js"
import type { UsageRecord } from "../meter/record.js"
import { makeUsageAcc, type UsageAcc } from "../meter/usage.js"
import type { Principal } from "./auth.js"
import type { Endpoint } from "../domain/endpoint.js"
import type { ParsedRequest } from "../domain/request.js"
import type { LoopState } from "./runRoute.js"
import type { CancelSlot } from "./attempt.js"
import type { StreamMeter } from "../meter/stream.js"
import type { Listed } from "../ops/IndexedList.js"

/**
 * The mutable state of one request, filled in as it moves through the
 * gateway and read once, at the end, to write its usage record. One object
 * per request; no Effect per field.
 */
export class RequestContext implements LoopState, CancelSlot, Listed {
  readonly requestId: string
  readonly startMs: number
  readonly endpoint: Endpoint
  readonly api: ApiFormat
  readonly principal: Principal
  route: RouteConfig | undefined = undefined
  request: ParsedRequest | undefined = undefined
  /** The target whose response reached (or was meant for) the client. */
  target: TargetConfig | undefined = undefined
  price: PriceEntry | undefined = undefined
  attempts = 0
  status = 0
  /** The client response has started (headers and first byte written): no retry or fallback any more. */
  committed = false
  /**
   * The committed response is a metered event stream (a 2xx `text/event-stream`): a failure after the commit
   * ends it with an error event. Any other committed response (JSON, sized or chunked) is cut instead.
   */
  eventStream = false
  /** Epoch ms of the commit (0 until then): with `upstreamMs`, Tollgate's own share of the time to first byte. */
  committedMs = 0
  usage: UsageAcc = makeUsageAcc()
  /** Estimated input tokens of the request (ADR 0003). */
  inputEstimate = 0
  /** Output tokens reserved: the smaller of max_tokens and reservation.output_tokens (ADR 0018). */
  reservedOutput = 0
  /** Prices of the route's targets (unpriced targets left out): the reservation and the overspend bound use the highest. */
  routePrices: ReadonlyArray<PriceEntry> = []
  /** The admission to settle; undefined until admitted. */
  admission: Admission | undefined = undefined
  /** Estimated cost at the serving target's price, micro-USD: the floor of an estimated or incomplete charge. */
  targetEstimate = 0
  usageEstimated = false
  incomplete = false
  session: string | null = null
  /** ms spent waiting for upstream attempts before the commit (the `upstream` part of server-timing). */
  upstreamMs = 0
  error: string | null = null
  recorded = false
  /** The attempt loop's held response and unused permit, released by the request's finalizer. */
  held: LoopState["held"] = undefined
  permit: LoopState["permit"] = undefined
  /** Counted by OpenRequests (admitted and not yet done). */
  openCounted = false
  /** Stops the attempt or relay the request is waiting on (its finalizer calls it on interruption). */
  cancel: (() => void) | undefined = undefined
  /** The request's fiber while it runs, and its place among the requests in flight (Gateway). */
  fiber: Fiber.Fiber<void> | undefined = undefined
  listIndex = -1
  /** The meter of a stream that was committed and not yet closed (the finalizer closes it). */
  openStream: StreamMeter | undefined = undefined

  constructor(requestId: string, startMs: number, endpoint: Endpoint, api: ApiFormat, principal: Principal) {
    this.requestId = requestId
    this.startMs = startMs
    this.endpoint = endpoint
    this.api = api
    this.principal = principal
  }

  /** The charge for this request in micro-USD (the seed's "Reserve and settle" step 3). */
  cost(): number {
    if (this.price === undefined || this.status < 200 || this.status >= 300) return 0
    if (this.endpoint === "/v1/messages/count_tokens") return 0
    const used = costMicroUsd(this.usage, this.price)
    if (this.usageEstimated || this.incomplete) return Math.max(used, this.targetEstimate)
    return used
  }

  /** Tokens to count against tokens_per_minute at settle: the reported usage, else the admission's estimate. */
  settledTokens(): number {
    if (this.status < 200 || this.status >= 300) return 0
    if (!this.usage.reported) return this.admission?.tokenCost ?? 0
    const u = this.usage
    return u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens
  }

  /** The usage record (SPEC "Usage records"). */
  toRecord(nowMs: number): UsageRecord {
    return {
      ts: isoTime(this.startMs),
      request_id: this.requestId,
      tenant: this.principal.tenant.name,
      key_id: this.principal.keyId,
      route: this.route?.name ?? this.request?.model ?? "",
      endpoint: this.endpoint,
      stream: this.request?.stream ?? false,
      provider: this.target?.provider ?? null,
      model: this.target?.model ?? null,
      attempts: this.attempts,
      status: this.status,
      input_tokens: this.usage.inputTokens,
      output_tokens: this.usage.outputTokens,
      cache_read_tokens: this.usage.cacheReadTokens,
      cache_write_tokens: this.usage.cacheWriteTokens,
      reserved_micro_usd: this.admission?.reserved ?? 0,
      cost_micro_usd: this.cost(),
      usage_estimated: this.usageEstimated,
      incomplete: this.incomplete,
      session: this.session,
      duration_ms: Math.max(0, nowMs - this.startMs),
      error: this.error,
    }
  }
}
