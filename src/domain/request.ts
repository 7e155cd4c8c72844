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
  readonly raw: Buffer
  /** The route name. */
  readonly model: string
  readonly stream: boolean
  /** `max_tokens` (OpenAI: `max_completion_tokens`, else `max_tokens`) when it is a positive integer. */
  readonly maxTokens: number | undefined
  /** Client headers forwarded upstream (lower-case names; only the ones SPEC lists). */
  readonly anthropicVersion: string | undefined
  readonly anthropicBeta: string | undefined
  readonly accept: string | undefined
  /** The client's `stream_options` when it is an object (OpenAI streams keep its other options). */
  readonly streamOptions: Readonly<Record<string, unknown>> | undefined
  /** The body has an `anthropic_version` member (Vertex keeps the client's). */
  readonly hasAnthropicVersion: boolean
  /** `x-fake-scenario`, passed through so the fake provider's per-request scenarios work through Tollgate (ADR 0002). */
  readonly fakeScenario: string | undefined
}

/** `parseRequest`'s result: the request, and its parsed body for the checks before the first attempt. */
export interface Parsed {
  readonly request: ParsedRequest
  /** The top-level object as `JSON.parse` gave it; read-only. */
  readonly json: Readonly<Record<string, unknown>>
}
