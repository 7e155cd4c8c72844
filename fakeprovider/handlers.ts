/**
 * The model endpoints of the fake provider: check the credentials (Azure's `api-key`, Gemini's key or bearer
 * token, Bedrock's SigV4 signature), validate the body, apply the scenario, and answer in the endpoint's wire
 * format (plans.ts builds the body, emit.ts writes it).
 */
import { randomUUID } from "node:crypto"
import * as Anthropic from "./anthropic.js"
import * as Azure from "./azure.js"
import * as Bedrock from "./bedrock.js"
import type { AwsKeys } from "./bedrock.js"
import { emitBody } from "./emit.js"
import type { BodyPlan, EmitOptions } from "./emit.js"
import * as Embeddings from "./embeddings.js"
import type { Exchange, Headers } from "./exchange.js"
import * as Gemini from "./gemini.js"
import * as OpenAI from "./openai.js"
import { anthropicPlan, bedrockPlan, chatPlan, geminiPlan, randomId, responsesPlan } from "./plans.js"
import type { PlanInput } from "./plans.js"
import type { PromptCache } from "./promptCache.js"
import type { Scenario, StatusError } from "./scenario.js"
import { anthropicInputTokens, numberField } from "./tokens.js"

/** A model endpoint, as routed from the method and path. `azure`: the same API under `/openai/v1/`. */
export type Endpoint =
  | { readonly kind: "messages" }
  | { readonly kind: "count_tokens" }
  | { readonly kind: "vertex"; readonly model: string; readonly stream: boolean }
  | { readonly kind: "vertex_count_tokens" }
  | { readonly kind: "chat_completions"; readonly azure?: boolean }
  | { readonly kind: "responses"; readonly azure?: boolean }
  | { readonly kind: "embeddings"; readonly azure?: boolean }
  | { readonly kind: "bedrock"; readonly model: string; readonly stream: boolean }
  | {
      readonly kind: "gemini"
      readonly model: string
      readonly stream: boolean
      readonly framing: Gemini.Framing
      /** Vertex AI's `publishers/google` path: a bearer token instead of an API key. */
      readonly vertex: boolean
    }

/** The kinds `--kind` selects. */
export type FakeKind = "bedrock" | "azure" | "gemini"

/** The kind an endpoint belongs to, or undefined for the Anthropic, OpenAI and Vertex (Claude) endpoints. */
export const endpointKind = (endpoint: Endpoint): FakeKind | undefined => {
  if (endpoint.kind === "bedrock" || endpoint.kind === "gemini") return endpoint.kind
  if (
    (endpoint.kind === "chat_completions" ||
      endpoint.kind === "responses" ||
      endpoint.kind === "embeddings") &&
    endpoint.azure === true
  )
    return "azure"
  return undefined
}

