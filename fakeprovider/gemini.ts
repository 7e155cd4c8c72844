/**
 * Google Gemini's `generateContent` wire format (Google AI Studio, and Gemini models on Vertex AI): the
 * request's validation, the `GenerateContentResponse` as JSON, the stream as SSE (`data: <response>\r\n\r\n`,
 * one output token per event, `usageMetadata` cumulative on every event, `finishReason` on the last) or, without
 * `alt=sse`, as one JSON array, and Google's error body `{"error":{code,message,status}}`.
 * https://ai.google.dev/api/generate-content
 */
import type { BodyPlan } from "./emit.js"
import { tokenText } from "./tokens.js"
import { argumentsClose, argumentsOpen } from "./tools.js"

/** What one generated answer says. */
export interface GeminiFacts {
  readonly responseId: string
  readonly modelVersion: string
  /** `promptTokenCount`: the counted input plus the cached tokens. */
  readonly promptTokens: number
  /** `candidatesTokenCount`: text tokens, or argument tokens of a function call. */
  readonly outputTokens: number
  /** `thoughtsTokenCount` (`thoughts:N`); 0 leaves it out. */
  readonly thoughts: number
  /** `cachedContentTokenCount` (`cached:N`); 0 leaves it out. */
  readonly cached: number
  /** True: `finishReason` is `MAX_TOKENS`, else `STOP`. */
  readonly hitLimit: boolean
  /** False for `no-usage`: no `usageMetadata` anywhere. */
  readonly usage: boolean
  /** The `thoughtSignature` of a function call part (Gemini 3 models), or undefined. */
  readonly signature?: string
}

/**
 * True for the models that sign their function calls and refuse a history whose calls come back unsigned
 * (Gemini 3 and later, by the model name's major version).
 */
export const signsCalls = (model: string): boolean => {
  const match = /^gemini-(\d+)/.exec(model)
  return match !== null && Number(match[1]) >= 3
}

const signaturePrefix = "fake-thought-signature:"

/** The signature the fake gives a call of `name`: base64 of a recognizable text. */
export const signatureFor = (name: string): string =>
  Buffer.from(`${signaturePrefix}${name}`, "utf8").toString("base64")

/** Google's documented placeholder for calls that were not made by a Gemini 3 model. */
const placeholderSignature = "skip_thought_signature_validator"

const acceptedSignature = (signature: unknown): boolean =>
  signature === placeholderSignature ||
  (typeof signature === "string" &&
    Buffer.from(signature, "base64").toString("utf8").startsWith(signaturePrefix))

/** The first `functionCall` part of each model turn of a Gemini 3 request must carry a signature. */
const signatureProblem = (contents: ReadonlyArray<unknown>): string | undefined => {
  for (const [index, content] of contents.entries()) {
    if (!isRecord(content) || content["role"] !== "model" || !Array.isArray(content["parts"])) continue
    const first: unknown = content["parts"].find((part) => isRecord(part) && isRecord(part["functionCall"]))
    if (!isRecord(first) || acceptedSignature(first["thoughtSignature"])) continue
    const call = first["functionCall"]
    const name = isRecord(call) && typeof call["name"] === "string" ? call["name"] : ""
    return (
      "Function call is missing a thought_signature in functionCall parts. This is required for tools to work " +
      `correctly, and missing thought_signature may lead to degraded model performance. Additional data, ` +
      `function call \`default_api:${name}\` , position ${index + 1}. Please refer to ` +
      "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
    )
  }
  return undefined
}

/** How a stream is framed: SSE events (`alt=sse`) or one JSON array (no `alt`). */
export type Framing = "sse" | "array"

const json = JSON.stringify

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * A validation problem of a `generateContent` body for `model`, phrased like the real API, or undefined.
 * Gemini 3 models also require the signatures of their own calls back (see {@link signsCalls}).
 */
