/**
 * OpenAI embeddings (`POST /v1/embeddings`), JSON only.
 *
 * `input` is a string, an array of strings, an array of token ids, or an array of token-id arrays: one
 * embedding per input (a flat array of token ids is one input). Each vector has `dimensions` values (default
 * {@link defaultDimensions}), derived from a hash of the input and scaled to unit length, all exact float32
 * values, so that `encoding_format` `"float"` (JSON numbers) and `"base64"` (little-endian float32 bytes, the
 * official SDK's default) decode to the same numbers. `usage.prompt_tokens` counts the words and punctuation
 * of string inputs and the ids of token-id inputs. The `*-after:N-tokens` scenarios count embedding entries.
 * https://platform.openai.com/docs/api-reference/embeddings
 */
import type { BodyPlan } from "./emit.js"
import { countTokens } from "./tokens.js"

/** Vector length when the request gives no `dimensions`. */
export const defaultDimensions = 8

/** Most `dimensions` accepted (the largest real model's). */
export const maxDimensions = 3072

/** Most inputs in one request, as the real API. */
export const maxInputs = 2048

/** One input: the key its vector is hashed from, and its tokens. */
interface EmbeddingInput {
  readonly key: string
  readonly tokens: number
}

/** A decoded embeddings request. */
export interface EmbeddingsRequest {
  readonly model: string
  readonly inputs: ReadonlyArray<EmbeddingInput>
  readonly dimensions: number
  readonly base64: boolean
}

const isTokenIds = (value: unknown): value is ReadonlyArray<number> =>
  Array.isArray(value) && value.length > 0 && value.every((id) => Number.isInteger(id) && id >= 0)

const readInputs = (input: unknown): ReadonlyArray<EmbeddingInput> | undefined => {
  if (typeof input === "string")
    return input === "" ? undefined : [{ key: `s:${input}`, tokens: countTokens(input) }]
  if (isTokenIds(input)) return [{ key: `t:${input.join(",")}`, tokens: input.length }]
  if (!Array.isArray(input) || input.length === 0 || input.length > maxInputs) return undefined
  const inputs: Array<EmbeddingInput> = []
  for (const item of input) {
    if (typeof item === "string" && item !== "") inputs.push({ key: `s:${item}`, tokens: countTokens(item) })
    else if (isTokenIds(item)) inputs.push({ key: `t:${item.join(",")}`, tokens: item.length })
    else return undefined
  }
  return inputs
}

/** Decodes the body, or returns the problem phrased like the real API (a 400). */
export const parseEmbeddingsRequest = (body: Record<string, unknown>): EmbeddingsRequest | string => {
  const { model, input, dimensions, encoding_format: encoding } = body
  if (typeof model !== "string") return "Missing required parameter: 'model'."
  if (input === undefined) return "Missing required parameter: 'input'."
  const inputs = readInputs(input)
  if (inputs === undefined)
    return "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
  const size = dimensions ?? defaultDimensions
  if (typeof size !== "number" || !Number.isInteger(size) || size < 1 || size > maxDimensions)
    return `Invalid value for 'dimensions': expected an integer from 1 to ${maxDimensions}.`
  if (encoding !== undefined && encoding !== "float" && encoding !== "base64")
    return `Invalid value for 'encoding_format': expected 'float' or 'base64'.`
  return {
    model,
    inputs,
    dimensions: size,
    base64: encoding === "base64",
  }
}

/** FNV-1a, 32 bits. */
const hash = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}

/** The deterministic unit vector of `key`: `dimensions` float32 values from a seeded xorshift generator. */
export const embeddingVector = (key: string, dimensions: number): Float32Array => {
  let state = hash(key) || 1
  const raw = Array.from({ length: dimensions }, () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) / 0x80000000 - 1
  })
  const norm = Math.sqrt(raw.reduce((sum, value) => sum + value * value, 0)) || 1
  return Float32Array.from(raw, (value) => value / norm)
}

/** A vector as the wire carries it: a JSON array of numbers, or a JSON string of little-endian float32 bytes. */
const encode = (vector: Float32Array, base64: boolean): string => {
  if (!base64) return `[${Array.from(vector).join(",")}]`
  const bytes = Buffer.alloc(vector.length * 4)
  vector.forEach((value, index) => bytes.writeFloatLE(value, index * 4))
  return `"${bytes.toString("base64")}"`
}

/** The response as JSON fragments: one piece per embedding entry, so `*-after:N-tokens` counts entries. */
export const embeddingsJson = (request: EmbeddingsRequest, usage: boolean): BodyPlan => {
  const promptTokens = request.inputs.reduce((n, input) => n + input.tokens, 0)
  return {
    head: [`{"object":"list","data":[`],
    tokens: request.inputs.length,
    token: (index) =>
      (index > 0 ? "," : "") +
      `{"object":"embedding","index":${index},"embedding":` +
      encode(embeddingVector(request.inputs[index]?.key ?? "", request.dimensions), request.base64) +
      "}",
    tail: [
      `],"model":${JSON.stringify(request.model)}` +
        (usage ? `,"usage":{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens}}` : "") +
        "}",
    ],
    malformed: `"oops`,
  }
}
