/**
 * Upstream error bodies (non-2xx) in the client's error format: Anthropic
 * `{"type":"error","error":{type,message}}`, OpenAI (Chat and Responses)
 * `{"error":{message,type,param,code}}`. The error types of both APIs are
 * mostly the same names (SPEC "HTTP API"); an OpenAI type Anthropic does not
 * know is replaced by the one its status means.
 */
import { isObject, isString, jsonBuffer, parseObject, type Json, type Wire } from "./wire.js"

/** The longest upstream message passed on (characters); the rest is cut. */
const MAX_MESSAGE_CHARS = 4096
/** The longest upstream error type or code passed on (characters); a longer one is replaced. */
const MAX_TYPE_CHARS = 64

/** The error types Anthropic's API uses. */
const ANTHROPIC_TYPES = new Set([
  "invalid_request_error",
  "authentication_error",
  "billing_error",
  "permission_error",
  "not_found_error",
  "request_too_large",
  "rate_limit_error",
  "timeout_error",
  "api_error",
  "overloaded_error",
])

/** The error type a status means when the body names none we can use. */
export const errorTypeForStatus = (status: number): string => {
  switch (status) {
    case 401:
      return "authentication_error"
    case 402:
      return "billing_error"
    case 403:
      return "permission_error"
    case 404:
      return "not_found_error"
    case 408:
    case 504:
      return "timeout_error"
    case 413:
      return "request_too_large"
    case 429:
      return "rate_limit_error"
    case 503:
    case 529:
      return "overloaded_error"
    default:
      return status >= 500 ? "api_error" : "invalid_request_error"
  }
}

/** What an upstream error body says, whichever format it is in. */
interface UpstreamError {
  readonly type: string | undefined
  readonly message: string | undefined
  readonly code: string | undefined
}

const readError = (body: Uint8Array): UpstreamError => {
  const parsed = parseObject(body)
  const error = parsed?.["error"]
  if (isObject(error)) {
    const code = error["code"]
    return {
      type: isString(error["type"]) && error["type"] !== "" ? error["type"] : undefined,
      message: isString(error["message"]) ? error["message"] : undefined,
      code: isString(code) ? code : typeof code === "number" ? String(code) : undefined,
    }
  }
  const message = isString(error) ? error : isString(parsed?.["message"]) ? parsed["message"] : undefined
  return { type: undefined, message, code: undefined }
}

/** The upstream's message cut to a bound, else `fallback`. */
export const boundedMessage = (message: unknown, fallback: string): string => {
  const text = isString(message) && message !== "" ? message : fallback
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text
}

/** An error type for an Anthropic client: the upstream's when Anthropic has it, else `fallback`. */
export const anthropicErrorType = (type: unknown, fallback: string): string =>
  isString(type) && ANTHROPIC_TYPES.has(type) ? type : fallback

/** An error type for an OpenAI client: the upstream's when it is a short string, else `fallback`. */
export const openaiErrorType = (type: unknown, fallback: string): string =>
  isString(type) && type !== "" && type.length <= MAX_TYPE_CHARS ? type : fallback

/**
 * The type and message, for an OpenAI client, of an Anthropic stream's in-band `error` event (`api_error`
 * when it names no usable type).
 */
export const openaiStreamError = (
  event: Readonly<Json>,
): { readonly type: string; readonly message: string } => {
  const error = isObject(event["error"]) ? event["error"] : {}
  const type = openaiErrorType(error["type"], "api_error")
  return { type, message: boundedMessage(error["message"], type) }
}

/**
 * A non-2xx upstream error body in the error format of the client's API
 * (`to`). Never fails: a body that is not an error of either API becomes a
 * generic error with the type its status means.
 */
export const translateErrorBody = (_from: Wire, to: Wire, status: number, body: Uint8Array): Buffer => {
  const error = readError(body)
  const message = boundedMessage(error.message, `upstream error ${status}`)
  const fallback = errorTypeForStatus(status)
  if (to === "/v1/messages")
    return jsonBuffer({ type: "error", error: { type: anthropicErrorType(error.type, fallback), message } })
  const code = error.code === undefined ? null : openaiErrorType(error.code, "upstream_error")
  return jsonBuffer({ error: { message, type: openaiErrorType(error.type, fallback), param: null, code } })
}
