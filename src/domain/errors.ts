import { Schema } from "effect"
import type { ApiFormat, Endpoint } from "./endpoint.js"

/**
 * The errors that Tollgate itself answers with. Each carries what the
 * response, the log and the usage record need as fields; `ERRORS` below is
 * the one table that maps them to a status, each API's error type and the
 * usage record's error code.
 */

export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {
  message: Schema.String,
}) {}

export class RouteNotAllowed extends Schema.TaggedError<RouteNotAllowed>()("RouteNotAllowed", {
  route: Schema.String,
}) {
  override get message(): string {
    return `this key may not use model "${this.route}"`
  }
}

export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", {
  message: Schema.String,
}) {}

/** A path that no endpoint serves (not an unknown model: no `model_not_found` code). */
export class EndpointNotFound extends Schema.TaggedError<EndpointNotFound>()("EndpointNotFound", {
  message: Schema.String,
}) {}

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
}) {}

export class BodyTooLarge extends Schema.TaggedError<BodyTooLarge>()("BodyTooLarge", {
  limitBytes: Schema.Number,
}) {
  override get message(): string {
    return `request body is larger than ${this.limitBytes} bytes`
  }
}

export class Draining extends Schema.TaggedError<Draining>()("Draining", {}) {
  override get message(): string {
    return "Tollgate is shutting down; retry against another instance"
  }
}

/** The client took longer than `server.body_timeout` to send its request body: 408. */
export class BodyTimeout extends Schema.TaggedError<BodyTimeout>()("BodyTimeout", {
  timeoutMs: Schema.Number,
}) {
  override get message(): string {
    return `the request body did not arrive within ${this.timeoutMs / 1000} s`
  }
}

/** The request bodies held in memory are at `server.max_buffered_bytes` (or the tenant's half of it): 503. */
export class BuffersFull extends Schema.TaggedError<BuffersFull>()("BuffersFull", {}) {
  override get message(): string {
    return "Tollgate is holding as many request bodies as it may; retry shortly"
  }
}

/** What happened to one target while Tollgate tried a route (the `targets` list of a 502). */
export const TargetOutcome = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  outcome: Schema.Literals(["failed", "skipped"]),
  /** The stable machine code (`connection_failed`, `status 529`, `breaker_open`, …). */
  reason: Schema.String,
  /**
   * The low-level cause of an attempt that got no response, for operators
   * (`connect ECONNREFUSED 127.0.0.1:9`, `getaddrinfo ENOTFOUND …`, a TLS
   * error): at most 200 characters, never headers or keys.
   */
  cause: Schema.optional(Schema.String),
})
export type TargetOutcome = typeof TargetOutcome.Type

/** No attempt produced an upstream response (or every target was blocked). */
export class NoUpstreamResponse extends Schema.TaggedError<NoUpstreamResponse>()("NoUpstreamResponse", {
  message: Schema.String,
  targets: Schema.Array(TargetOutcome),
  /** Seconds until the first blocked target may be tried again; only when every target was blocked. */
  retryAfterSeconds: Schema.optional(Schema.Number),
}) {}

/** A failure inside Tollgate: a bug, never an upstream's fault. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  message: Schema.String,
}) {}

export type GatewayError =
  | RateLimited
  | BudgetExceeded
  | StoreUnavailable
  | UsageLogFull
  | Unauthenticated
  | RouteNotAllowed
  | RouteNotFound
  | EndpointNotFound
  | InvalidRequest
  | BodyTooLarge
  | BuffersFull
  | BodyTimeout
  | Draining
  | NoUpstreamResponse
  | InternalError

/** A rate limit refused the request (429). */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number,
  /** When the store admits one more, ms from the refusal (a request or token window; never sent to clients). */
  retryAfterMs: Schema.optional(Schema.Number),
  /** The `ratelimit-*` headers at the refusal. */
  rateHeaders: Schema.optional(Schema.Record(Schema.String, Schema.String)),
}) {}

/**
 * The budgets a request can be refused by (limits-and-budgets.md "Budgets"):
 * the tenant's by their config names (`tenants.NAME.budgets.day`, …), a
 * key's as `key.day`, `key.week`, `key.month` (`keys[].budgets`).
 */
export const BUDGET_NAMES = ["key.day", "key.week", "key.month", "day", "week", "month", "session"] as const
export type BudgetName = (typeof BUDGET_NAMES)[number]

/** The usage record's `budget` value of a budget: `tenant.day`, `key.week`, `session`, … */
export const recordBudgetName = (budget: BudgetName): string =>
  budget === "session" || budget.startsWith("key.") ? budget : `tenant.${budget}`

/** A hard budget has no money left for the request (402). */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  message: Schema.String,
  /** The budget that refused: the first without room, narrowest first (key day … tenant month, session). */
  budget: Schema.Literals(BUDGET_NAMES),
  rateHeaders: Schema.optional(Schema.Record(Schema.String, Schema.String)),
}) {}

/** The limit store is down and the tenant has a hard budget (503, ADR 0006). */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {}) {
  override get message(): string {
    return "the limit store is unavailable and this tenant has a hard budget; retry shortly"
  }
}

/** The usage file refuses writes, its backlog is full, and the tenant has a hard budget (503, ADR 0070). */
export class UsageLogFull extends Schema.TaggedError<UsageLogFull>()("UsageLogFull", {}) {
  override get message(): string {
    return "usage cannot be recorded right now (the gateway's usage log is full) and this tenant has a hard budget; retry shortly"
  }
}

/** How one error tag is answered: the HTTP status, each API's error type, and the usage record's code. */
interface ErrorRow {
  readonly status: number
  /** Anthropic `error.type`. */
  readonly anthropic: string
  /** OpenAI `error.type`. */
  readonly openai: string
  /** OpenAI `error.code` (null when the API has none for it). */
  readonly openaiCode: string | null
  /** The `error` field of the usage record (snake_case, stable). */
  readonly record: string
}

