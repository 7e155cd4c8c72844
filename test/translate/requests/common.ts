/**
 * The pieces the random client requests of each format are made of (see
 * chat.ts, messages.ts, responses.ts): texts, images, tool names and ids,
 * and the parameters every format shares.
 */
import * as fc from "fast-check"

export type Json = Record<string, unknown>

export const text = fc.string({ minLength: 1, maxLength: 16 }).filter((s) => s.trim() !== "")
/** Text that may be blank (whitespace only), which an Anthropic request cannot hold. */
export const maybeBlank = fc.oneof(
  { weight: 5, arbitrary: text },
  { weight: 1, arbitrary: fc.constantFrom(" ", "\n", "") },
)
export const toolName = fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/)
export const args = fc.dictionary(
  fc.stringMatching(/^[a-z]{1,5}$/),
  fc.oneof(fc.string({ maxLength: 6 }), fc.integer()),
  {
    maxKeys: 3,
  },
)
export const dataUrl = fc
  .tuple(
    fc.constantFrom("image/png", "image/jpeg", "image/gif", "image/webp"),
    fc.base64String({ minLength: 4, maxLength: 24 }),
  )
  .map(([media, data]) => `data:${media};base64,${data}`)
export const httpsUrl = fc.stringMatching(/^[a-z]{1,8}$/).map((s) => `https://img.example/${s}.png`)
export const imageUrl = fc.oneof(dataUrl, httpsUrl)
export const unit = fc.double({ min: 0, max: 1, noNaN: true })
export const schema = fc.constantFrom<Json>(
  { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  { type: "object", properties: {} },
  { properties: { n: { type: "integer" } } },
)

/** Up to 3 distinct tool names. */
export const toolNames = fc.uniqueArray(toolName, { maxLength: 3 })

/** Distinct call ids: a counter makes them unique across the conversation. */
let counter = 0
export const callId = (prefix: string) =>
  fc.stringMatching(/^[A-Za-z0-9]{3,8}(\.[a-z]{1,3})?$/).map((s) => `${prefix}${s}${counter++}`)

/** The parameters every format shares, named the client's way. */
export const common = fc.record(
  {
    temperature: unit,
    top_p: unit,
    stream: fc.boolean(),
    user: text,
  },
  { requiredKeys: [] },
)