/** One request as the handlers read it. */
export interface EndpointRequest {
  /** The body as text. */
  readonly rawBody: string
  /** The body as received (Bedrock's signature covers these bytes). */
  readonly bytes: Uint8Array
  readonly scenario: Scenario
  /** The AWS credentials a Bedrock signature is checked against. */
  readonly awsKeys: () => AwsKeys
  /** `Date.now()` when the request arrived. */
  readonly startedAt: number
  /** This fake's prompt cache (the `prompt-cache` scenario). */
  readonly promptCache: PromptCache
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const parseObject = (text: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return isRecord(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** A complete error response. */
interface ErrorAnswer {
  readonly status: number
  readonly headers: Headers
  readonly body: string
}

/** Wire-format helpers for one API family. */
interface Format {
  /** Headers of every answer. */
  readonly headers: () => Headers
  /** The answer to `status:N` (and the headers and body of `error-body-stall:N`). */
  readonly statusError: (code: number) => ErrorAnswer
  /** A request the API refuses (a bad body), with this status and message. */
  readonly requestError: (status: number, message: string) => ErrorAnswer
  /** `inband-error:TYPE` on a non-stream request. */
  readonly typeError: (type: string) => ErrorAnswer
}

const jsonType = { "content-type": "application/json" }
const sseType = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" }

const errorMessage = (status: number): string =>
  status === 529 ? "Overloaded" : status === 429 ? "Rate limited" : `fake status ${status}`

/** Anthropic and OpenAI: one error JSON shape, typed by status. */
const typedFormat = (
  headers: () => Headers,
  errorJson: (type: string, message: string) => string,
  errorType: (status: number) => string,
): Format => ({
  headers,
  statusError: (code) => ({
    status: code,
    headers: { ...headers(), ...jsonType },
    body: errorJson(errorType(code), errorMessage(code)),
  }),
  requestError: (status, message) => ({
    status,
    headers: { ...headers(), ...jsonType },
    body: errorJson(errorType(status), message),
  }),
  typeError: (type) => ({
    status: Anthropic.statusForErrorType(type),
    headers: { ...headers(), ...jsonType },
    body: errorJson(type, `fake ${type}`),
  }),
})

const anthropicFormat = typedFormat(
  () => ({ "request-id": randomId("req_") }),
  Anthropic.errorJson,
  Anthropic.errorTypeForStatus,
)

const openaiFormat = typedFormat(
  () => ({ "x-request-id": randomId("req_") }),
  OpenAI.errorJson,
  OpenAI.errorTypeForStatus,
)

const azureFormat = typedFormat(
  () => ({ "x-request-id": randomUUID(), "apim-request-id": randomUUID() }),
  OpenAI.errorJson,
  OpenAI.errorTypeForStatus,
)

const exceptionAnswer = (error: Bedrock.BedrockException): ErrorAnswer => ({
  status: error.status,
  headers: Bedrock.exceptionHeaders(error.name),
  body: Bedrock.exceptionJson(error.message),
})

const bedrockFormat: Format = {
  headers: () => ({ "x-amzn-requestid": randomUUID() }),
  statusError: (code) => exceptionAnswer(Bedrock.exceptionForStatus(code)),
  requestError: (status, message) =>
    exceptionAnswer({ status, name: Bedrock.exceptionForStatus(status).name, message }),
  typeError: (type) => exceptionAnswer(Bedrock.exceptionForType(type)),
}

const geminiJsonType = { "content-type": "application/json; charset=UTF-8" }

const geminiFormat: Format = {
  headers: () => ({}),
  statusError: (code) => ({
    status: code,
    headers: geminiJsonType,
    body: Gemini.errorJson(code, Gemini.statusMessage(code)),
  }),
  requestError: (status, message) => ({
    status,
    headers: geminiJsonType,
    body: Gemini.errorJson(status, message),
  }),
  typeError: (type) => ({
    status: Gemini.statusForType(type),
    headers: geminiJsonType,
    body: Gemini.typeErrorJson(type),
  }),
}

const respondAnswer = (exchange: Exchange, answer: ErrorAnswer): void =>
  exchange.respond(answer.status, answer.headers, answer.body)

const respondError = (exchange: Exchange, format: Format, status: number, message: string): void =>
  respondAnswer(exchange, format.requestError(status, message))

const withRetryAfter = (headers: Headers, error: StatusError): Headers => ({
  ...headers,
  ...(error.retryAfter !== undefined ? { "retry-after": error.retryAfter } : {}),
})

/**
 * The scenario items that answer before the body is read: `hang-before-headers`, `error-body-stall:N`,
 * `status:N`. True when one of them answered.
 */
const answeredEarly = async (exchange: Exchange, format: Format, scenario: Scenario): Promise<boolean> => {
  if (scenario.hangBeforeHeaders) {
    await exchange.waitClose()
    return true
  }
  const stall = scenario.stallErrorBody
  if (stall !== undefined) {
    const answer = format.statusError(stall.code)
    exchange.writeHead(answer.status, withRetryAfter(answer.headers, stall))
    void exchange.write(answer.body.slice(0, Math.floor(answer.body.length / 2)))
    await exchange.waitClose()
    return true
  }
  if (scenario.status !== undefined) {
    await exchange.sleep(scenario.delayMs)
    const answer = format.statusError(scenario.status.code)
    exchange.respond(answer.status, withRetryAfter(answer.headers, scenario.status), answer.body)
    return true
  }
  return false
}

/** The emit options of a 200 answer (`*-after` does not apply to an in-band error). */
const emitOptions = (scenario: Scenario, stream: boolean): EmitOptions => {
  const after = scenario.inbandError === undefined ? scenario.after : undefined
  return { stream, delayMs: scenario.delayMs, ...(after !== undefined ? { after } : {}) }
}

/** An `x-fake-scenario` that does not parse: 400 in the endpoint's format (Anthropic's for the first formats). */
export const respondScenarioError = (exchange: Exchange, endpoint: Endpoint, message: string): void => {
  const kind = endpointKind(endpoint)
  if (kind === undefined)
    return exchange.respond(400, jsonType, Anthropic.errorJson("invalid_request_error", message))
  respondError(
    exchange,
    kind === "bedrock" ? bedrockFormat : kind === "gemini" ? geminiFormat : azureFormat,
    400,
    message,
  )
}

/** A 404 for a path no endpoint serves, in the format of `kind` (Anthropic's when undefined). */
export const respondNotFound = (exchange: Exchange, kind: FakeKind | undefined, message: string): void => {
  if (kind === undefined)
    return exchange.respond(404, jsonType, Anthropic.errorJson("not_found_error", message))
  if (kind === "bedrock")
    return respondAnswer(
      exchange,
      exceptionAnswer({ status: 404, name: "UnknownOperationException", message }),
    )
  respondError(exchange, kind === "gemini" ? geminiFormat : azureFormat, 404, message)
}

/** Answers one model request; resolves when the response ended or the client went away. */
export const handleEndpoint = (
  exchange: Exchange,
  endpoint: Endpoint,
  request: EndpointRequest,
): Promise<void> => {
  switch (endpoint.kind) {
    case "bedrock":
      return handleBedrock(exchange, endpoint, request)
    case "gemini":
      return handleGemini(exchange, endpoint, request)
    default:
      return handleClassic(exchange, endpoint, request)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Anthropic, OpenAI (and Azure), Vertex (Claude)

type ClassicEndpoint = Exclude<Endpoint, { kind: "bedrock" } | { kind: "gemini" }>

/** A validation problem of the body, phrased like the real API, or undefined. */
const bodyProblem = (endpoint: ClassicEndpoint, body: Record<string, unknown>): string | undefined => {
  if (endpoint.kind === "responses")
    return typeof body["model"] !== "string" ? "Missing required parameter: 'model'." : undefined
  if (!Array.isArray(body["messages"])) return "messages: Field required"
  if (endpoint.kind === "chat_completions" && typeof body["model"] !== "string")
    return "model: Field required"
  if (endpoint.kind === "messages" && typeof body["model"] !== "string") return "model: Field required"
  if (
    (endpoint.kind === "messages" || endpoint.kind === "vertex") &&
    numberField(body, "max_tokens") === undefined
  )
    return "max_tokens: Field required"
  if (endpoint.kind === "vertex" && typeof body["anthropic_version"] !== "string")
    return "anthropic_version: Field required"
  return undefined
}

const isOpenai = (endpoint: ClassicEndpoint): boolean =>
  endpoint.kind === "chat_completions" || endpoint.kind === "responses" || endpoint.kind === "embeddings"

const handleClassic = async (
  exchange: Exchange,
  endpoint: ClassicEndpoint,
  { rawBody, scenario, promptCache }: EndpointRequest,
): Promise<void> => {
  const azure = "azure" in endpoint && endpoint.azure === true
  const format = azure ? azureFormat : isOpenai(endpoint) ? openaiFormat : anthropicFormat
  if (azure && !Azure.keyAccepted(exchange.entry.headers["api-key"]))
    return exchange.respond(401, { ...format.headers(), ...jsonType }, Azure.accessDeniedJson)
  if (await answeredEarly(exchange, format, scenario)) return

  const body = parseObject(rawBody)
  if (body === undefined) return respondError(exchange, format, 400, "the request body is not a JSON object")
  if (endpoint.kind === "embeddings") return answerEmbeddings(exchange, format, azure, body, scenario)
  const problem = bodyProblem(endpoint, body)
  if (problem !== undefined) return respondError(exchange, format, 400, problem)

  if (endpoint.kind === "count_tokens" || endpoint.kind === "vertex_count_tokens") {
    await exchange.sleep(scenario.delayMs)
    const count = anthropicInputTokens(body)
    return exchange.respond(200, { ...format.headers(), ...jsonType }, `{"input_tokens":${count}}`)
  }

  const stream = endpoint.kind === "vertex" ? endpoint.stream : body["stream"] === true
  if (!stream) await exchange.sleep(scenario.delayMs)
  const contentFilter = azure && scenario.contentFilter === true
  if (contentFilter && (!stream || endpoint.kind === "responses"))
    return exchange.respond(400, { ...format.headers(), ...jsonType }, Azure.contentFilterJson)
  if (scenario.inbandError !== undefined && !stream)
    return respondAnswer(exchange, format.typeError(scenario.inbandError))
  const input: PlanInput = { body, rawBody, scenario, stream, promptCache }
  const plan: BodyPlan =
    endpoint.kind === "chat_completions"
      ? chatPlan(input, contentFilter)
      : endpoint.kind === "responses"
        ? responsesPlan(input)
        : anthropicPlan(input, endpoint.kind === "vertex" ? endpoint.model : String(body["model"]))
  exchange.writeHead(200, { ...format.headers(), ...(stream ? sseType : jsonType) })
  return emitBody(exchange, plan, emitOptions(scenario, stream))
}

/** `POST /v1/embeddings`: always JSON; `*-after:N-tokens` counts embedding entries. */
const answerEmbeddings = async (
  exchange: Exchange,
  format: Format,
  azure: boolean,
  body: Record<string, unknown>,
  scenario: Scenario,
): Promise<void> => {
  const request = Embeddings.parseEmbeddingsRequest(body)
  if (typeof request === "string") return respondError(exchange, format, 400, request)
  await exchange.sleep(scenario.delayMs)
  if (azure && scenario.contentFilter === true)
    return exchange.respond(400, { ...format.headers(), ...jsonType }, Azure.contentFilterJson)
  if (scenario.inbandError !== undefined)
    return respondAnswer(exchange, format.typeError(scenario.inbandError))
  exchange.writeHead(200, { ...format.headers(), ...jsonType })
  return emitBody(exchange, Embeddings.embeddingsJson(request, !scenario.noUsage), {
    stream: false,
    ...(scenario.after !== undefined ? { after: scenario.after } : {}),
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Bedrock

const malformedInput = (detail: string): string =>
  `Malformed input request: #: ${detail}, please reformat your input and try again.`

/** A validation problem of an InvokeModel body for Claude, phrased like Bedrock, or undefined. */
const bedrockProblem = (body: Record<string, unknown>): string | undefined => {
  if ("model" in body) return malformedInput("extraneous key [model] is not permitted")
  const version = body["anthropic_version"]
  if (version === undefined) return malformedInput("required key [anthropic_version] not found")
  if (version !== Bedrock.bedrockAnthropicVersion)
    return `Invalid API version: anthropic_version must be "${Bedrock.bedrockAnthropicVersion}", got ${JSON.stringify(version)}.`
  if (!Array.isArray(body["messages"])) return malformedInput("required key [messages] not found")
  if (numberField(body, "max_tokens") === undefined)
    return malformedInput("required key [max_tokens] not found")
  return undefined
}

const handleBedrock = async (
  exchange: Exchange,
  endpoint: Extract<Endpoint, { kind: "bedrock" }>,
  { rawBody, bytes, scenario, awsKeys, startedAt, promptCache }: EndpointRequest,
): Promise<void> => {
  const { entry } = exchange
  const denied = await Bedrock.checkSignature(
    { method: entry.method, target: entry.path, headers: entry.headers, body: bytes },
    awsKeys(),
  )
  if (denied !== undefined) return respondAnswer(exchange, exceptionAnswer(denied))
  if (await answeredEarly(exchange, bedrockFormat, scenario)) return

  const body = parseObject(rawBody)
  if (body === undefined)
    return respondError(
      exchange,
      bedrockFormat,
      400,
      "Malformed input request, please reformat your input and try again.",
    )
  const problem = bedrockProblem(body)
  if (problem !== undefined) return respondError(exchange, bedrockFormat, 400, problem)

  const { stream } = endpoint
  if (!stream) await exchange.sleep(scenario.delayMs)
  if (scenario.inbandError !== undefined && !stream)
    return respondAnswer(exchange, bedrockFormat.typeError(scenario.inbandError))
  const plan = bedrockPlan({ body, rawBody, scenario, stream, promptCache }, endpoint.model, startedAt)
  exchange.writeHead(200, {
    ...bedrockFormat.headers(),
    ...(stream
      ? {
          "content-type": "application/vnd.amazon.eventstream",
          "x-amzn-bedrock-content-type": "application/json",
        }
      : jsonType),
  })
  return emitBody(exchange, plan, emitOptions(scenario, stream))
}

// ---------------------------------------------------------------------------------------------------------------
// Gemini

const unregisteredCaller =
  "Method doesn't allow unregistered callers (callers without established identity). Please use API key or " +
  "other form of API consumer identity to call this API."

const missingCredential =
  "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other " +
  "valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."

const apiKeyInvalid = [
  {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    reason: "API_KEY_INVALID",
    domain: "googleapis.com",
    metadata: { service: "generativelanguage.googleapis.com" },
  },
]

/** The error of a request without acceptable credentials, or undefined. */
const geminiAuthProblem = (exchange: Exchange, vertex: boolean): ErrorAnswer | undefined => {
  const { headers, path } = exchange.entry
  if (vertex) {
    if (/^Bearer\s+\S/i.test(headers["authorization"] ?? "")) return undefined
    return { status: 401, headers: geminiJsonType, body: Gemini.errorJson(401, missingCredential) }
  }
  const at = path.indexOf("?")
  const key =
    headers["x-goog-api-key"] ?? (at < 0 ? null : new URLSearchParams(path.slice(at + 1)).get("key"))
  if (key === null || key.trim() === "")
    return { status: 403, headers: geminiJsonType, body: Gemini.errorJson(403, unregisteredCaller) }
  if (key.trim() === "wrong")
    return {
      status: 400,
      headers: geminiJsonType,
      body: Gemini.errorJson(400, "API key not valid. Please pass a valid API key.", apiKeyInvalid),
    }
  return undefined
}

const handleGemini = async (
  exchange: Exchange,
  endpoint: Extract<Endpoint, { kind: "gemini" }>,
  { rawBody, scenario }: EndpointRequest,
): Promise<void> => {
  const denied = geminiAuthProblem(exchange, endpoint.vertex)
  if (denied !== undefined) return respondAnswer(exchange, denied)
  if (await answeredEarly(exchange, geminiFormat, scenario)) return

  const body = parseObject(rawBody)
  if (body === undefined)
    return respondError(exchange, geminiFormat, 400, "Invalid JSON payload received. Expected a JSON object.")
  const problem = Gemini.bodyProblem(body, endpoint.model)
  if (problem !== undefined) return respondError(exchange, geminiFormat, 400, problem)

  const { stream, framing } = endpoint
  if (!stream) await exchange.sleep(scenario.delayMs)
  if (scenario.inbandError !== undefined && !stream)
    return respondAnswer(exchange, geminiFormat.typeError(scenario.inbandError))
  const plan = geminiPlan({ body, rawBody, scenario, stream }, endpoint.model, framing)
  const sse = stream && framing === "sse"
  exchange.writeHead(200, {
    ...geminiFormat.headers(),
    ...(sse ? { "content-type": "text/event-stream", "cache-control": "no-cache" } : geminiJsonType),
  })
  return emitBody(exchange, plan, emitOptions(scenario, stream))
}
