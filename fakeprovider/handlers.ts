/**
 * The model endpoints of the fake provider: validate the body, apply the scenario, and answer in the
 * endpoint's wire format (plans.ts builds the body, emit.ts writes it).
 */
import * as Anthropic from "./anthropic.js"
import { emitBody } from "./emit.js"
import type { BodyPlan } from "./emit.js"
import * as Embeddings from "./embeddings.js"
import type { Exchange, Headers } from "./exchange.js"
import * as OpenAI from "./openai.js"
import { anthropicPlan, chatPlan, randomId, responsesPlan } from "./plans.js"
import type { PlanInput } from "./plans.js"
import type { Scenario, StatusError } from "./scenario.js"
import { anthropicInputTokens, numberField } from "./tokens.js"

/** A model endpoint, as routed from the method and path. */
export type Endpoint =
  | { readonly kind: "messages" }
  | { readonly kind: "count_tokens" }
  | { readonly kind: "vertex"; readonly model: string; readonly stream: boolean }
  | { readonly kind: "vertex_count_tokens" }
  | { readonly kind: "chat_completions" }
  | { readonly kind: "responses" }
  | { readonly kind: "embeddings" }

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

/** Wire-format helpers for one API family. */
interface Format {
  readonly headers: () => Headers
  readonly errorJson: (type: string, message: string) => string
  readonly errorType: (status: number) => string
}

const anthropicFormat: Format = {
  headers: () => ({ "request-id": randomId("req_") }),
  errorJson: Anthropic.errorJson,
  errorType: Anthropic.errorTypeForStatus,
}

const openaiFormat: Format = {
  headers: () => ({ "x-request-id": randomId("req_") }),
  errorJson: OpenAI.errorJson,
  errorType: OpenAI.errorTypeForStatus,
}

const jsonType = { "content-type": "application/json" }
const sseType = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" }

const errorMessage = (status: number): string =>
  status === 529 ? "Overloaded" : status === 429 ? "Rate limited" : `fake status ${status}`

const respondError = (exchange: Exchange, format: Format, status: number, message: string): void =>
  exchange.respond(
    status,
    { ...format.headers(), ...jsonType },
    format.errorJson(format.errorType(status), message),
  )

const statusHeaders = (format: Format, error: StatusError): Headers => ({
  ...format.headers(),
  ...jsonType,
  ...(error.retryAfter !== undefined ? { "retry-after": error.retryAfter } : {}),
})

/** A validation problem of the body, phrased like the real API, or undefined. */
const bodyProblem = (endpoint: Endpoint, body: Record<string, unknown>): string | undefined => {
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

const isOpenai = (endpoint: Endpoint): boolean =>
  endpoint.kind === "chat_completions" || endpoint.kind === "responses" || endpoint.kind === "embeddings"

/** `inband-error:TYPE` on a non-stream request: the error as an HTTP status and error body. */
const respondInbandError = (exchange: Exchange, format: Format, type: string): void =>
  exchange.respond(
    Anthropic.statusForErrorType(type),
    { ...format.headers(), ...jsonType },
    format.errorJson(type, `fake ${type}`),
  )

/** Answers one model request under `scenario`; resolves when the response ended or the client went away. */
export const handleEndpoint = async (
  exchange: Exchange,
  endpoint: Endpoint,
  rawBody: string,
  scenario: Scenario,
): Promise<void> => {
  const format = isOpenai(endpoint) ? openaiFormat : anthropicFormat
  if (scenario.hangBeforeHeaders) return exchange.waitClose()
  const stall = scenario.stallErrorBody
  if (stall !== undefined) {
    exchange.writeHead(stall.code, statusHeaders(format, stall))
    const body = format.errorJson(format.errorType(stall.code), errorMessage(stall.code))
    void exchange.write(body.slice(0, Math.floor(body.length / 2)))
    return exchange.waitClose()
  }
  if (scenario.status !== undefined) {
    await exchange.sleep(scenario.delayMs)
    const { code } = scenario.status
    const body = format.errorJson(format.errorType(code), errorMessage(code))
    return exchange.respond(code, statusHeaders(format, scenario.status), body)
  }

  const body = parseObject(rawBody)
  if (body === undefined) return respondError(exchange, format, 400, "the request body is not a JSON object")
  if (endpoint.kind === "embeddings") return answerEmbeddings(exchange, body, scenario)
  const problem = bodyProblem(endpoint, body)
  if (problem !== undefined) return respondError(exchange, format, 400, problem)

  if (endpoint.kind === "count_tokens" || endpoint.kind === "vertex_count_tokens") {
    await exchange.sleep(scenario.delayMs)
    const count = anthropicInputTokens(body)
    return exchange.respond(200, { ...format.headers(), ...jsonType }, `{"input_tokens":${count}}`)
  }

  const stream = endpoint.kind === "vertex" ? endpoint.stream : body["stream"] === true
  if (!stream) await exchange.sleep(scenario.delayMs)
  if (scenario.inbandError !== undefined && !stream)
    return respondInbandError(exchange, format, scenario.inbandError)
  const input: PlanInput = { body, rawBody, scenario, stream }
  const plan: BodyPlan =
    endpoint.kind === "chat_completions"
      ? chatPlan(input)
      : endpoint.kind === "responses"
        ? responsesPlan(input)
        : anthropicPlan(input, endpoint.kind === "vertex" ? endpoint.model : String(body["model"]))
  exchange.writeHead(200, { ...format.headers(), ...(stream ? sseType : jsonType) })
  const after = scenario.inbandError === undefined ? scenario.after : undefined
  return emitBody(exchange, plan, {
    stream,
    delayMs: scenario.delayMs,
    ...(after !== undefined ? { after } : {}),
  })
}

/** `POST /v1/embeddings`: always JSON; `*-after:N-tokens` counts embedding entries. */
const answerEmbeddings = async (
  exchange: Exchange,
  body: Record<string, unknown>,
  scenario: Scenario,
): Promise<void> => {
  const request = Embeddings.parseEmbeddingsRequest(body)
  if (typeof request === "string") return respondError(exchange, openaiFormat, 400, request)
  await exchange.sleep(scenario.delayMs)
  if (scenario.inbandError !== undefined)
    return respondInbandError(exchange, openaiFormat, scenario.inbandError)
  exchange.writeHead(200, { ...openaiFormat.headers(), ...jsonType })
  return emitBody(exchange, Embeddings.embeddingsJson(request, !scenario.noUsage), {
    stream: false,
    ...(scenario.after !== undefined ? { after: scenario.after } : {}),
  })
}
