import type { ParsedRequest } from "../domain/request.js"
import type { UpstreamRequest } from "./transport.js"
import { anthropicHeaders } from "./anthropic.js"
import { removeMember, setMember } from "./patch.js"

/** The `anthropic_version` body field Vertex requires, added when the client sent none. */
export const VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"

/** Where a Vertex provider's requests go. */
export interface VertexTarget {
  readonly baseUrl: string
  readonly project: string
  readonly region: string
}

/**
 * Claude on Vertex AI: the URL names the model, `model` leaves the body,
 * `anthropic_version` joins it, and the bearer token comes from `token()`
 * (a cached Google access token, or a static one).
 */
export const buildVertex =
  (target: VertexTarget, token: () => string) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = anthropicHeaders(request)
    delete headers["anthropic-version"]
    headers["authorization"] = `Bearer ${token()}`
    let body = removeMember(request.raw, "model")
    if (!request.hasAnthropicVersion) {
      body = setMember(body, "anthropic_version", JSON.stringify(VERTEX_ANTHROPIC_VERSION))
    }
    const verb = request.stream ? "streamRawPredict" : "rawPredict"
    const path =
      `/v1/projects/${encodeURIComponent(target.project)}/locations/${encodeURIComponent(target.region)}` +
      `/publishers/anthropic/models/${encodeURIComponent(model).replaceAll("%40", "@")}:${verb}`
    return { endpoint: "/v1/messages", origin: target.baseUrl, path, headers, body }
  }
