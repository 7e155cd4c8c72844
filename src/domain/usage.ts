/**
 * The token usage of one upstream response, as the provider layer reports
 * it (`ProviderResponse.usage`). Counts are integers ≥ 0.
 */
export interface Usage {
  /** Uncached input tokens. */
  readonly inputTokens: number
  readonly outputTokens: number
  /** Input tokens read from the prompt cache. */
  readonly cacheReadTokens: number
  /** Input tokens written to the prompt cache. */
  readonly cacheWriteTokens: number
  /**
   * True when the provider reported no usage and the counts are Tollgate's
   * estimate: input from the request's text (ADR 0003), output from the
   * streamed text (≈ 4 bytes per token).
   */
  readonly estimated: boolean
}
