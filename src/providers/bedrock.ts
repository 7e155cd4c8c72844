/**
 * Claude on Amazon Bedrock (ADR 0071): InvokeModel and
 * InvokeModelWithResponseStream, signed with AWS Signature Version 4, the
 * answer adapted at the transport into the Anthropic wire format: the
 * stream's event-stream frames become Anthropic SSE, Bedrock's exceptions
 * Anthropic error bodies and events with the statuses of the retry table.
 */
import { HttpRequest } from "@smithy/protocol-http"
import { SignatureV4 } from "@smithy/signature-v4"
import type { IncomingHttpHeaders } from "node:http"
import type { Dispatcher } from "undici"
import type { ParsedRequest } from "../domain/request.js"
import { AdaptingHandler, retyped, wholeBodyAdapter, type AdaptedHead, type BodyAdapter } from "./adapt.js"
import { anthropicHeaders } from "./anthropic.js"
import { decodeEventStreamMessage } from "./eventStreamFrame.js"
import { removeMember, setMember } from "./patch.js"
import { Sha256 } from "./sigv4Hash.js"
import type { AwsCredentials } from "./ProviderClient.js"
import type { UpstreamRequest } from "./transport.js"

/** The `anthropic_version` body field Bedrock requires, added when the client sent none. */
export const BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"

/** The default Bedrock runtime host of a region. */
export const bedrockBaseUrl = (region: string): string => `https://bedrock-runtime.${region}.amazonaws.com`

/** The largest event-stream frame accepted, bytes (a frame holds one event; real ones are a few KiB). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024

/** The largest error body read whole, bytes. */
const MAX_ERROR_BODY_BYTES = 64 * 1024

/**
 * The `retry-after` given to a `ThrottlingException` that carries none (Bedrock sends none): the target
 * cools down this long, seconds, instead of being tried again at once (ADR 0071).
 */
export const THROTTLE_RETRY_AFTER_SECONDS = 5

/**
 * Bedrock's exceptions (`x-amzn-errortype`, before any `:`) → the status and Anthropic error type the
 * retry table reads. An exception not listed keeps its status, typed by it.
 */
const EXCEPTIONS: Readonly<Record<string, readonly [status: number, type: string]>> = {
  ThrottlingException: [429, "rate_limit_error"],
  ServiceQuotaExceededException: [429, "rate_limit_error"],
  ServiceUnavailableException: [503, "overloaded_error"],
  ModelNotReadyException: [529, "overloaded_error"],
  InternalServerException: [500, "api_error"],
  ModelErrorException: [502, "api_error"],
  ModelTimeoutException: [504, "timeout_error"],
  ModelStreamErrorException: [502, "api_error"],
  ValidationException: [400, "invalid_request_error"],
  AccessDeniedException: [403, "permission_error"],
  ResourceNotFoundException: [404, "not_found_error"],
  UnrecognizedClientException: [403, "authentication_error"],
  InvalidSignatureException: [403, "authentication_error"],
  MissingAuthenticationTokenException: [403, "authentication_error"],
  ExpiredTokenException: [403, "authentication_error"],
}

/** The Anthropic error type of an in-stream exception (`:exception-type`, lower camel case). */
const streamErrorType = (exception: string): string => {
  const name = exception.charAt(0).toUpperCase() + exception.slice(1)
  return EXCEPTIONS[name]?.[1] ?? "api_error"
}

/** The error type a status means when the exception is not one Tollgate knows. */
const typeForStatus = (status: number): string =>
  status === 429
    ? "rate_limit_error"
    : status === 403
      ? "permission_error"
      : status === 404
        ? "not_found_error"
        : status >= 500
          ? "api_error"
          : "invalid_request_error"

/** Where a Bedrock provider's requests go. */
export interface BedrockTarget {
  readonly baseUrl: string
  readonly region: string
}

/**
 * The upstream request (unsigned): the URL names the model, `model` leaves
 * the body, `anthropic_version` joins it; `anthropic-beta` travels as the
 * body's `anthropic_beta` list, as Bedrock reads it.
 */
