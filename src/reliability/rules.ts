/**
 * The retry table of reliability.md, as data: what a response status (or an
 * in-band error before the first content) means for the attempt loop and for
 * the target's breaker.
 */
import type { Outcome } from "./Breakers.js"

/**
 * `serve`: relay it to the client. `return`: relay it unchanged (a client
 * error). `next`: try the next target. `retry_same`: retry this target once,
 * then the next one.
 */
export type Decision = "serve" | "return" | "next" | "retry_same"

export interface Rule {
  readonly decision: Decision
  /** What the result means for the breaker (2xx is recorded when the relay ends). */
  readonly outcome: Outcome
  /** A 429: skip the target until its retry-after ends. */
  readonly cooldown: boolean
}

const SERVE: Rule = { decision: "serve", outcome: "success", cooldown: false }
const RATE_LIMITED: Rule = { decision: "next", outcome: "neutral", cooldown: true }
const OVERLOADED: Rule = { decision: "next", outcome: "failure", cooldown: false }
const SERVER_ERROR: Rule = { decision: "retry_same", outcome: "failure", cooldown: false }
const CLIENT_ERROR: Rule = { decision: "return", outcome: "neutral", cooldown: false }

/** The rule for an upstream response status. */
export const ruleForStatus = (status: number): Rule => {
  if (status >= 200 && status < 300) return SERVE
  if (status === 429) return RATE_LIMITED
  if (status === 529) return OVERLOADED
  if (status >= 500) return SERVER_ERROR
  return CLIENT_ERROR
}

/**
 * The rule for an in-band error event that arrived before the first content
 * (ADR 0007): it stands for the status the provider would have sent.
 */
export const ruleForInbandError = (type: string): Rule => {
  if (type === "overloaded_error") return OVERLOADED
  if (type === "rate_limit_error" || type === "rate_limit_exceeded") return RATE_LIMITED
  return SERVER_ERROR
}

/** Longest cooldown a retry-after can set, ms. */
export const MAX_RETRY_AFTER_MS = 10 * 60_000

/**
 * A `retry-after` header as milliseconds from `now`: delta-seconds or an
 * HTTP date (RFC 9110 §10.2.3), capped at 10 minutes. Missing or invalid
 * gives undefined (no cooldown); a date in the past gives 0.
 */
export const parseRetryAfter = (value: string | string[] | undefined, now: number): number | undefined => {
  if (typeof value !== "string") return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, MAX_RETRY_AFTER_MS)
  if (!/^[A-Za-z]{3},? /.test(text) && !/^[A-Za-z]+day, /.test(text)) return undefined
  // The asctime form ("Sun Nov  6 08:49:37 1994") names no zone; it is GMT, not the local time.
  const at = Date.parse(/^[A-Za-z]{3} /.test(text) ? `${text} GMT` : text)
  if (Number.isNaN(at)) return undefined
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS)
}
