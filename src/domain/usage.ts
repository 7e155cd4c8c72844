/** Token counts of one response. All integers ≥ 0. */
export interface TokenCounts {
  /** Uncached input tokens. */
  readonly inputTokens: number
  readonly outputTokens: number
  /** Input tokens read from the prompt cache. */
  readonly cacheReadTokens: number
  /** Input tokens written to the prompt cache. */
  readonly cacheWriteTokens: number
}

/**
 * The token usage of one upstream response, as the provider layer reports
 * it (`ProviderResponse.usage`).
 */
export interface Usage extends TokenCounts {
  /**
   * True when the provider reported no usage and the counts are Tollgate's
   * estimate: input from the request's text (ADR 0003), output from the
   * streamed text (≈ 4 bytes per token).
   */
  readonly estimated: boolean
}
