import type { IncomingHttpHeaders } from "node:http"
import type { TargetConfig } from "../config/model.js"
import type { Endpoint } from "../domain/endpoint.js"
import type { UsageRecord } from "../meter/record.js"
import type { UsageAcc } from "../meter/usage.js"
import type { EncodedAttributes, RequestSpan, RequestTracer, SpanEnd } from "../ops/Tracing.js"
import type { ProviderClient } from "../providers/ProviderClient.js"

/**
 * One request's trace (SPEC "Tracing", ADR 0054): a SERVER span from its
 * arrival to its usage record, and a CLIENT span per upstream attempt, its
 * siblings showing retries and fallbacks. Plain methods the pipeline calls at
 * its stages; the request path holds no `RequestTrace` when tracing is off.
 * Attributes are ids, names, counts and statuses — never prompt or
 * completion text, never a header value.
 */

/** A caller's W3C trace context, from a valid `traceparent` (and its `tracestate`). */
export interface CallerContext {
  readonly traceparent: string
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
  readonly tracestate: string | undefined
}

/**
 * W3C `traceparent`: version 00 exactly; a later version (not `ff`) is read
 * by its first four fields, which may be followed by `-` and more (W3C
 * "Versioning of traceparent").
 */
const TRACEPARENT =
  /^(?:00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})|(?!ff|00)[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?)$/
const ZERO_TRACE = "00000000000000000000000000000000"
const ZERO_SPAN = "0000000000000000"
/** Longest `tracestate` passed on (W3C: at most 32 members; a longer header is dropped, not truncated). */
const MAX_TRACESTATE = 512

/**
 * The caller's trace context: undefined without a `traceparent`, or with one
 * that is not W3C version 00 (a malformed header starts a new trace, as W3C
 * asks).
 */
export const callerContext = (headers: IncomingHttpHeaders): CallerContext | undefined => {
  const traceparent = headers["traceparent"]
  if (typeof traceparent !== "string") return undefined
  const match = TRACEPARENT.exec(traceparent.trim())
  if (match === null) return undefined
  const traceId = match[1] ?? match[4]!
  const spanId = match[2] ?? match[5]!
  const flags = match[3] ?? match[6]!
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined
  const state = headers["tracestate"]
  const tracestate = typeof state === "string" && state.length <= MAX_TRACESTATE ? state : undefined
  const sampled = (parseInt(flags, 16) & 1) === 1
  // Passed on as version 00 (what this gateway speaks), whatever version came.
  return {
    traceparent: `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`,
    traceId,
    spanId,
    sampled,
    tracestate,
  }
}

/** The `traceparent` of `span` (W3C version 00). */
export const traceparentOf = (span: RequestSpan): string =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/** Attaches the trace context an attempt carries upstream: its own span's, or the caller's as it came. */
export const carryContext = (
  headers: Record<string, string>,
  attempt: RequestSpan | undefined,
  caller: CallerContext | undefined,
): void => {
  if (attempt !== undefined) headers["traceparent"] = traceparentOf(attempt)
  else if (caller !== undefined) headers["traceparent"] = caller.traceparent
  else return
  if (caller?.tracestate !== undefined) headers["tracestate"] = caller.tracestate
}

/** `gen_ai.operation.name` of an upstream endpoint (OpenTelemetry GenAI conventions). */
const operationOf = (endpoint: Endpoint): string => {
  switch (endpoint) {
    case "/v1/embeddings":
      return "embeddings"
    case "/v1/messages/count_tokens":
      return "count_tokens"
    default:
      return "chat"
  }
}

/** `gen_ai.provider.name` of a provider kind (the conventions' well-known values; Ollama has none). */
const providerNameOf = (kind: ProviderClient["Service"]["kind"]): string => {
  switch (kind) {
    case "vertex":
      return "gcp.vertex_ai"
    case "bedrock":
      return "aws.bedrock"
    case "azure":
      return "azure.ai.openai"
    case "gemini":
      return "gcp.gemini"
    default:
      return kind
  }
}

const failed = (type: string, message: string): SpanEnd => ({ code: "error", type, message })
const OK: SpanEnd = { code: "ok" }
const INTERRUPTED: SpanEnd = { code: "interrupted" }

/** Ends that are not the upstream's failure, when a response was cut short (the logger's rule, src/ops/logger.ts). */
const NOT_UPSTREAM_CUTS = new Set(["client_disconnected", "client_stalled", "budget_exceeded", "shutdown"])
/** Ends of a relayed response that are Tollgate's or the client's doing: its attempt did not fail. */
const NOT_THE_ATTEMPTS = new Set([...NOT_UPSTREAM_CUTS, "store_unavailable", "internal_error"])
/** Ends where nobody was left to answer: the span is ended as interrupted (status unset). */
const LEFT = new Set(["client_disconnected", "shutdown"])

/** One attempt's span and what the request's end still needs to know about it. */
interface OpenAttempt {
  readonly span: RequestSpan
  status: number | undefined
}

