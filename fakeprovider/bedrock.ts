/**
 * Amazon Bedrock's wire format for Claude (InvokeModel, InvokeModelWithResponseStream): the SigV4 check of a
 * request, Bedrock's exceptions (`{"message":…}` with `x-amzn-errortype`), and the stream as
 * `application/vnd.amazon.eventstream` frames, one per Anthropic event (`{"bytes":"<base64 event JSON>","p":…}`).
 * https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html
 */
import { createHash, randomUUID } from "node:crypto"
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { Hash } from "@smithy/hash-node"
import { HttpRequest } from "@smithy/protocol-http"
import { SignatureV4 } from "@smithy/signature-v4"
import { fromUtf8, toUtf8 } from "@smithy/util-utf8"
import type { BodyPlan, Piece } from "./emit.js"
import type { Chunk, Headers } from "./exchange.js"

/** The `anthropic_version` Bedrock requires in the body. */
export const bedrockAnthropicVersion = "bedrock-2023-05-31"

/** The AWS credentials the fake accepts. */
export interface AwsKeys {
  readonly accessKeyId: string
  readonly secretAccessKey: string
}

/** `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` of the environment now, `AKIDFAKE` / `fake-secret` when unset. */
export const environmentAwsKeys = (): AwsKeys => ({
  accessKeyId: process.env["AWS_ACCESS_KEY_ID"] || "AKIDFAKE",
  secretAccessKey: process.env["AWS_SECRET_ACCESS_KEY"] || "fake-secret",
})

/** A Bedrock exception as answered: status, name (`x-amzn-errortype`) and message. */
export interface BedrockException {
  readonly status: number
  readonly name: string
  readonly message: string
}