export const bodyProblem = (body: Record<string, unknown>, model: string): string | undefined => {
  const contents = body["contents"]
  if (!Array.isArray(contents) || contents.length === 0)
    return "* GenerateContentRequest.contents: contents is not specified\n"
  for (const [index, content] of contents.entries()) {
    if (!isRecord(content)) return `Invalid value at 'contents[${index}]': not a Content object`
    const role = content["role"]
    if (role !== undefined && role !== "user" && role !== "model")
      return "Please use a valid role: user, model."
    const parts = content["parts"]
    if (!Array.isArray(parts) || parts.length === 0)
      return `* GenerateContentRequest.contents[${index}].parts: contents.parts must not be empty.\n`
  }
  const config = body["generationConfig"]
  if (config !== undefined && !isRecord(config))
    return `Invalid value at 'generation_config': not a GenerationConfig object`
  return signsCalls(model) ? signatureProblem(contents) : undefined
}

/** `generationConfig.maxOutputTokens`, or undefined. */
export const maxOutputTokens = (body: Record<string, unknown>): number | undefined => {
  const config = body["generationConfig"]
  const value = isRecord(config) ? config["maxOutputTokens"] : undefined
  return typeof value === "number" && Number.isFinite(value) ? value : undefined
}

/** `usageMetadata` after `candidates` output tokens. */
const usageMetadata = (facts: GeminiFacts, candidates: number): string =>
  `{"promptTokenCount":${facts.promptTokens},"candidatesTokenCount":${candidates},` +
  `"totalTokenCount":${facts.promptTokens + candidates + facts.thoughts}` +
  (facts.cached > 0 ? `,"cachedContentTokenCount":${facts.cached}` : "") +
  `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":${facts.promptTokens}}]` +
  (facts.thoughts > 0 ? `,"thoughtsTokenCount":${facts.thoughts}` : "") +
  "}"

const finishReason = (facts: GeminiFacts): string => (facts.hitLimit ? "MAX_TOKENS" : "STOP")

/** The end of a response after its candidate's content. */
const responseEnd = (facts: GeminiFacts, finish: string | undefined, candidates: number): string =>
  (finish !== undefined ? `,"finishReason":"${finish}"` : "") +
  `,"index":0}]` +
  (facts.usage ? `,"usageMetadata":${usageMetadata(facts, candidates)}` : "") +
  `,"modelVersion":${json(facts.modelVersion)},"responseId":${json(facts.responseId)}}`

const textResponse = (
  facts: GeminiFacts,
  text: string,
  finish: string | undefined,
  candidates: number,
): string =>
  `{"candidates":[{"content":{"parts":[{"text":${json(text)}}],"role":"model"}` +
  responseEnd(facts, finish, candidates)

/** A non-stream answer with text: the tokens sit inside the one text part. */
export const responseJson = (facts: GeminiFacts): BodyPlan => ({
  head: [`{"candidates":[{"content":{"parts":[{"text":"`],
  tokens: facts.outputTokens,
  token: tokenText,
  tail: [`"}],"role":"model"}` + responseEnd(facts, finishReason(facts), facts.outputTokens)],
  malformed: `"oops`,
})

/** The end of a function call part: its `thoughtSignature` when the facts have one. */
const callPartEnd = (facts: GeminiFacts): string =>
  facts.signature !== undefined ? `},"thoughtSignature":${json(facts.signature)}}` : "}}"

/** A non-stream answer with one `functionCall` part; the argument tokens sit inside `args.query`. */
export const functionCallJson = (facts: GeminiFacts, name: string): BodyPlan => ({
  head: [`{"candidates":[{"content":{"parts":[{"functionCall":{"name":${json(name)},"args":${argumentsOpen}`],
  tokens: facts.outputTokens,
  token: tokenText,
  tail: [
    `${argumentsClose}${callPartEnd(facts)}],"role":"model"}` +
      responseEnd(facts, "STOP", facts.outputTokens),
  ],
  malformed: `"oops`,
})

