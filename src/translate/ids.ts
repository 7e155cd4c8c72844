/**
 * Identifiers and timestamps of the objects the translation layer makes up:
 * a Chat completion, an Anthropic message or a Responses response that the
 * upstream never produced under that name.
 *
 * These run per response and per stream, inside plain synchronous code that
 * has no Effect context, and nothing reads them back: they are labels, not
 * time logic or randomness that a test must drive. So they come from
 * node:crypto and the wall clock here, in this one file.
 */
import { randomBytes } from "node:crypto"

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `prefix` + 24 random base62 characters (`msg_…`, `chatcmpl-…`, `resp_…`, `call_…`, `fc_…`). */
export const makeId = (prefix: string): string => {
  const bytes = randomBytes(24)
  let id = prefix
  for (const byte of bytes) id += ALPHABET[byte % 62]
  return id
}

/** Unix time in whole seconds (Chat `created`, Responses `created_at`). */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000)

/**
 * Anthropic tool ids must match `^[a-zA-Z0-9_-]+$`: other characters become `_` (the same way in a call and
 * its result).
 */
export const anthropicToolId = (id: string): string => id.replace(/[^a-zA-Z0-9_-]/g, "_")
