/**
 * Usage of a non-stream (JSON) response body.
 */
import type { Endpoint } from "../domain/endpoint.js"
import type { TokenCounts } from "../domain/usage.js"
import {
  anthropicReport,
  makeUsageAcc,
  mergeUsage,
  modelName,
  openaiReport,
  responsesReport,
  snapshotUsage,
  type UsageAcc,
  type UsageReport,
} from "./usage.js"
import { names, readKey, skipSpace, skipValue, type Key } from "./skim.js"

/** How `usage` reads in the response body of `endpoint`. */
const reportOf = (endpoint: Endpoint): ((usage: unknown) => UsageReport | undefined) => {
  switch (endpoint) {
    case "/v1/chat/completions":
    case "/v1/embeddings":
      return openaiReport
    case "/v1/responses":
      return responsesReport
    default:
      return anthropicReport
  }
}

/** What Tollgate reads from a JSON response body: its usage, and its `id` (Responses remember which provider made it). */
export interface JsonFacts {
  readonly usage: TokenCounts | undefined
  readonly id: string | undefined
  /** The model the body says answered. */
  readonly model: string | undefined
}

const NO_FACTS: JsonFacts = { usage: undefined, id: undefined, model: undefined }

/**
 * What a non-stream response body of `endpoint` says. `usage`: Anthropic message
 * `usage` (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
 * `cache_creation_input_tokens`), Chat Completions or embeddings `usage`,
 * or Responses `usage` (mappings in usage.ts). Fields the provider left out
 * count 0; undefined when the body is not JSON, has no `usage` object, or
 * the object reports no count. `id`: the body's id (a Responses answer's is
 * remembered for `previous_response_id`).
 */
export const readJsonBody = (endpoint: Endpoint, body: Buffer | string): JsonFacts => {
  let parsed: unknown
  try {
    parsed = JSON.parse(typeof body === "string" ? body : body.toString("utf8"))
  } catch {
    return NO_FACTS
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return NO_FACTS
  const object = parsed as Record<string, unknown>
  const id = object["id"]
  const report = reportOf(endpoint)(object["usage"])
  let usage: TokenCounts | undefined
  if (report !== undefined) {
    const acc = makeUsageAcc()
    mergeUsage(acc, report)
    if (acc.reported) usage = snapshotUsage(acc)
  }
  return {
    usage,
    id: typeof id === "string" && id.length > 0 && id.length <= 256 ? id : undefined,
    model: modelName(object["model"]),
  }
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
/** The top-level members `readJsonBodyFast` reads, by their index in `readKey`'s list. */
const MEMBERS = names("id", "model", "usage")
const ID = 0
const MODEL = 1
const USAGE = 2

/** `readJsonBodyFast`'s scratch: where each member's value was last seen ([start, end) by member). */
const found = new Int32Array(6)
const key: Key = { end: 0 }

/** The string value at b[start, end): as it is when it is ASCII without escapes, else decoded by JSON.parse. */
const stringAt = (b: Buffer, start: number, end: number): string => {
  for (let i = start + 1; i < end - 1; i++) {
    const c = b[i]!
    if (c === BACKSLASH || c >= 0x80) return JSON.parse(b.toString("utf8", start, end)) as string
  }
  return b.toString("latin1", start + 1, end - 1)
}

/** The value at b[start, end) as `JSON.parse` gives it (the bytes are one valid JSON value); undefined when absent. */
const valueAt = (b: Buffer, member: number): unknown => {
  const start = found[member * 2]!
  if (start < 0) return undefined
  const end = found[member * 2 + 1]!
  return b[start] === QUOTE ? stringAt(b, start, end) : JSON.parse(b.toString("utf8", start, end))
}

/**
 * `readJsonBody`'s answer from the body's bytes without building the body (#35): one walk over the
 * top-level object with the stream meters' strict reader (skim.ts), which checks the whole text is
 * JSON and notes where `id`, `model` and `usage` last were (JSON.parse keeps the last of a repeated
 * key); only those values are parsed. Undefined when the reader is not sure (any whitespace but
 * spaces and tabs, an escape in a key, nesting deeper than its bound, anything not JSON): the caller
 * then asks `readJsonBody`, the reference, which property tests pin this to.
 */
export const readJsonBodyFast = (endpoint: Endpoint, b: Buffer): JsonFacts | undefined => {
  found.fill(-1)
  const n = b.length
  let i = skipSpace(b, 0)
  if (b[i] !== 0x7b) return undefined
  i = skipSpace(b, i + 1)
  if (b[i] === 0x7d) i++
  else {
    for (;;) {
      if (b[i] !== QUOTE) return undefined
      const member = readKey(b, i, MEMBERS, key)
      if (member < 0) return undefined
      i = skipSpace(b, key.end)
      if (b[i] !== 0x3a) return undefined
      const start = skipSpace(b, i + 1)
      i = skipValue(b, start, 1)
      if (i < 0) return undefined
      if (member < MEMBERS.length) {
        found[member * 2] = start
        found[member * 2 + 1] = i
      }
      i = skipSpace(b, i)
      if (b[i] === 0x7d) {
        i++
        break
      }
      if (b[i] !== 0x2c) return undefined
      i = skipSpace(b, i + 1)
    }
  }
  if (skipSpace(b, i) !== n) return undefined
  const id = valueAt(b, ID)
  const report = reportOf(endpoint)(valueAt(b, USAGE))
  let usage: TokenCounts | undefined
  if (report !== undefined) {
    const acc = makeUsageAcc()
    mergeUsage(acc, report)
    if (acc.reported) usage = snapshotUsage(acc)
  }
  return {
    usage,
    id: typeof id === "string" && id.length > 0 && id.length <= 256 ? id : undefined,
    model: modelName(valueAt(b, MODEL)),
  }
}

/** Largest non-stream response body kept for reading its usage, bytes. Larger bodies are relayed but counted as "no usage". */
export const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024

/** Keeps a copy of a non-stream response body (bounded) to read its usage at the end. */
export class JsonCollector {
  private chunks: Array<Uint8Array> = []
  private size = 0
  private overflow = false

  push(chunk: Uint8Array): void {
    if (this.overflow) return
    this.size += chunk.length
    if (this.size > MAX_JSON_BODY_BYTES) {
      this.overflow = true
      this.chunks = []
      return
    }
    this.chunks.push(chunk)
  }

  /** The body's usage and id (none when it was larger than the bound, or not JSON). */
  read(endpoint: Endpoint): JsonFacts {
    if (this.overflow || this.chunks.length === 0) return NO_FACTS
    const first = this.chunks[0]!
    const body =
      this.chunks.length === 1
        ? Buffer.from(first.buffer, first.byteOffset, first.byteLength)
        : Buffer.concat(this.chunks, this.size)
    return readJsonBodyFast(endpoint, body) ?? readJsonBody(endpoint, body)
  }

  /** Folds the body's usage into `acc` (sets `reported` when the body had usage); returns the body's `id`. */
  foldInto(endpoint: Endpoint, acc: UsageAcc): string | undefined {
    const { usage, id, model } = this.read(endpoint)
    acc.model = model
    if (usage === undefined) return id
    acc.inputTokens = usage.inputTokens
    acc.outputTokens = usage.outputTokens
    acc.cacheReadTokens = usage.cacheReadTokens
    acc.cacheWriteTokens = usage.cacheWriteTokens
    acc.reported = true
    return id
  }
}
