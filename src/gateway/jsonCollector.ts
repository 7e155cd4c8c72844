import type { ApiFormat } from "../config/model.js"
import { usageFromJson } from "../meter/json.js"
import type { UsageAcc } from "../meter/usage.js"

/** Largest non-stream response body kept for reading its usage, bytes. Larger bodies are relayed but counted as "no usage". */
export const MAX_JSON_BODY_BYTES = 16 * 1024 * 1024

/** Keeps a copy of a non-stream response body (bounded) to read its usage at the end. */
export class JsonCollector {
  private chunks: Array<Buffer> = []
  private size = 0
  private overflow = false

  push(chunk: Buffer): void {
    if (this.overflow) return
    this.size += chunk.length
    if (this.size > MAX_JSON_BODY_BYTES) {
      this.overflow = true
      this.chunks = []
      return
    }
    this.chunks.push(chunk)
  }

  /** Folds the body's usage into `acc` (sets `reported` when the body had usage). */
  foldInto(api: ApiFormat, acc: UsageAcc): void {
    if (this.overflow || this.chunks.length === 0) return
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size)
    const usage = usageFromJson(api, body)
    if (usage === undefined) return
    acc.inputTokens = usage.inputTokens
    acc.outputTokens = usage.outputTokens
    acc.cacheReadTokens = usage.cacheReadTokens
    acc.cacheWriteTokens = usage.cacheWriteTokens
    acc.reported = true
  }
}
