import type { Dispatcher } from "undici"
import type { ApiFormat, ProviderConfig } from "../config/model.js"
import type { Endpoint } from "../domain/endpoint.js"
import type { ParsedRequest } from "../domain/request.js"

/** One upstream HTTP request, ready for undici. */
export interface UpstreamRequest {
  readonly origin: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: Buffer
}

/**
 * One configured provider: how to turn a client request into its upstream
 * request. Credentials stay inside the adapter; the client's own key never
 * goes upstream.
 */
export interface ProviderAdapter {
  readonly name: string
  readonly config: ProviderConfig
  /** The wire format its responses use. */
  readonly api: ApiFormat
  /** The breaker key part that names where the target runs ("" when the kind has no region). */
  readonly region: string
  /** Whether it serves `endpoint` at all (Vertex has no count_tokens through Tollgate). */
  readonly serves: (endpoint: Endpoint) => boolean
  /** The upstream request for `request` sent to `model`. */
  readonly build: (request: ParsedRequest, model: string) => UpstreamRequest
  /** The keep-alive pool for attempts whose connect timeout is `connectMs`. */
  readonly dispatcher: (connectMs: number) => Dispatcher
}
