import { hash } from "node:crypto"
import type { ApiFormat } from "../config/model.js"

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
 * session. For the OpenAI format the system prompt is the first `system` (or
 * `developer`) message (ADR 0009).
 */
export const deriveSessionId = (
  api: ApiFormat,
  tenant: string,
  body: Readonly<Record<string, unknown>>,
): string | undefined => {
  const messages = body["messages"]
  const user = firstUser(messages)
  if (user === undefined) return undefined
  const system = api === "anthropic" ? body["system"] : openaiSystem(messages)
  const digest = hash("sha256", JSON.stringify([tenant, system ?? null, user]), "hex")
  return `d-${digest.slice(0, 24)}`
}