/**
 * A request's spans. An unsampled trace (sample_ratio, or a caller that does
 * not sample) is never exported: it keeps only the ids that go upstream and
 * into the record, and its methods return at once.
 */
export class RequestTrace {
  readonly server: RequestSpan
  readonly sampled: boolean
  private attempt: OpenAttempt | undefined = undefined

  constructor(
    private readonly tracer: RequestTracer,
    endpoint: Endpoint,
    requestId: string,
    tenant: string,
    keyId: string,
    caller: CallerContext | undefined,
  ) {
    const span = (this.server = tracer.span(`POST ${endpoint}`, "server", caller))
    this.sampled = span.sampled
    if (!this.sampled) return
    const shared = sharedOf(tracer)
    span.attributes(
      once(shared.endpoints, endpoint, () =>
        tracer.encode({ "http.request.method": "POST", "http.route": endpoint, "url.path": endpoint }),
      ),
    )
    span.attribute("tollgate.request_id", requestId)
    span.attributes(
      once(
        once(shared.keys, tenant, () => new Map<string, EncodedAttributes>()),
        keyId,
        () => tracer.encode({ "tollgate.tenant": tenant, "tollgate.key_id": keyId }),
      ),
    )
  }

  get traceId(): string {
    return this.server.traceId
  }

  /** A target skipped because its breaker is open or it is cooling down. */
  breakerSkip(target: TargetConfig, reason: string): void {
    if (!this.sampled) return
    this.server.event("tollgate.breaker_skip", this.tracer.now(), {
      "tollgate.provider": target.provider,
      "gen_ai.request.model": target.model,
      "tollgate.reason": reason,
    })
  }

  /** A sticky route's session left the target that served it (`from`, `provider/model`) for `to` (ADR 0073). */
  sessionMoved(from: string, to: TargetConfig, reason: string): void {
    if (!this.sampled) return
    this.server.event("tollgate.session_moved", this.tracer.now(), {
      "tollgate.moved_from": from,
      "tollgate.provider": to.provider,
      "gen_ai.request.model": to.model,
      "tollgate.reason": reason,
    })
  }

  /** A retry or fallback the retry budget did not pay for: the attempts end here. */
  retryBudgetRefused(target: TargetConfig): void {
    if (!this.sampled) return
    this.server.event("tollgate.retry_budget_refused", this.tracer.now(), {
      "tollgate.provider": target.provider,
      "gen_ai.request.model": target.model,
    })
  }

  /**
   * Opens the span of attempt number `attempt` (1-based) and returns it, for
   * the `traceparent` its request carries upstream.
   */
  startAttempt(
    attempt: number,
    client: Pick<ProviderClient["Service"], "kind">,
    target: TargetConfig,
    endpoint: Endpoint,
    origin: string,
  ): RequestSpan {
    const operation = operationOf(endpoint)
    const span = this.tracer.span(`${operation} ${target.model}`, "client", this.server)
    // Unsampled: the span only lends its id to the upstream's traceparent.
    if (!this.sampled) return span
    // What every attempt at this target through this endpoint carries, encoded once.
    const shared = sharedOf(this.tracer)
    let byEndpoint = shared.targets.get(target)
    if (byEndpoint === undefined) shared.targets.set(target, (byEndpoint = new Map()))
    span.attributes(
      once(byEndpoint, `${endpoint} ${origin}`, () => {
        const server = addressOf(origin)
        return this.tracer.encode({
          "gen_ai.operation.name": operation,
          "gen_ai.provider.name": providerNameOf(client.kind),
          "gen_ai.request.model": target.model,
          "tollgate.provider": target.provider,
          "tollgate.upstream_endpoint": endpoint,
          "server.address": server.address,
          ...(server.port === undefined ? {} : { "server.port": server.port }),
        })
      }),
    )
    span.attribute("tollgate.attempt", attempt)
    this.attempt = { span, status: undefined }
    return span
  }

  /** The attempt produced no response (connection failure, timeout before the head). */
  attemptFailed(reason: string, detail: string): void {
    const open = this.attempt
    if (open === undefined) return
    this.attempt = undefined
    open.span.attribute("error.type", reason)
    open.span.end(this.tracer.now(), failed(reason, detail))
  }

  /** The attempt's response head arrived with `status`. */
  attemptResponded(status: number): void {
    const open = this.attempt
    if (open === undefined) return
    open.status = status
    open.span.attribute("http.response.status_code", status)
  }

  /**
   * The attempt's response is not sent on (another attempt follows, or it is
   * held as the last answer): `errorType` is its status code, or the error
   * type of an in-band error or broken stream before any content.
   */
  attemptDiscarded(errorType: string, reason: string): void {
    const open = this.attempt
    if (open === undefined) return
    this.attempt = undefined
    open.span.attribute("error.type", errorType)
    open.span.end(this.tracer.now(), failed(errorType, reason))
  }

  /** The response's first byte went to the client: from here nothing is retried. */
  committed(status: number): void {
    if (!this.sampled) return
    this.server.event("tollgate.commit", this.tracer.now(), { "http.response.status_code": status })
  }

