/**
 * Usage of a non-stream (JSON) response body.
 */
import type { ApiFormat } from "../config/model.js"
import {
  anthropicReport,
  makeUsageAcc,
  mergeUsage,
  openaiReport,
  snapshotUsage,
  type Usage,
} from "./usage.js"

/**
 * The usage in a non-stream response body: Anthropic message `usage`
 * (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
 * `cache_creation_input_tokens`) or OpenAI `usage` (mapping in usage.ts).
 * Fields the provider left out count 0. Undefined when the body is not JSON,
 * has no `usage` object, or the object reports no count.
 */
export const usageFromJson = (format: ApiFormat, body: Buffer | string): Usage | undefined => {
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
