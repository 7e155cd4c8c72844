import type { ParsedRequest } from "../domain/request.js"
import type { UpstreamRequest } from "./transport.js"
import { setMember } from "./patch.js"

/**
 * `model` patched; a Chat Completions stream also gets `stream_options.include_usage: true`
 * (kept alongside any other stream option the client set), so the final
 * chunk carries the usage the meter needs.
 */
const patchBody = (request: ParsedRequest, model: string): Buffer => {
  let body = setMember(request.raw, "model", JSON.stringify(model))
  if (request.stream && request.endpoint === "/v1/chat/completions") {
    const given = request.streamOptions
    const options = given !== undefined ? { ...given, include_usage: true } : { include_usage: true }
    body = setMember(body, "stream_options", JSON.stringify(options))
  }
  return body
}

const openaiHeaders = (request: ParsedRequest): Record<string, string> => {
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (request.accept !== undefined) headers["accept"] = request.accept
  if (request.fakeScenario !== undefined) headers["x-fake-scenario"] = request.fakeScenario
  return headers
}

/** OpenAI Chat Completions: `authorization: Bearer`. */
export const buildOpenAI =
  (baseUrl: string, apiKey: string) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = openaiHeaders(request)
    headers["authorization"] = `Bearer ${apiKey}`
    return {
      endpoint: request.endpoint,
      origin: baseUrl,
      path: request.endpoint,
      headers,
      body: patchBody(request, model),
    }
  }

/** Ollama's OpenAI-compatible endpoint: no key. */
export const buildOllama =
  (baseUrl: string) =>
  (request: ParsedRequest, model: string): UpstreamRequest => ({
    endpoint: request.endpoint,
    origin: baseUrl,
    path: request.endpoint,
    headers: openaiHeaders(request),
    body: patchBody(request, model),
  })

/** Azure OpenAI's v1 API: `api-key`, the paths under `/openai/v1`, the deployment name as `model`. */
export const buildAzure =
  (baseUrl: string, apiKey: string) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = openaiHeaders(request)
    headers["api-key"] = apiKey
    return {
      endpoint: request.endpoint,
      origin: baseUrl,
      path: `/openai${request.endpoint}`,
      headers,
      body: patchBody(request, model),
    }
  }
