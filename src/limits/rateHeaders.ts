import { estimate, type WindowState } from "./Store.js"

/** The seed's response headers for one rate limit (limits-and-budgets.md "Response headers"). */
export interface RateHeaders {
  readonly "ratelimit-limit": string
  readonly "ratelimit-remaining": string
  readonly "ratelimit-reset": string
}

const remainingOf = (w: WindowState): number => Math.max(0, Math.floor(w.limit - estimate(w)))

/**
 * The headers of the limit with the smallest part left (remaining ÷ limit),
 * computed after this request was counted. Undefined when the tenant has no
 * rate limit.
 */
export const rateHeaders = (
  requests: WindowState | undefined,
  tokens: WindowState | undefined,
): RateHeaders | undefined => {
  let chosen: WindowState | undefined
  for (const w of [requests, tokens]) {
    if (w === undefined) continue
    if (chosen === undefined || remainingOf(w) / w.limit < remainingOf(chosen) / chosen.limit) chosen = w
  }
  if (chosen === undefined) return undefined
  return {
    "ratelimit-limit": String(chosen.limit),
    "ratelimit-remaining": String(remainingOf(chosen)),
    "ratelimit-reset": String(Math.max(1, Math.ceil((1 - chosen.elapsed) * 60))),
  }
}

/**
 * Milliseconds until the sliding window would admit `cost` more, assuming no
 * other traffic: the previous minute's weight fades through the current
 * minute; if that is not enough, the current minute becomes the previous one.
 */
export const retryAfterMs = (w: WindowState, cost: number): number => {
  const leftInMinute = (1 - w.elapsed) * 60_000
  if (w.current + cost <= w.limit && w.previous > 0) {
    const fraction = 1 - w.elapsed - (w.limit - w.current - cost) / w.previous
    if (fraction * 60_000 < leftInMinute) return Math.max(0, fraction) * 60_000
  }
  const nextFraction = w.current > 0 ? Math.max(0, 1 - (w.limit - cost) / w.current) : 0
  return leftInMinute + nextFraction * 60_000
}

/** `retryAfterMs` in whole seconds, at least 1 (the `retry-after` header). */
export const retryAfterSeconds = (w: WindowState, cost: number): number =>
  Math.max(1, Math.ceil(retryAfterMs(w, cost) / 1000))