/** One stream event; `first` leaves out the array separator. */
const framer =
  (framing: Framing) =>
  (payload: string, first: boolean): string =>
    framing === "sse" ? `data: ${payload}\r\n\r\n` : `${first ? "[" : ",\r\n"}${payload}`

/** The end of an array-framed stream (nothing for SSE). */
const closing = (framing: Framing): string => (framing === "sse" ? "" : "]")

const malformedEvent = (framing: Framing, first: boolean): string =>
  framer(framing)(`{"candidates":[{"content":{"parts":[{"text":oops`, first)

/**
 * A text stream: one event per token (its text, the usage so far), then a last event with an empty text part,
 * the finish reason and the final usage.
 */
export const responseStream = (facts: GeminiFacts, framing: Framing): BodyPlan => {
  const event = framer(framing)
  return {
    head: [],
    tokens: facts.outputTokens,
    token: (index) => event(textResponse(facts, tokenText(index), undefined, index + 1), index === 0),
    tail: [
      event(textResponse(facts, "", finishReason(facts), facts.outputTokens), facts.outputTokens === 0) +
        closing(framing),
    ],
    malformed: malformedEvent(framing, false),
  }
}

/** A stream whose one event holds the whole `functionCall` (Gemini does not stream arguments). */
export const functionCallStream = (facts: GeminiFacts, name: string, framing: Framing): BodyPlan => {
  const args = argumentsOpen + Array.from({ length: facts.outputTokens }, (_, i) => tokenText(i)).join("")
  return {
    head: [],
    tokens: 0,
    token: tokenText,
    tail: [
      framer(framing)(
        `{"candidates":[{"content":{"parts":[{"functionCall":{"name":${json(name)},"args":` +
          `${args}${argumentsClose}${callPartEnd(facts)}],"role":"model"}` +
          responseEnd(facts, "STOP", facts.outputTokens),
        true,
      ) + closing(framing),
    ],
    malformed: malformedEvent(framing, true),
  }
}

/** Google's `status` name of an HTTP status. */
export const statusName = (code: number): string => {
  const names: Record<number, string> = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
  }
  return names[code] ?? (code >= 500 ? "INTERNAL" : "FAILED_PRECONDITION")
}

/** The message of an error for `status:N`. */
export const statusMessage = (code: number): string => {
  switch (code) {
    case 429:
      return "Resource has been exhausted (e.g. check quota)."
    case 500:
      return "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
    case 503:
    case 529:
      return "The model is overloaded. Please try again later."
    default:
      return `fake status ${code}`
  }
}

/** An error body: `{"error":{"code","message","status"}}`, optionally with `details`. */
export const errorJson = (code: number, message: string, details?: ReadonlyArray<unknown>): string =>
  `{"error":{"code":${code},"message":${json(message)},"status":"${statusName(code)}"` +
  (details !== undefined ? `,"details":${json(details)}` : "") +
  "}}"

/** The HTTP status of `inband-error:TYPE`: overloaded_error 503, rate_limit_error 429, api_error 500, … */
export const statusForType = (type: string): number => {
  const statuses: Record<string, number> = {
    invalid_request_error: 400,
    authentication_error: 401,
    permission_error: 403,
    not_found_error: 404,
    rate_limit_error: 429,
    api_error: 500,
    overloaded_error: 503,
  }
  return statuses[type] ?? 500
}

/** The error of `inband-error:TYPE` (in band on a stream, as the status and body of a non-stream request). */
export const typeErrorJson = (type: string): string => {
  const code = statusForType(type)
  return errorJson(code, `fake in-band ${type}: ${statusMessage(code)}`)
}

/** `inband-error:TYPE` on a stream: one event with an empty text part, then `{"error":…}`, then the end. */
export const inbandErrorStream = (facts: GeminiFacts, type: string, framing: Framing): BodyPlan => {
  const event = framer(framing)
  return {
    head: [event(textResponse(facts, "", undefined, 0), true)],
    tokens: 0,
    token: tokenText,
    tail: [event(typeErrorJson(type), false) + closing(framing)],
    malformed: "",
  }
}
