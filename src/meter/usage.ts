/**
 * Token usage of one response, and how the usage reports of a provider are
 * folded into it. Plain functions: they run per event on the hot path.
 */

import type { TokenCounts } from "../domain/usage.js"

/** The mutable accumulator a meter folds usage reports into. */
export interface UsageAcc {
  inputTokens: number
  outputTokens: number
  cacheReadTokens: number
  cacheWriteTokens: number
  /** True once any usage field was reported by the provider. */
  reported: boolean
  /** The model the provider says answered (its first mention in the response), for traces. */
  model: string | undefined
}

/**
 * One usage report as the provider sent it, already mapped to our fields.
 * `undefined` means the provider did not report that field in this event.
 */
export interface UsageReport {
  readonly inputTokens: number | undefined
  readonly outputTokens: number | undefined
  readonly cacheReadTokens: number | undefined
  readonly cacheWriteTokens: number | undefined
}

/** A fresh accumulator: all counts 0, nothing reported. */
export const makeUsageAcc = (): UsageAcc => ({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reported: false,
  model: undefined,
})

/** Longest response model name kept (a provider's names are short; a hostile upstream's need not be). */
const MAX_MODEL_LENGTH = 256

/** `value` when it can be a response's model name. */
export const modelName = (value: unknown): string | undefined =>
  typeof value === "string" && value.length > 0 && value.length <= MAX_MODEL_LENGTH ? value : undefined

/** Notes `model` as the response's model unless one is known already. */
export const noteModel = (acc: UsageAcc, model: unknown): void => {
  if (acc.model === undefined) acc.model = modelName(model)
}

/** A frozen copy of the counts of an accumulator. */
export const snapshotUsage = (acc: TokenCounts): TokenCounts => ({
  inputTokens: acc.inputTokens,
  outputTokens: acc.outputTokens,
  cacheReadTokens: acc.cacheReadTokens,
  cacheWriteTokens: acc.cacheWriteTokens,
})

/**
 * Folds one report into the accumulator.
 *
 * Usage is merged, never replaced. Anthropic's `message_start` carries the
 * input and cache tokens plus a provisional `output_tokens` (often 1);
 * `message_delta` carries the final cumulative `output_tokens` and may repeat
 * the others, or send them as 0 or null. OpenAI's last chunk carries all of
 * it at once. Replacing the whole usage with the latest event would erase the
 * input count — the bug that made other gateways bill streams as output only.
 * So: an absent or null field keeps the old value; input and cache fields take
 * the larger of old and new; output takes the latest reported value, because
 * `message_delta`'s count is final and may legitimately be lower than the
 * provisional one (e.g. 0 after a provisional 1).
 */
export const mergeUsage = (acc: UsageAcc, report: UsageReport): void => {
  if (report.inputTokens !== undefined) {
    acc.reported = true
    if (report.inputTokens > acc.inputTokens) acc.inputTokens = report.inputTokens
  }
  if (report.cacheReadTokens !== undefined) {
    acc.reported = true
    if (report.cacheReadTokens > acc.cacheReadTokens) acc.cacheReadTokens = report.cacheReadTokens
  }
  if (report.cacheWriteTokens !== undefined) {
    acc.reported = true
    if (report.cacheWriteTokens > acc.cacheWriteTokens) acc.cacheWriteTokens = report.cacheWriteTokens
  }
  if (report.outputTokens !== undefined) {
    acc.reported = true
    acc.outputTokens = report.outputTokens
  }
}

/** A token count, or undefined for anything that is not a non-negative safe integer (absent, null, junk). */
const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Maps an Anthropic `usage` object (message, `message_start.message.usage`,
 * `message_delta.usage`). Undefined when `usage` is not an object.
 */
export const anthropicReport = (usage: unknown): UsageReport | undefined => {
  if (!isObject(usage)) return undefined
  return {
    inputTokens: count(usage["input_tokens"]),
    outputTokens: count(usage["output_tokens"]),
    cacheReadTokens: count(usage["cache_read_input_tokens"]),
    cacheWriteTokens: count(usage["cache_creation_input_tokens"]),
  }
}

/**
 * Maps an OpenAI `usage` object. OpenAI's `prompt_tokens` includes the cached
 * ones, so input = prompt_tokens − prompt_tokens_details.cached_tokens;
 * OpenAI reports no cache writes (0).
 * Undefined when `usage` is not an object (OpenAI sends `"usage": null` on
 * every chunk but the last).
 */
export const openaiReport = (usage: unknown): UsageReport | undefined => {
  if (!isObject(usage)) return undefined
  const prompt = count(usage["prompt_tokens"])
  const details = usage["prompt_tokens_details"]
  const cached = isObject(details) ? count(details["cached_tokens"]) : undefined
  return {
    inputTokens: prompt === undefined ? undefined : Math.max(0, prompt - (cached ?? 0)),
    outputTokens: count(usage["completion_tokens"]),
    cacheReadTokens: cached ?? (prompt === undefined ? undefined : 0),
    cacheWriteTokens: prompt === undefined ? undefined : 0,
  }
}

/**
 * Maps an OpenAI Responses `usage` object (the JSON response's, or the one
 * in `response.completed` / `response.incomplete`): `input_tokens` includes
 * the cached ones, so input = input_tokens − input_tokens_details.cached_tokens
 * and the cached ones are cache reads; no cache writes (0).
 */
export const responsesReport = (usage: unknown): UsageReport | undefined => {
  if (!isObject(usage)) return undefined
  const input = count(usage["input_tokens"])
  const details = usage["input_tokens_details"]
  const cached = isObject(details) ? count(details["cached_tokens"]) : undefined
  return {
    inputTokens: input === undefined ? undefined : Math.max(0, input - (cached ?? 0)),
    outputTokens: count(usage["output_tokens"]),
    cacheReadTokens: cached ?? (input === undefined ? undefined : 0),
    cacheWriteTokens: input === undefined ? undefined : 0,
  }
}
