/**
 * The `prompt-cache` scenario (Anthropic formats: Messages, Vertex, Bedrock): one fake provider's prompt cache,
 * as a provider keeps one per account and region. Each conversation (model, system prompt and first message) has
 * one entry, the whole prompt of the last request this fake answered for it. A request whose messages begin with
 * that prompt reads it from the cache (`cache_read_input_tokens`: its tokens); the rest of the prompt is written
 * (`cache_creation_input_tokens`), and becomes the entry. So a turn reads the cache exactly when this fake
 * answered an earlier turn of the conversation, and another fake's answers never warm it: what sticky routing
 * is for (ADR 0073). At most 10,000 conversations, the least recently used forgotten first.
 */
import { createHash } from "node:crypto"
import { anthropicInputTokens } from "./tokens.js"

const MAX_ENTRIES = 10_000

const hash = (value: unknown): string => createHash("sha256").update(JSON.stringify(value)).digest("hex")

interface Entry {
  /** Messages in the cached prompt. */
  readonly count: number
  /** `hash` of those messages. */
  readonly digest: string
}

/** How a prompt splits: tokens read from the cache and tokens written to it (their sum: the prompt's tokens). */
export interface CacheSplit {
  readonly read: number
  readonly write: number
}

export class PromptCache {
  private readonly entries = new Map<string, Entry>()

  /** Reads and writes the cache for one request `body`; its prompt becomes the conversation's entry. */
  turn(body: Record<string, unknown>): CacheSplit {
    const total = anthropicInputTokens(body)
    const messages = Array.isArray(body["messages"]) ? (body["messages"] as ReadonlyArray<unknown>) : []
    if (messages.length === 0) return { read: 0, write: total }
    const key = hash([body["model"] ?? null, body["system"] ?? null, messages[0]])
    const entry = this.entries.get(key)
    let read = 0
    if (
      entry !== undefined &&
      entry.count <= messages.length &&
      hash(messages.slice(0, entry.count)) === entry.digest
    ) {
      read = anthropicInputTokens({ ...body, messages: messages.slice(0, entry.count) })
    }
    this.entries.delete(key)
    this.entries.set(key, { count: messages.length, digest: hash(messages) })
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!)
    return { read, write: total - read }
  }

  clear(): void {
    this.entries.clear()
  }
}
