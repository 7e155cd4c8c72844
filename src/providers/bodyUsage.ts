/**
 * The usage of a response body read through `send`: each chunk is metered
 * as it is pulled (the SSE meter for event streams, a bounded copy for
 * JSON), and `result` says what the body reported, or an estimate.
 */
import type { Endpoint } from "../domain/endpoint.js"
import type { Usage } from "../domain/usage.js"
import { JsonCollector } from "../meter/json.js"
import { makeStreamMeter } from "../meter/stream.js"

/** Meters one body. Plain code: it runs per chunk. */
export interface BodyUsage {
  /** A chunk the reader pulled. */
  readonly push: (chunk: Uint8Array) => void
  /** The usage of what was pulled, once the body ended or stopped (call once). */
  readonly result: () => Usage
}

/** What the estimate of a body without usage starts from. */
export interface UsageBasis {
  /** The endpoint the request went to: how its body reads. */
  readonly endpoint: Endpoint
  /** Estimated input tokens of the request (ADR 0003). */
  readonly inputEstimate: number
  /** The request's `max_tokens`, which bounds the output estimate. */
  readonly maxTokens: number | undefined
}

const ZERO: Usage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  estimated: false,
}

const NOTHING: BodyUsage = { push: () => {}, result: () => ZERO }

const estimate = (basis: UsageBasis, outputTokens: number): Usage => ({
  inputTokens: basis.inputEstimate,
  outputTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  estimated: true,
})

/** Output tokens of streamed text bytes (≈ 4 per token), never more than `max_tokens` allows. */
const streamedTokens = (bytes: number, maxTokens: number | undefined): number => {
  const tokens = Math.ceil(bytes / 4)
  return maxTokens === undefined ? tokens : Math.min(tokens, maxTokens)
}

const eventStream = (basis: UsageBasis): BodyUsage => {
  const meter = makeStreamMeter(basis.endpoint)
  return {
    push: (chunk) => meter.push(chunk),
    result: () => {
      meter.end()
      const streamed = streamedTokens(meter.outputChars, basis.maxTokens)
      const u = meter.usage
      if (!u.reported) return estimate(basis, streamed)
      // A stream cut short may be charged for what streamed past its last usage report (ADR 0029).
      return {
        inputTokens: u.inputTokens,
        outputTokens: meter.finished ? u.outputTokens : Math.max(u.outputTokens, streamed),
        cacheReadTokens: u.cacheReadTokens,
        cacheWriteTokens: u.cacheWriteTokens,
        estimated: false,
      }
    },
  }
}

const json = (basis: UsageBasis): BodyUsage => {
  const collector = new JsonCollector()
  return {
    push: (chunk) => collector.push(chunk),
    result: () => {
      const usage = collector.read(basis.endpoint).usage
      return usage === undefined ? estimate(basis, 0) : { ...usage, estimated: false }
    },
  }
}

/**
 * The meter for a response: nothing to count for an error status or a
 * count_tokens answer (nobody is charged for them), the SSE meter for an
 * event stream, else the JSON body's `usage`.
 */
export const makeBodyUsage = (
  basis: UsageBasis,
  status: number,
  contentType: string | undefined,
  countTokens: boolean,
): BodyUsage => {
  if (status < 200 || status >= 300 || countTokens) return NOTHING
  return contentType !== undefined && contentType.startsWith("text/event-stream")
    ? eventStream(basis)
    : json(basis)
}