/** The headers of an exception response. */
export const exceptionHeaders = (name: string): Headers => ({
  "x-amzn-requestid": randomUUID(),
  "x-amzn-errortype": `${name}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
  "content-type": "application/json",
})

/** The body of an exception response: `{"message":…}`. */
export const exceptionJson = (message: string): string => JSON.stringify({ message })

const exception = (status: number, name: string, message: string): BedrockException => ({
  status,
  name,
  message,
})

/**
 * The exception answered for `status:N`: 400 ValidationException, 403 AccessDeniedException, 404
 * ResourceNotFoundException, 408 ModelTimeoutException, 424 ModelErrorException, 429 ThrottlingException,
 * 500 InternalServerException, 503 ServiceUnavailableException, 529 a 429 ModelNotReadyException (Bedrock has
 * no 529; it answers a model that is not ready with 429), any other N InternalServerException with status N.
 */
export const exceptionForStatus = (code: number): BedrockException => {
  switch (code) {
    case 400:
      return exception(
        400,
        "ValidationException",
        "Malformed input request, please reformat your input and try again.",
      )
    case 403:
      return exception(
        403,
        "AccessDeniedException",
        "You don't have access to the model with the specified model ID.",
      )
    case 404:
      return exception(404, "ResourceNotFoundException", "The requested resource could not be found.")
    case 408:
      return exception(
        408,
        "ModelTimeoutException",
        "Model has timed out in processing the request. Try your request again.",
      )
    case 424:
      return exception(424, "ModelErrorException", "The model returned an error (fake status 424).")
    case 429:
      return exception(429, "ThrottlingException", "Too many requests, please wait before trying again.")
    case 500:
      return exception(
        500,
        "InternalServerException",
        "The server encountered an internal error (fake status 500).",
      )
    case 503:
      return exception(503, "ServiceUnavailableException", "Bedrock is unable to process your request.")
    case 529:
      return exception(
        429,
        "ModelNotReadyException",
        "Model is not ready to serve inference requests: the model is overloaded, please retry.",
      )
    default:
      return exception(code, "InternalServerException", `fake status ${code}`)
  }
}

/**
 * The in-stream exception of `inband-error:TYPE` (`:exception-type`, lower camel case, as Bedrock names them)
 * and the exception a non-stream request gets for it: overloaded_error → serviceUnavailableException (503),
 * rate_limit_error → throttlingException (429), api_error → internalServerException (500), any other type
 * modelStreamErrorException (424 on a non-stream request).
 */
export const exceptionForType = (type: string): BedrockException => {
  switch (type) {
    case "overloaded_error":
      return exception(
        503,
        "ServiceUnavailableException",
        `fake in-band ${type}: Bedrock is unable to process your request.`,
      )
    case "rate_limit_error":
      return exception(
        429,
        "ThrottlingException",
        `fake in-band ${type}: Too many requests, please wait before trying again.`,
      )
    case "api_error":
      return exception(500, "InternalServerException", `fake in-band ${type}`)
    default:
      return exception(424, "ModelStreamErrorException", `fake in-band ${type}`)
  }
}

const lowerFirst = (name: string): string => name.charAt(0).toLowerCase() + name.slice(1)

// ---------------------------------------------------------------------------------------------------------------
// SigV4

/** What the SigV4 check reads of a request. */
export interface SignedRequest {
  readonly method: string
  /** Path and query as received (still percent-encoded). */
  readonly target: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

const authorizationPattern =
  /^AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request\s*,\s*SignedHeaders=([a-z0-9;._-]+)\s*,\s*Signature=([0-9a-f]{64})$/

const datePattern = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/

const missingToken = exception(403, "MissingAuthenticationTokenException", "Missing Authentication Token")

const invalidSignature = (detail = ""): BedrockException =>
  exception(
    403,
    "InvalidSignatureException",
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access " +
      "Key and signing method. Consult the service documentation for details." +
      detail,
  )

const queryOf = (search: string): Record<string, string | Array<string>> => {
  const query: Record<string, string | Array<string>> = {}
  for (const [name, value] of new URLSearchParams(search)) {
    const seen = query[name]
    query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value]
  }
  return query
}

/**
 * Checks the request's AWS Signature Version 4 (service `bedrock`, the region of the credential scope) by
 * signing it again with AWS's own signer over the received method, host, path and query, the signed headers
 * and the body. Undefined when it holds; else the exception Bedrock answers: MissingAuthenticationToken (no or
 * garbled `authorization`, no `x-amz-date`), UnrecognizedClient (unknown access key), InvalidSignature.
 * Any session token is accepted.
 */
export const checkSignature = async (
  request: SignedRequest,
  keys: AwsKeys,
): Promise<BedrockException | undefined> => {
  const match = authorizationPattern.exec(request.headers["authorization"]?.trim() ?? "")
  const amzDate = request.headers["x-amz-date"]?.trim() ?? ""
  const date = datePattern.exec(amzDate)
  if (match === null || date === null) return missingToken
  const [, accessKeyId = "", , region = "", service = "", signedList = "", signature = ""] = match
  if (accessKeyId !== keys.accessKeyId)
    return exception(
      403,
      "UnrecognizedClientException",
      "The security token included in the request is invalid.",
    )
  if (service !== "bedrock")
    return invalidSignature(` Credential should be scoped to correct service: 'bedrock'.`)
  const signed = signedList.split(";")
  if (!signed.includes("host")) return invalidSignature(` 'Host' must be a 'SignedHeader'.`)
  const contentHash = request.headers["x-amz-content-sha256"]
  if (
    signed.includes("x-amz-content-sha256") &&
    contentHash !== "UNSIGNED-PAYLOAD" &&
    contentHash !== createHash("sha256").update(request.body).digest("hex")
  )
    return invalidSignature(` The provided 'x-amz-content-sha256' header does not match what was computed.`)

  const headers: Record<string, string> = {}
  for (const name of signed) {
    const value = request.headers[name]
    if (value !== undefined) headers[name] = value
  }
  const host = request.headers["host"] ?? ""
  const hostMatch = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(host)
  const at = request.target.indexOf("?")
  const path = at < 0 ? request.target : request.target.slice(0, at)
  const sessionToken = signed.includes("x-amz-security-token")
    ? request.headers["x-amz-security-token"]
    : undefined
  const signer = new SignatureV4({
    service: "bedrock",
    region,
    credentials: {
      accessKeyId,
      secretAccessKey: keys.secretAccessKey,
      ...(sessionToken !== undefined ? { sessionToken } : {}),
    },
    sha256: Hash.bind(null, "sha256"),
    applyChecksum: signed.includes("x-amz-content-sha256"),
  })
  const [, year, month, day, hour, minute, second] = date.map(Number)
  const signingDate = new Date(
    Date.UTC(year ?? 0, (month ?? 1) - 1, day ?? 1, hour ?? 0, minute ?? 0, second ?? 0),
  )
  const resigned = await signer.sign(
    new HttpRequest({
      method: request.method,
      protocol: "http:",
      hostname: hostMatch?.[1] ?? host,
      ...(hostMatch?.[2] !== undefined ? { port: Number(hostMatch[2]) } : {}),
      path,
      query: at < 0 ? {} : queryOf(request.target.slice(at + 1)),
      headers,
      body: request.body,
    }),
    { signingDate },
  )
  const expected = /Signature=([0-9a-f]{64})/.exec(String(resigned.headers["authorization"] ?? ""))?.[1]
  return expected === signature ? undefined : invalidSignature()
}

// ---------------------------------------------------------------------------------------------------------------
// Event-stream frames

const codec = new EventStreamCodec(toUtf8, fromUtf8)

const text = (value: string) => ({ type: "string" as const, value })

const padding = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/** One `chunk` frame holding an Anthropic event's JSON, base64 in `bytes`, with a `p` padding field. */
export const chunkFrame = (eventJson: string): Uint8Array =>
  codec.encode({
    headers: {
      ":event-type": text("chunk"),
      ":content-type": text("application/json"),
      ":message-type": text("event"),
    },
    body: fromUtf8(
      JSON.stringify({
        bytes: Buffer.from(eventJson, "utf8").toString("base64"),
        p: padding.slice(0, 1 + (eventJson.length % padding.length)),
      }),
    ),
  })

/** An exception frame: `:message-type` `exception`, `:exception-type` the exception's name in lower camel case. */
export const exceptionFrame = (error: BedrockException): Uint8Array =>
  codec.encode({
    headers: {
      ":exception-type": text(lowerFirst(error.name)),
      ":content-type": text("application/json"),
      ":message-type": text("exception"),
    },
    body: fromUtf8(exceptionJson(error.message)),
  })

/** `frame` with the last byte of its payload flipped: its message CRC no longer matches. */
export const corrupted = (frame: Uint8Array): Uint8Array => {
  const copy = Buffer.from(frame)
  const at = copy.length - 5
  copy[at] = (copy[at] ?? 0) ^ 0x01
  return copy
}

/** The data of an Anthropic SSE event (`event: X\ndata: JSON\n\n`). */
const sseData = (event: string): string => {
  const at = event.indexOf("data: ")
  return (at < 0 ? event : event.slice(at + "data: ".length)).replace(/\n+$/, "")
}

const asText = (chunk: Chunk): string =>
  typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8")

/** The invocation metrics Bedrock appends to `message_stop`. */
export interface InvocationMetrics {
  readonly inputTokens: number
  readonly outputTokens: number
  /** `Date.now()` when the request arrived. */
  readonly startedAt: number
}

const messageStop = `{"type":"message_stop"}`

/**
 * An Anthropic SSE stream plan as event-stream frames: each event one `chunk` frame; `message_stop` gets
 * `amazon-bedrock-invocationMetrics` when `metrics` is given (latencies measured when it is sent). For
 * `malformed-after`, a frame whose event data is not JSON, then a frame with a broken CRC.
 */
export const eventStream = (plan: BodyPlan, metrics: InvocationMetrics | undefined): BodyPlan => {
  const firstByteLatency = metrics === undefined ? 0 : Date.now() - metrics.startedAt
  const frameOf = (chunk: Chunk): Chunk => chunkFrame(sseData(asText(chunk)))
  const framePiece = (piece: Piece): Piece => {
    if (typeof piece === "function") return () => [frameOf(Array.from(piece(), asText).join(""))]
    const data = sseData(asText(piece))
    if (data !== messageStop || metrics === undefined) return chunkFrame(data)
    return () => [
      chunkFrame(
        `{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":${metrics.inputTokens},` +
          `"outputTokenCount":${metrics.outputTokens},"invocationLatency":${Date.now() - metrics.startedAt},` +
          `"firstByteLatency":${firstByteLatency}}}`,
      ),
    ]
  }
  const malformed = chunkFrame(sseData(asText(plan.malformed)))
  return {
    head: plan.head.map(framePiece),
    tokens: plan.tokens,
    token: (index) => frameOf(plan.token(index)),
    tail: plan.tail.map(framePiece),
    malformed: Buffer.concat([malformed, corrupted(malformed)]),
  }
}

/** `inband-error:TYPE` on a stream: the prelude events of `prelude` as frames, then the exception frame. */
export const inbandErrorStream = (prelude: BodyPlan, type: string): BodyPlan => ({
  head: prelude.head.map((piece) => chunkFrame(sseData(typeof piece === "function" ? "" : asText(piece)))),
  tokens: 0,
  token: () => "",
  tail: [exceptionFrame(exceptionForType(type))],
  malformed: "",
})
