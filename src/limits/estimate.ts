/**
 * The input-token estimate used before a provider reports usage: the
 * UTF-8 bytes of every string in the prompt-bearing fields (system prompt,
 * messages, tool definitions), divided by 4 and rounded up.
 */

const PROMPT_FIELDS = ["system", "messages", "tools", "tool_choice", "functions"] as const

const stringBytes = (value: unknown, depth: number): number => {
  if (typeof value === "string") return Buffer.byteLength(value, "utf8")
  if (depth > 64 || typeof value !== "object" || value === null) return 0
  let total = 0
  if (Array.isArray(value)) {
    for (const item of value) total += stringBytes(item, depth + 1)
  } else {
    for (const key in value) total += stringBytes((value as Record<string, unknown>)[key], depth + 1)
  }
  return total
}

/** Estimated input tokens of a request body: ceil(prompt text bytes / 4). */
export const estimateInputTokens = (body: Readonly<Record<string, unknown>>): number => {
  let bytes = 0
  for (const field of PROMPT_FIELDS) bytes += stringBytes(body[field], 0)
  return Math.ceil(bytes / 4)
}
