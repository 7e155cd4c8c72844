/**
 * The rules both limit stores share, in TypeScript: the memory store runs
 * them directly, and the Lua scripts next to this file implement the same
 * arithmetic (the Redis store turns their integer replies into results with
 * these helpers). Keep the two in step: one conformance suite runs on both.
 */
import {
  MINUTE_MS,
  SESSION_TTL_MS,
  type RefusalReason,
  type SessionState,
  type WindowState,
} from "../Store.js"

/**
 * True when `cost` more fits under `limit` at `msIntoMinute` (0..59,999):
 * previous × (1 − elapsed) + current + cost ≤ limit, in integer arithmetic
 * (multiplied by 60,000) so both stores decide identically, with no rounding.
 */
export const fitsWindow = (
  limit: number,
  current: number,
  previous: number,
  msIntoMinute: number,
  cost: number,
): boolean => previous * (MINUTE_MS - msIntoMinute) + (current + cost) * MINUTE_MS <= limit * MINUTE_MS

/** A `WindowState` at `now` (epoch ms) from raw counters; undefined when there is no limit. */
export const windowAt = (
  limit: number | undefined,
  current: number,
  previous: number,
  now: number,
): WindowState | undefined =>
  limit === undefined ? undefined : { limit, current, previous, elapsed: (now % MINUTE_MS) / MINUTE_MS }

/** Sessions newest first (by last request), then by id: the order both stores return. */
export const sortSessions = (sessions: Array<SessionState>): Array<SessionState> =>
  sessions.sort((a, b) => b.lastMs - a.lastMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))

/** True while a session whose last request was at `lastMs` still counts at `now` (less than 24 h later). */
export const isSessionLive = (lastMs: number, now: number): boolean => now - lastMs < SESSION_TTL_MS

/** Refusal reasons by the code the admit script returns (0: admitted). */
export const REFUSAL_CODES: ReadonlyArray<RefusalReason | undefined> = [
  undefined,
  "requests",
  "tokens_too_large",
  "tokens",
  "budget",
]
