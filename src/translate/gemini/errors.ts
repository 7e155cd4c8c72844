/**
 * Google's error body `{"error":{code,message,status}}` (sometimes wrapped
 * in an array) in the OpenAI error format `{"error":{message,type,param,code}}`:
 * the type is the one the HTTP status means, the code is Google's `status`
 * (`RESOURCE_EXHAUSTED`, …).
 */
import { boundedMessage, errorTypeForStatus, openaiErrorType } from "../errors.js"
import { isObject, isString, jsonBuffer, type Json } from "../wire.js"

/** An error as an OpenAI client reads it (the `error` object, without `param`). */
export interface OpenAIError {
  readonly message: string
  readonly type: string
  readonly code: string | null
}

/** The `error` object of a parsed Google error body (`{error}` or `[{error}]`); undefined when there is none. */
export const geminiErrorObject = (parsed: unknown): Json | undefined => {
  const first: unknown = Array.isArray(parsed) ? parsed[0] : parsed
  const error = isObject(first) ? first["error"] : undefined
  return isObject(error) ? error : undefined
}

/** True when a Google error says the API key is invalid (Google answers that with a 400). */
const badApiKey = (error: Json): boolean => {
  const details = error["details"]
  return Array.isArray(details) && details.some((d) => isObject(d) && d["reason"] === "API_KEY_INVALID")
}

/**
 * The OpenAI form of a Google `error` object; `status` is the HTTP status (the body's `code` when the
 * error came in band), which picks the type.
 */
export const openaiErrorOf = (error: Json | undefined, status: number): OpenAIError => {
  const type = error !== undefined && badApiKey(error) ? "authentication_error" : errorTypeForStatus(status)
  const code = error?.["status"]
  return {
    message: boundedMessage(error?.["message"], `upstream error ${status}`),
    type,
    code: isString(code) && code !== "" ? openaiErrorType(code, "upstream_error") : null,
  }
}

const parse = (body: Uint8Array): unknown => {
  try {
    return JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8"))
  } catch {
    return undefined
  }
}

/**
 * A non-2xx Gemini error body → an OpenAI error body. Never fails: a body that is not a Google error
 * becomes `upstream error <status>` with the type its status means.
 */
export const geminiErrorToOpenAI = (status: number, body: Uint8Array): Buffer => {
  const error = openaiErrorOf(geminiErrorObject(parse(body)), status)
  return jsonBuffer({ error: { message: error.message, type: error.type, param: null, code: error.code } })
}
