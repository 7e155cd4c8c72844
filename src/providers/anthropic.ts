import type { ParsedRequest } from "../domain/request.js"
import type { UpstreamRequest } from "./transport.js"
import { setMember } from "./patch.js"

/** The `anthropic-version` sent when the client sends none. */
export const DEFAULT_ANTHROPIC_VERSION = "2023-06-01"

/** Headers common to Anthropic-format upstreams (direct and Vertex). */
export const anthropicHeaders = (request: ParsedRequest): Record<string, string> => {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "anthropic-version": request.anthropicVersion ?? DEFAULT_ANTHROPIC_VERSION,
  }
  if (request.anthropicBeta !== undefined) headers["anthropic-beta"] = request.anthropicBeta
  if (request.accept !== undefined) headers["accept"] = request.accept
  if (request.fakeScenario !== undefined) headers["x-fake-scenario"] = request.fakeScenario
  return headers
}

/** Direct Anthropic API: `x-api-key`, the client's path, `model` patched. */
export const buildAnthropic =
  (baseUrl: string, apiKey: string) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = anthropicHeaders(request)
    headers["x-api-key"] = apiKey
    return {
      endpoint: request.endpoint,
      origin: baseUrl,
      path: request.endpoint,
      headers,
      body: setMember(request.raw, "model", JSON.stringify(model)),
    }
  }
