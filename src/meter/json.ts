/**
 * Usage of a non-stream (JSON) response body.
 */
import type { ApiFormat } from "../config/model.js"
import type { TokenCounts } from "../domain/usage.js"
import {
  anthropicReport,
  makeUsageAcc,
  mergeUsage,
  openaiReport,
  snapshotUsage,
  type UsageAcc,
} from "./usage.js"

/**
 * The usage in a non-stream response body: Anthropic message `usage`
 * (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
 * `cache_creation_input_tokens`) or OpenAI `usage` (mapping in usage.ts).
 * Fields the provider left out count 0. Undefined when the body is not JSON,
 * has no `usage` object, or the object reports no count.
 */
export const usageFromJson = (format: ApiFormat, body: Buffer | string): TokenCounts | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(typeof body === "string" ? body : body.toString("utf8"))
  } catch {
    return undefined
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined
  const usage = (parsed as Record<string, unknown>)["usage"]
  const report = format === "anthropic" ? anthropicReport(usage) : openaiReport(usage)
  if (report === undefined) return undefined
  const acc = makeUsageAcc()
  mergeUsage(acc, report)
  return acc.reported ? snapshotUsage(acc) : undefined
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

  /** The body's usage, or undefined when it reported none (or was larger than the bound, or not JSON). */
  usage(api: ApiFormat): TokenCounts | undefined {
    if (this.overflow || this.chunks.length === 0) return undefined
    const first = this.chunks[0]!
    const body =
      this.chunks.length === 1
        ? Buffer.from(first.buffer, first.byteOffset, first.byteLength)
        : Buffer.concat(this.chunks, this.size)
    return usageFromJson(api, body)
  }

  /** Folds the body's usage into `acc` (sets `reported` when the body had usage). */
  foldInto(api: ApiFormat, acc: UsageAcc): void {
    if (this.overflow || this.chunks.length === 0) return
    const usage = this.usage(api)
    if (usage === undefined) return
    acc.inputTokens = usage.inputTokens
    acc.outputTokens = usage.outputTokens
    acc.cacheReadTokens = usage.cacheReadTokens
    acc.cacheWriteTokens = usage.cacheWriteTokens
    acc.reported = true
  }
}
