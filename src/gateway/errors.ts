import { Schema } from "effect"

/**
 * The errors that Tollgate itself answers with. Each carries what the
 * response, the log and the usage record need as fields; `src/http/errorBody.ts`
 * is the one place that maps them to a status and the API's error body.
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

/** What happened to one target while Tollgate tried a route (the `targets` list of a 502). */
export const TargetOutcome = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  outcome: Schema.Literals(["failed", "skipped"]),
  reason: Schema.String,
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
  | Unauthenticated
  | RouteNotAllowed
  | RouteNotFound
  | InvalidRequest
  | BodyTooLarge
  | Draining
  | NoUpstreamResponse
  | InternalError

/** A rate limit refused the request (429). */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number,
  /** The `ratelimit-*` headers at the refusal. */
  rateHeaders: Schema.optional(Schema.Record(Schema.String, Schema.String)),
}) {}

/** A hard budget has no money left for the request (402). */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  message: Schema.String,
  budget: Schema.Literals(["month", "session"]),
  rateHeaders: Schema.optional(Schema.Record(Schema.String, Schema.String)),
}) {}

/** The limit store is down and the tenant has a hard budget (503, ADR 0006). */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {}) {
  override get message(): string {
    return "the limit store is unavailable and this tenant has a hard budget; retry shortly"
  }
}

/** The `error` code a usage record carries for an error Tollgate answered itself (snake_case, stable). */
export const errorCode = (error: GatewayError): string => {
  switch (error._tag) {
    case "RateLimited":
      return "rate_limited"
    case "BudgetExceeded":
      return "budget_exceeded"
    case "StoreUnavailable":
      return "store_unavailable"
    case "Unauthenticated":
      return "unauthenticated"
    case "RouteNotAllowed":
      return "route_not_allowed"
    case "RouteNotFound":
      return "route_not_found"
    case "InvalidRequest":
      return "invalid_request"
    case "BodyTooLarge":
      return "request_too_large"
    case "Draining":
      return "draining"
    case "NoUpstreamResponse":
      return error.retryAfterSeconds === undefined ? "no_upstream_response" : "all_targets_blocked"
    case "InternalError":
      return "internal_error"
  }
}