/** The one table from error tag to status, error types per API, and record code (SPEC "HTTP API"). */
export const ERRORS: { readonly [Tag in GatewayError["_tag"]]: ErrorRow } = {
  Unauthenticated: {
    status: 401,
    anthropic: "authentication_error",
    openai: "authentication_error",
    openaiCode: "invalid_api_key",
    record: "unauthenticated",
  },
  RouteNotAllowed: {
    status: 403,
    anthropic: "permission_error",
    openai: "permission_error",
    openaiCode: null,
    record: "route_not_allowed",
  },
  RouteNotFound: {
    status: 404,
    anthropic: "not_found_error",
    openai: "not_found_error",
    openaiCode: "model_not_found",
    record: "route_not_found",
  },
  EndpointNotFound: {
    status: 404,
    anthropic: "not_found_error",
    openai: "not_found_error",
    openaiCode: null,
    record: "endpoint_not_found",
  },
  InvalidRequest: {
    status: 400,
    anthropic: "invalid_request_error",
    openai: "invalid_request_error",
    openaiCode: null,
    record: "invalid_request",
  },
  BodyTooLarge: {
    status: 413,
    anthropic: "request_too_large",
    openai: "invalid_request_error",
    openaiCode: "request_too_large",
    record: "request_too_large",
  },
  BodyTimeout: {
    status: 408,
    anthropic: "invalid_request_error",
    openai: "invalid_request_error",
    openaiCode: "request_timeout",
    record: "body_timeout",
  },
  BuffersFull: {
    status: 503,
    anthropic: "overloaded_error",
    openai: "overloaded_error",
    openaiCode: null,
    record: "buffers_full",
  },
  Draining: {
    status: 503,
    anthropic: "overloaded_error",
    openai: "overloaded_error",
    openaiCode: null,
    record: "draining",
  },
  NoUpstreamResponse: {
    status: 502,
    anthropic: "api_error",
    openai: "api_error",
    openaiCode: null,
    record: "no_upstream_response",
  },
  InternalError: {
    status: 500,
    anthropic: "api_error",
    openai: "api_error",
    openaiCode: null,
    record: "internal_error",
  },
  RateLimited: {
    status: 429,
    anthropic: "rate_limit_error",
    openai: "rate_limit_error",
    openaiCode: "rate_limit_exceeded",
    record: "rate_limited",
  },
  BudgetExceeded: {
    status: 402,
    anthropic: "budget_exceeded",
    openai: "budget_exceeded",
    openaiCode: "budget_exceeded",
    record: "budget_exceeded",
  },
  StoreUnavailable: {
    status: 503,
    anthropic: "overloaded_error",
    openai: "overloaded_error",
    openaiCode: null,
    record: "store_unavailable",
  },
  UsageLogFull: {
    status: 503,
    anthropic: "overloaded_error",
    openai: "overloaded_error",
    openaiCode: null,
    record: "usage_log_full",
  },
}

/** The `error` code a usage record carries for an error Tollgate answered itself. */
export const errorCode = (error: GatewayError): string =>
  error._tag === "NoUpstreamResponse" && error.retryAfterSeconds !== undefined
    ? "all_targets_blocked"
    : ERRORS[error._tag].record

/** A response that Tollgate makes itself. */
export interface ErrorResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/** The status, headers and body of `error` in the error format of `api` (SPEC "HTTP API"). */
export const renderError = (api: ApiFormat, error: GatewayError): ErrorResponse => {
  const row = ERRORS[error._tag]
  const headers: Record<string, string> = { "content-type": "application/json" }
  const detail: Record<string, unknown> = {
    type: api === "anthropic" ? row.anthropic : row.openai,
    message: error.message,
  }
  switch (error._tag) {
    case "NoUpstreamResponse":
      detail["targets"] = error.targets
      if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.retryAfterSeconds)
      break
    case "BuffersFull":
      // Memory is short: the rest of the upload is not read at all, and the connection closes.
      headers["retry-after"] = "1"
      headers["connection"] = "close"
      break
    case "Draining":
    case "BodyTimeout":
    case "BodyTooLarge":
      // A refused upload may still be arriving: the connection is not reused for a next request.
      headers["connection"] = "close"
      break
    case "RateLimited":
      Object.assign(headers, error.rateHeaders)
      headers["retry-after"] = String(error.retryAfterSeconds)
      break
    case "BudgetExceeded":
      Object.assign(headers, error.rateHeaders)
      break
    case "StoreUnavailable":
    case "UsageLogFull":
      headers["retry-after"] = "5"
      break
  }
  const body =
    api === "anthropic"
      ? JSON.stringify({ type: "error", error: detail })
      : JSON.stringify({ error: { ...detail, code: row.openaiCode } })
  return { status: row.status, headers, body }
}

/**
 * The SSE event that ends a stream which failed after its first byte, in the
 * format of the client's endpoint (SPEC "HTTP API", "More of the providers'
 * APIs"): Anthropic `event: error`; Chat Completions `data: {"error":…}`;
 * Responses `event: error` with `code`.
 */
export const streamErrorEvent = (endpoint: Endpoint, type: string, message: string): string => {
  switch (endpoint) {
    case "/v1/chat/completions":
    case "/v1/embeddings":
      return `data: ${JSON.stringify({ error: { type, message, code: null } })}\n\n`
    case "/v1/responses":
      return `event: error\ndata: ${JSON.stringify({ type: "error", code: type, message })}\n\n`
    default:
      return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type, message } })}\n\n`
  }
}
