/**
 * Usage in the client's format (SPEC "Translation between API formats").
 *
 * The upstream's usage is first read into Tollgate's own counts (uncached
 * input, output, cache reads, cache writes) by the meter's mapping
 * (`anthropicReport`, `openaiReport`), then written the client's way:
 * an OpenAI-format client counts every input token in `prompt_tokens` /
 * `input_tokens` and names the cache reads among them `cached_tokens`; an
 * Anthropic-format client gets the uncached input and the cache counts apart.
 * So a total survives the round trip, whichever side reported it.
 */
import type { TokenCounts } from "../domain/usage.js"
import { makeUsageAcc, mergeUsage, type UsageAcc, type UsageReport } from "../meter/usage.js"

/** Counts of nothing reported: all 0. */
export const NO_TOKENS: TokenCounts = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
}

/** The counts of one report (absent fields 0); undefined when there is no report. */
export const tokensOf = (report: UsageReport | undefined): TokenCounts | undefined => {
  if (report === undefined) return undefined
  const acc = makeUsageAcc()
  mergeUsage(acc, report)
  return acc.reported ? countsOf(acc) : undefined
}

/** The counts held by an accumulator. */
export const countsOf = (acc: UsageAcc): TokenCounts => ({
  inputTokens: acc.inputTokens,
  outputTokens: acc.outputTokens,
  cacheReadTokens: acc.cacheReadTokens,
  cacheWriteTokens: acc.cacheWriteTokens,
})

/** Every input token: uncached + cache reads + cache writes. */
const promptTokens = (t: TokenCounts): number => t.inputTokens + t.cacheReadTokens + t.cacheWriteTokens

/** Chat Completions `usage`: `prompt_tokens` counts all input, `cached_tokens` the cache reads among it. */
export const chatUsage = (t: TokenCounts) => ({
  prompt_tokens: promptTokens(t),
  completion_tokens: t.outputTokens,
  total_tokens: promptTokens(t) + t.outputTokens,
  prompt_tokens_details: { cached_tokens: t.cacheReadTokens },
})

/**
 * Responses `usage`: `input_tokens` counts all input, `cached_tokens` the cache reads, `cache_write_tokens`
 * the writes.
 */
export const responsesUsage = (t: TokenCounts) => ({
  input_tokens: promptTokens(t),
  input_tokens_details: { cached_tokens: t.cacheReadTokens, cache_write_tokens: t.cacheWriteTokens },
  output_tokens: t.outputTokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: promptTokens(t) + t.outputTokens,
})

/** Anthropic `usage`: the uncached input, the output, and the cache counts apart. */
export const anthropicUsage = (t: TokenCounts) => ({
  input_tokens: t.inputTokens,
  output_tokens: t.outputTokens,
  cache_creation_input_tokens: t.cacheWriteTokens,
  cache_read_input_tokens: t.cacheReadTokens,
})
