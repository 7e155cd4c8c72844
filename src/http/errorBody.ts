import type { ApiFormat } from "../config/model.js"
import type { GatewayError } from "../gateway/errors.js"

/** A response that Tollgate makes itself. */
export interface ErrorResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

interface Mapped {
  readonly status: number
  /** Anthropic error type. */
  readonly anthropic: string
  /** OpenAI error type. */
  readonly openai: string
}

const mapping = (error: GatewayError): Mapped => {
  switch (error._tag) {
    case "Unauthenticated":
      return { status: 401, anthropic: "authentication_error", openai: "authentication_error" }
    case "RouteNotAllowed":
      return { status: 403, anthropic: "permission_error", openai: "permission_error" }
    case "RouteNotFound":
      return { status: 404, anthropic: "not_found_error", openai: "not_found_error" }
    case "InvalidRequest":
      return { status: 400, anthropic: "invalid_request_error", openai: "invalid_request_error" }
    case "BodyTooLarge":
      return { status: 413, anthropic: "request_too_large", openai: "invalid_request_error" }
    case "Draining":
      return { status: 503, anthropic: "overloaded_error", openai: "overloaded_error" }
    case "NoUpstreamResponse":
      return { status: 502, anthropic: "api_error", openai: "api_error" }
    case "InternalError":
      return { status: 500, anthropic: "api_error", openai: "api_error" }
    case "RateLimited":
      return { status: 429, anthropic: "rate_limit_error", openai: "rate_limit_error" }
    case "BudgetExceeded":
      return { status: 402, anthropic: "budget_exceeded", openai: "budget_exceeded" }
    case "StoreUnavailable":
      return { status: 503, anthropic: "overloaded_error", openai: "overloaded_error" }
  }
}

/** The status, headers and body of `error` in the error format of `api` (SPEC "HTTP API"). */
export const renderError = (api: ApiFormat, error: GatewayError): ErrorResponse => {
  const mapped = mapping(error)
  const headers: Record<string, string> = { "content-type": "application/json" }
  const detail: Record<string, unknown> = {
    type: api === "anthropic" ? mapped.anthropic : mapped.openai,
    message: error.message,
  }
  if (error._tag === "NoUpstreamResponse") {
    detail.targets = error.targets
    if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.retryAfterSeconds)
  }
  if (error._tag === "Draining") headers["connection"] = "close"
  if (error._tag === "RateLimited" || error._tag === "BudgetExceeded")
    Object.assign(headers, error.rateHeaders)
  if (error._tag === "RateLimited") headers["retry-after"] = String(error.retryAfterSeconds)
  if (error._tag === "StoreUnavailable") headers["retry-after"] = "5"
  const body =
    api === "anthropic"
      ? JSON.stringify({ type: "error", error: detail })
      : JSON.stringify({ error: { ...detail, code: openaiCode(error) } })
  return { status: mapped.status, headers, body }
}

/** The OpenAI error body's `code`. */
const openaiCode = (error: GatewayError): string | null => {
  switch (error._tag) {
    case "Unauthenticated":
      return "invalid_api_key"
    case "RouteNotFound":
      return "model_not_found"
    case "BodyTooLarge":
      return "request_too_large"
    case "RateLimited":
      return "rate_limit_exceeded"
    case "BudgetExceeded":
      return "budget_exceeded"
    default:
      return null
  }
}

/** The SSE event that ends a stream which failed after its first byte (SPEC "HTTP API"). */
export const streamErrorEvent = (api: ApiFormat, type: string, message: string): string =>
  api === "anthropic"
    ? `event: error\ndata: ${JSON.stringify({ type: "error", error: { type, message } })}\n\n`
    : `data: ${JSON.stringify({ error: { type, message, code: null } })}\n\n`
