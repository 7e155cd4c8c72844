import type { Endpoint } from "./endpoint.js"

/**
 * A client request after auth and parsing: the raw bytes (patched, never
 * re-encoded, for the upstream) and the few fields Tollgate reads. The parsed
 * body itself is not kept: it is read once (route, estimate, session) and
 * then left to the garbage collector, so a long stream does not hold a large
 * prompt's object tree for its whole life.
 */
export interface ParsedRequest {
  readonly endpoint: Endpoint
  /** Emptied once the response is committed (`releaseBody`): no attempt follows, nothing reads it. */
  raw: Buffer
  /** The route name. */
  readonly model: string
  readonly stream: boolean
  /**
   * The output limit when it is a positive integer: `max_tokens` (Chat
   * Completions: `max_completion_tokens`, else `max_tokens`; Responses:
   * `max_output_tokens`); none for embeddings.
   */
  readonly maxTokens: number | undefined
  /** Client headers forwarded upstream (lower-case names; only the ones SPEC lists). */
  readonly anthropicVersion: string | undefined
  readonly anthropicBeta: string | undefined
  readonly accept: string | undefined
  /** The client's `stream_options` when it is an object (OpenAI streams keep its other options). */
  readonly streamOptions: Readonly<Record<string, unknown>> | undefined
  /** Responses: `previous_response_id` when it is a non-empty string (the request goes to the provider that made it). */
  readonly previousResponseId: string | undefined
  /** The body has an `anthropic_version` member (Vertex keeps the client's). */
  readonly hasAnthropicVersion: boolean
  /** `x-fake-scenario`, passed through so the fake provider's per-request scenarios work through Tollgate (ADR 0002). */
  readonly fakeScenario: string | undefined
}

const NO_BYTES = Buffer.alloc(0)

/**
 * Lets go of the request's bytes once its response is committed (no attempt
 * follows): a stream that stays open for minutes does not keep its prompt.
 */
export const releaseBody = (request: ParsedRequest): void => {
  request.raw = NO_BYTES
}

/** `parseRequest`'s result: the request, and its parsed body for the checks before the first attempt. */
export interface Parsed {
  readonly request: ParsedRequest
  /** The top-level object as `JSON.parse` gave it; read-only. */
  readonly json: Readonly<Record<string, unknown>>
}

const positiveInt = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : undefined

const maxTokensOf = (endpoint: Endpoint, body: Readonly<Record<string, unknown>>): number | undefined => {
  switch (endpoint) {
    case "/v1/chat/completions":
      return positiveInt(body["max_completion_tokens"]) ?? positiveInt(body["max_tokens"])
    case "/v1/responses":
      return positiveInt(body["max_output_tokens"])
    case "/v1/embeddings":
      return undefined
    default:
      return positiveInt(body["max_tokens"])
  }
}

/** The client asked for the usage chunk of a Chat Completions stream (`stream_options.include_usage: true`). */
export const includesUsage = (request: ParsedRequest): boolean =>
  request.streamOptions?.["include_usage"] === true

/**
 * The request Tollgate sends on, from its bytes, its top-level JSON object
 * and its headers (`header` returns one lower-case header's value): the few
 * fields the gateway and the providers read; everything else stays in `raw`.
 * `model` is the route name the client gave (or the library's model).
 */
export const readRequest = (
  endpoint: Endpoint,
  raw: Buffer,
  body: Readonly<Record<string, unknown>>,
  model: string,
  header: (name: string) => string | undefined,
): ParsedRequest => {
  const streamOptions = body["stream_options"]
  return {
    endpoint,
    raw,
    model,
    stream:
      body["stream"] === true && endpoint !== "/v1/messages/count_tokens" && endpoint !== "/v1/embeddings",
    maxTokens: maxTokensOf(endpoint, body),
    anthropicVersion: header("anthropic-version"),
    anthropicBeta: header("anthropic-beta"),
    accept: header("accept"),
    streamOptions:
      typeof streamOptions === "object" && streamOptions !== null && !Array.isArray(streamOptions)
        ? (streamOptions as Record<string, unknown>)
        : undefined,
    previousResponseId:
      endpoint === "/v1/responses" &&
      typeof body["previous_response_id"] === "string" &&
      body["previous_response_id"] !== ""
        ? body["previous_response_id"]
        : undefined,
    hasAnthropicVersion: body["anthropic_version"] !== undefined,
    fakeScenario: header("x-fake-scenario"),
  }
}
