/**
 * Gemini's thought signatures across a Chat Completions client (ADR 0071).
 *
 * A Gemini 3 model answers a tool call with a `thoughtSignature` on the
 * `functionCall` part and refuses (400) the next request unless that part
 * comes back with the same signature. Chat Completions has no field for it,
 * but every client sends a tool call's `id` back unchanged, so the signature
 * travels inside the id: `{id}__thought__{base64url of the signature}`.
 * A history whose calls carry no signature (written by another model, or by
 * the application) gets Google's documented placeholder on Gemini 3 models.
 */

import { isObject, type Json } from "../wire.js"

/** Between a tool call's own id and its signature (LiteLLM's spelling, so ids move between the two). */
const MARK = "__thought__"

/** The placeholder Gemini 3 accepts for a call it did not make (Google's thought-signatures guide). */
export const PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"

/** A Chat tool call id carrying `signature`. */
export const idWithSignature = (id: string, signature: string): string =>
  `${id}${MARK}${Buffer.from(signature, "utf8").toString("base64url")}`

/** The signature a Chat tool call id carries, or undefined. */
export const signatureOfId = (id: string): string | undefined => {
  const at = id.lastIndexOf(MARK)
  if (at < 0) return undefined
  const encoded = id.slice(at + MARK.length)
  if (encoded === "" || !/^[A-Za-z0-9_-]+$/.test(encoded)) return undefined
  return Buffer.from(encoded, "base64url").toString("utf8")
}

/**
 * `body` (a translated `generateContent` body) with Google's placeholder on the first `functionCall` part of
 * each model turn that has no signature, for a model that requires one; `body` itself when none is missing.
 * Only the turns it changes are copied.
 */
export const withPlaceholderSignatures = (body: Readonly<Json>): Json => {
  const contents = body["contents"]
  if (!Array.isArray(contents)) return body
  let changed = false
  const signed = contents.map((content: unknown) => {
    if (!isObject(content) || content["role"] !== "model") return content
    const parts = content["parts"]
    if (!Array.isArray(parts)) return content
    const first = parts.findIndex((part: unknown) => isObject(part) && part["functionCall"] !== undefined)
    const call: unknown = parts[first]
    if (!isObject(call) || call["thoughtSignature"] !== undefined) return content
    changed = true
    const copy = parts.slice()
    copy[first] = { ...call, thoughtSignature: PLACEHOLDER_SIGNATURE }
    return { ...content, parts: copy }
  })
  return changed ? { ...body, contents: signed } : body
}

/** True for the models that require a signature on the first call of each model turn (Gemini 3 and later). */
export const requiresSignatures = (model: string): boolean => {
  const match = /^gemini-(\d+)/.exec(model)
  return match !== null && Number(match[1]) >= 3
}
