/**
 * The input-token estimate used before a provider reports usage (ADR 0003):
 * the UTF-8 bytes of the request's text content — system prompt, message
 * text, tool calls and results, tool definitions — divided by 4, rounded up.
 * Role names, block types and other structure are not content and are not
 * counted; images and documents are not text and add nothing.
 */

const bytes = (text: string): number => Buffer.byteLength(text, "utf8")

const json = (value: unknown): number => (value === undefined ? 0 : bytes(JSON.stringify(value)))

/** Text bytes of one content value: a string, or an array of content blocks/parts. */
const contentBytes = (content: unknown, depth = 0): number => {
  if (typeof content === "string") return bytes(content)
  if (!Array.isArray(content) || depth > 8) return 0
  let total = 0
  for (const block of content) {
    if (typeof block !== "object" || block === null) continue
    const b = block as Record<string, unknown>
    if (typeof b["text"] === "string") total += bytes(b["text"])
    if (typeof b["thinking"] === "string") total += bytes(b["thinking"])
    if (b["type"] === "tool_use")
      total += json(b["input"]) + (typeof b["name"] === "string" ? bytes(b["name"]) : 0)
    if (b["type"] === "tool_result") total += contentBytes(b["content"], depth + 1)
  }
  return total
}

const messageBytes = (message: unknown): number => {
  if (typeof message !== "object" || message === null) return 0
  const m = message as Record<string, unknown>
  let total = contentBytes(m["content"])
  if (Array.isArray(m["tool_calls"])) {
    for (const call of m["tool_calls"]) {
      const fn = (call as { function?: { name?: unknown; arguments?: unknown } } | null)?.function
      if (typeof fn?.name === "string") total += bytes(fn.name)
      if (typeof fn?.arguments === "string") total += bytes(fn.arguments)
    }
  }
  return total
}

/** Bytes that stand for one token of a token-id input (embeddings accept token ids). */
const TOKEN_BYTES = 4

/**
 * Text bytes of one Responses input item (a message, a function call or its
 * output) or one embeddings input (a string, a token id, an array of ids).
 */
const inputItemBytes = (item: unknown): number => {
  if (typeof item === "string") return bytes(item)
  if (typeof item === "number") return TOKEN_BYTES
  if (Array.isArray(item)) return item.length * TOKEN_BYTES
  if (typeof item !== "object" || item === null) return 0
  const i = item as Record<string, unknown>
  let total = contentBytes(i["content"])
  for (const field of ["name", "arguments", "output"]) {
    const value = i[field]
    if (typeof value === "string") total += bytes(value)
  }
  return total
}

/**
 * Estimated input tokens of a request body — Anthropic Messages, Chat
 * Completions, Responses (`instructions`, `input`) or embeddings (`input`):
 * ceil(text bytes / 4).
 */
export const estimateInputTokens = (body: Readonly<Record<string, unknown>>): number => {
  let total = contentBytes(body["system"])
  const messages = body["messages"]
  if (Array.isArray(messages)) for (const message of messages) total += messageBytes(message)
  const instructions = body["instructions"]
  if (typeof instructions === "string") total += bytes(instructions)
  const input = body["input"]
  if (Array.isArray(input)) for (const item of input) total += inputItemBytes(item)
  else total += inputItemBytes(input)
  total += json(body["tools"]) + json(body["functions"])
  return Math.ceil(total / 4)
}
