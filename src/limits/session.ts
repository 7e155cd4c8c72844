import { hash } from "node:crypto"
import type { Endpoint } from "../domain/endpoint.js"

/** A session ID: 1 to 128 visible ASCII characters (`!` to `~`), no spaces. */
const SESSION_ID = /^[\x21-\x7e]{1,128}$/

export const isValidSessionId = (id: string): boolean => SESSION_ID.test(id)

const firstUser = (messages: unknown): unknown => {
  if (!Array.isArray(messages)) return undefined
  for (const message of messages) {
    if (
      typeof message === "object" &&
      message !== null &&
      (message as Record<string, unknown>)["role"] === "user"
    ) {
      return (message as Record<string, unknown>)["content"]
    }
  }
  return undefined
}

const openaiSystem = (messages: unknown): unknown => {
  if (!Array.isArray(messages)) return undefined
  for (const message of messages) {
    if (typeof message !== "object" || message === null) continue
    const role = (message as Record<string, unknown>)["role"]
    if (role === "system" || role === "developer") return (message as Record<string, unknown>)["content"]
  }
  return undefined
}

/**
 * The derived session ID (SPEC "Sessions"): `d-` + the first 24 hex chars of
 * SHA-256 over `JSON.stringify([tenant, system ?? null, first user message
 * content])`, values as parsed from the request. An agent resends that prefix
 * on every turn, so its turns share one session. No user message: no
 * session. For Chat Completions the system prompt is the first `system` (or
 * `developer`) message (ADR 0009); for Responses it is `instructions`, and
 * the first user message is `input` itself when that is a string.
 * Embeddings have no session.
 */
export const deriveSessionId = (
  endpoint: Endpoint,
  tenant: string,
  body: Readonly<Record<string, unknown>>,
): string | undefined => {
  let system: unknown
  let user: unknown
  switch (endpoint) {
    case "/v1/embeddings":
      return undefined
    case "/v1/responses": {
      const input = body["input"]
      system = body["instructions"]
      user = typeof input === "string" ? input : firstUser(input)
      break
    }
    case "/v1/chat/completions":
      system = openaiSystem(body["messages"])
      user = firstUser(body["messages"])
      break
    default:
      system = body["system"]
      user = firstUser(body["messages"])
  }
  if (user === undefined) return undefined
  const digest = hash("sha256", JSON.stringify([tenant, system ?? null, user]), "hex")
  return `d-${digest.slice(0, 24)}`
}