export const buildBedrock =
  (target: BedrockTarget) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = anthropicHeaders(request)
    delete headers["anthropic-version"]
    delete headers["anthropic-beta"]
    let body = removeMember(request.raw, "model")
    body = removeMember(body, "stream")
    if (!request.hasAnthropicVersion) {
      body = setMember(body, "anthropic_version", JSON.stringify(BEDROCK_ANTHROPIC_VERSION))
    }
    if (request.anthropicBeta !== undefined) {
      const betas = request.anthropicBeta
        .split(",")
        .map((beta) => beta.trim())
        .filter((beta) => beta !== "")
      if (betas.length > 0) body = setMember(body, "anthropic_beta", JSON.stringify(betas))
    }
    const verb = request.stream ? "invoke-with-response-stream" : "invoke"
    const path = `/model/${encodeURIComponent(model)}/${verb}`
    return { endpoint: "/v1/messages", origin: target.baseUrl, path, headers, body }
  }

/** The SigV4 signer of one Bedrock client (service `bedrock`, the client's region). */
export const makeSigner = (region: string, credentials: () => Promise<AwsCredentials>) =>
  new SignatureV4({
    service: "bedrock",
    region,
    credentials: async () => {
      const { accessKeyId, secretAccessKey, sessionToken, expiration } = await credentials()
      return {
        accessKeyId,
        secretAccessKey,
        ...(sessionToken === undefined ? {} : { sessionToken }),
        ...(expiration === undefined ? {} : { expiration }),
      }
    },
    sha256: Sha256,
  })

/** The parsed origin of the last request signed (a provider's origin is the same for each of its requests). */
let lastOrigin: { readonly origin: string; readonly url: URL } | undefined
const originUrl = (origin: string): URL => {
  if (lastOrigin?.origin !== origin) lastOrigin = { origin, url: new URL(origin) }
  return lastOrigin.url
}

/** `upstream` with the SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`, `host`). */
export const signUpstream = async (
  signer: SignatureV4,
  upstream: UpstreamRequest,
): Promise<UpstreamRequest> => {
  const url = originUrl(upstream.origin)
  const [path, query] = splitQuery(upstream.path)
  const headers: Record<string, string> = { ...upstream.headers, host: url.host }
  const signed = await signer.sign(
    new HttpRequest({
      method: "POST",
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port === "" ? {} : { port: Number(url.port) }),
      path,
      ...(query === undefined ? {} : { query }),
      headers,
      body: upstream.body,
    }),
  )
  return { ...upstream, headers: signed.headers }
}

const splitQuery = (path: string): [string, Record<string, string> | undefined] => {
  const at = path.indexOf("?")
  if (at < 0) return [path, undefined]
  return [path.slice(0, at), Object.fromEntries(new URLSearchParams(path.slice(at + 1)))]
}

/** The exception name of a Bedrock error response (`ThrottlingException:http://…` → `ThrottlingException`). */
const exceptionOf = (headers: IncomingHttpHeaders): string | undefined => {
  const value = headers["x-amzn-errortype"]
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined || text === "") return undefined
  const name = text.split(":")[0]!.trim()
  return name === "" ? undefined : name
}

/** The message of a Bedrock error body (`{"message":…}` or `{"Message":…}`), else the exception's name. */
const messageOf = (body: Buffer, fallback: string): string => {
  try {
    const parsed: unknown = JSON.parse(body.toString("utf8"))
    if (typeof parsed === "object" && parsed !== null) {
      const record = parsed as Record<string, unknown>
      const message = record["message"] ?? record["Message"]
      if (typeof message === "string" && message !== "") return message
    }
  } catch {
    // Not JSON: the fallback.
  }
  return fallback
}

const anthropicErrorJson = (type: string, message: string): string =>
  JSON.stringify({ type: "error", error: { type, message } })

/** An Anthropic SSE `error` event. */
const errorEvent = (type: string, message: string): string =>
  `event: error\ndata: ${anthropicErrorJson(type, message)}\n\n`

/** The `type` of an Anthropic event's JSON, read from its start (Bedrock writes it first), else parsed. */
const TYPE_AT_START = /^\s*\{\s*"type"\s*:\s*"([A-Za-z0-9_]+)"/
const eventTypeOf = (json: string): string | undefined => {
  const quick = TYPE_AT_START.exec(json)
  if (quick !== null) return quick[1]
  try {
    const parsed: unknown = JSON.parse(json)
    const type =
      typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>)["type"] : undefined
    return typeof type === "string" ? type : undefined
  } catch {
    return undefined
  }
}