  /** A hard-budget stream stopped by the approximate cutoff (ADR 0029). */
  cutoff(reason: string): void {
    if (!this.sampled) return
    this.server.event("tollgate.stream_cutoff", this.tracer.now(), { "error.type": reason })
  }

  /**
   * The request ended with `record`: the open attempt's span ends with the
   * usage and the response model (`usage` is the committed response's), then
   * the SERVER span with the route, cost and status. A span fails for a 5xx,
   * a failure inside Tollgate, or a response the upstream cut short; a
   * request whose client left (or that the drain ended) is interrupted.
   */
  finish(record: UsageRecord, usage: UsageAcc | undefined): void {
    if (!this.sampled) return
    const now = this.tracer.now()
    const error = record.error
    const open = this.attempt
    if (open !== undefined) {
      this.attempt = undefined
      const span = open.span
      if (usage !== undefined && record.endpoint !== "/v1/messages/count_tokens") {
        if (usage.model !== undefined) span.attribute("gen_ai.response.model", usage.model)
        span.attribute("gen_ai.usage.input_tokens", record.input_tokens)
        span.attribute("gen_ai.usage.output_tokens", record.output_tokens)
        if (record.cache_read_tokens > 0)
          span.attribute("gen_ai.usage.cache_read.input_tokens", record.cache_read_tokens)
        if (record.cache_write_tokens > 0)
          span.attribute("gen_ai.usage.cache_creation.input_tokens", record.cache_write_tokens)
        if (record.usage_estimated) span.attribute("tollgate.usage_estimated", true)
      }
      const status = open.status
      if (error !== null && LEFT.has(error)) span.end(now, INTERRUPTED)
      else if (status === undefined) {
        span.attribute("error.type", error ?? "no_response")
        span.end(now, failed(error ?? "no_response", error ?? "no response"))
      } else if (status >= 400) {
        span.attribute("error.type", String(status))
        span.end(now, failed(String(status), `status ${status}`))
      } else if (record.incomplete && error !== null && !NOT_THE_ATTEMPTS.has(error)) {
        // The upstream broke the response after its first byte (a timeout, a reset, a malformed stream).
        span.attribute("error.type", error)
        span.end(now, failed(error, error))
      } else span.end(now, OK)
    }
    const server = this.server
    server.attribute("tollgate.route", record.route)
    server.attribute("tollgate.attempts", record.attempts)
    server.attribute("tollgate.cost_micro_usd", record.cost_micro_usd)
    server.attribute("http.response.status_code", record.status)
    if (record.provider !== null) server.attribute("tollgate.provider", record.provider)
    if (record.stream) server.attribute("tollgate.stream", true)
    if (record.incomplete) server.attribute("tollgate.incomplete", true)
    if (error === null) return server.end(now, OK)
    server.attribute("error.type", error)
    if (LEFT.has(error)) server.end(now, INTERRUPTED)
    else if (
      record.status >= 500 ||
      error === "internal_error" ||
      (record.incomplete && !NOT_UPSTREAM_CUTS.has(error))
    )
      server.end(now, failed(error, error))
    else server.end(now, OK)
  }
}

/**
 * Attributes that many spans share, encoded once per tracer: each endpoint's,
 * each tenant's key's (the config's and the runtime keys), each target's per
 * endpoint (by the config's target objects; a reload's new ones replace them).
 */
interface SharedAttributes {
  readonly endpoints: Map<string, EncodedAttributes>
  readonly keys: Map<string, Map<string, EncodedAttributes>>
  readonly targets: WeakMap<TargetConfig, Map<string, EncodedAttributes>>
}

const sharedAttributes = new WeakMap<RequestTracer, SharedAttributes>()

const sharedOf = (tracer: RequestTracer): SharedAttributes => {
  let shared = sharedAttributes.get(tracer)
  if (shared === undefined)
    sharedAttributes.set(tracer, (shared = { endpoints: new Map(), keys: new Map(), targets: new WeakMap() }))
  return shared
}

/** `map`'s value for `key`, made by `make` the first time (a map past 4,096 entries starts again). */
const once = <V>(map: Map<string, V>, key: string, make: () => V): V => {
  let value = map.get(key)
  if (value === undefined) {
    if (map.size >= 4_096) map.clear()
    map.set(key, (value = make()))
  }
  return value
}

/** `server.address` and `server.port` of each upstream origin, parsed once (there are as many as providers). */
const addresses = new Map<string, { readonly address: string; readonly port: number | undefined }>()

const addressOf = (origin: string) => {
  let known = addresses.get(origin)
  if (known === undefined) {
    let address = origin
    let port: number | undefined
    try {
      const url = new URL(origin)
      address = url.hostname
      port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
    } catch {
      // Not a URL: named as it is.
    }
    if (addresses.size >= 1024) addresses.clear()
    addresses.set(origin, (known = { address, port }))
  }
  return known
}
