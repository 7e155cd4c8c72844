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
    return readJsonBody(endpoint, body)
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