/** The Anthropic SSE text of one decoded frame. */
const frameToSse = (frame: Buffer): string => {
  const message = decodeEventStreamMessage(frame)
  const { headers } = message
  const kind = headers.get(":message-type")
  if (kind === "exception" || kind === "error") {
    const exception =
      headers.get(":exception-type") ?? headers.get(":error-code") ?? "internalServerException"
    return errorEvent(streamErrorType(exception), messageOf(message.body, exception))
  }
  if (headers.get(":event-type") !== "chunk") return ""
  const payload = message.body.toString("utf8")
  let bytes: unknown
  try {
    bytes = (JSON.parse(payload) as Record<string, unknown>)["bytes"]
  } catch {
    bytes = undefined
  }
  // Not a chunk Tollgate can read: passed on as it is, so the meter sees a malformed stream.
  if (typeof bytes !== "string") return `event: message\ndata: ${payload.replace(/[\r\n]+/g, " ")}\n\n`
  const json = Buffer.from(bytes, "base64").toString("utf8")
  const type = eventTypeOf(json)
  return `event: ${type ?? "message"}\ndata: ${json.replace(/[\r\n]+/g, " ")}\n\n`
}

/**
 * Event-stream frames (any chunking) → Anthropic SSE. Holds at most one
 * frame; a frame longer than `MAX_FRAME_BYTES` fails the body, a frame with
 * a bad checksum ends the stream with one event whose data is not JSON (a
 * malformed upstream stream, to the meter). A stream that ends inside a frame ends there (the meter sees a
 * stream without its end).
 */
export const eventStreamToSse = (): BodyAdapter => {
  let buffer: Buffer | undefined
  let broken = false
  return {
    push: (chunk) => {
      if (broken) return undefined
      let data = buffer === undefined ? chunk : Buffer.concat([buffer, chunk])
      buffer = undefined
      let out = ""
      while (data.length >= 4) {
        const total = data.readUInt32BE(0)
        if (total < 16 || total > MAX_FRAME_BYTES)
          throw new Error(`Bedrock event-stream frame of ${total} bytes`)
        if (data.length < total) break
        try {
          out += frameToSse(data.subarray(0, total))
        } catch (cause) {
          // A frame that fails its checksum: the rest of the stream cannot be trusted. One event that is not
          // JSON tells the meter (and the client) that the upstream stream is malformed; nothing follows it.
          broken = true
          const why = cause instanceof Error ? cause.message : String(cause)
          out += `event: message\ndata: malformed Bedrock event-stream frame: ${why.replace(/[\r\n]+/g, " ")}\n\n`
          return Buffer.from(out, "utf8")
        }
        data = data.subarray(total)
      }
      // The partial frame is copied out of the socket read it came in, which it would keep alive.
      if (data.length > 0) buffer = Buffer.from(data)
      return out === "" ? undefined : Buffer.from(out, "utf8")
    },
    end: () => {
      buffer = undefined
      return undefined
    },
  }
}

/**
 * The head adapter of a Bedrock response: a 2xx event stream becomes
 * Anthropic SSE; a 2xx JSON body passes; an error status gets the status
 * its exception means and an Anthropic error body (a throttle without
 * `retry-after` gets `THROTTLE_RETRY_AFTER_SECONDS`).
 */
export const adaptBedrockHead = (status: number, headers: IncomingHttpHeaders): AdaptedHead => {
  if (status >= 200 && status < 300) {
    const type = headers["content-type"]
    if (typeof type === "string" && type.startsWith("application/vnd.amazon.eventstream"))
      return {
        status,
        headers: retyped(headers, "text/event-stream; charset=utf-8"),
        body: eventStreamToSse(),
      }
    return { status, headers, body: undefined }
  }
  const exception = exceptionOf(headers)
  const known = exception === undefined ? undefined : EXCEPTIONS[exception]
  const mapped = known?.[0] ?? status
  const type = known?.[1] ?? typeForStatus(status)
  const out = retyped(headers, "application/json")
  if (mapped === 429 && out["retry-after"] === undefined)
    out["retry-after"] = String(THROTTLE_RETRY_AFTER_SECONDS)
  return {
    status: mapped,
    headers: out,
    body: wholeBodyAdapter(MAX_ERROR_BODY_BYTES, (body) =>
      Buffer.from(anthropicErrorJson(type, messageOf(body, exception ?? `Bedrock status ${status}`)), "utf8"),
    ),
  }
}

/** `handler` behind the Bedrock response adapter. */
export const bedrockHandler = (handler: Dispatcher.DispatchHandler): Dispatcher.DispatchHandler =>
  new AdaptingHandler(handler, adaptBedrockHead)
