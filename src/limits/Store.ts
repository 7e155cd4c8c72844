import { Context, Data, type Effect } from "effect"
import type { BudgetName } from "../domain/errors.js"
import type { PeriodName } from "./periods.js"

/**
 * The limit store: rate-limit counters and budget spend/reservations of
 * every tenant (limits-and-budgets.md). Two implementations share this
 * interface and one conformance suite: `layerMemory` (one process; restores
 * spend from the usage file at start) and `layerRedis` (many copies; one Lua
 * script per operation, one round trip, keys hash-tagged `{tenant}`).
 *
 * Time is the caller's: every request carries `now` (epoch ms from the
 * calling copy's `Clock`), so each copy uses its own clock, as the document
 * says, and `TestClock` drives the window math in tests.
 *
 * Money is integer micro-USD; token counts are integers.
 */

/** A budget to enforce. `hard`: refuse what would pass the limit; soft: admit and report. */
export interface BudgetCheck {
  /** micro-USD. */
  readonly limit: number
  readonly hard: boolean
}

/**
 * One periodic budget's spend: the tenant's (`key` undefined) or one key's,
 * over one UTC period. Each (scope, period) has its own spend and open
 * reservations; the request's list names the periods of its admission, so
 * settle and extend touch the same ones (a request across midnight settles
 * in the day it reserved in).
 */
export interface PeriodBudget {
  readonly name: PeriodName
  /** The key id of a key's budget; undefined: the tenant's. */
  readonly key: string | undefined
  /** The period id: `YYYY-MM-DD`, `YYYY-Www` or `YYYY-MM`. */
  readonly period: string
  /** Epoch ms the period ends: its spend is kept (Redis: expires) a margin after it. */
  readonly until: number
  /** Undefined: spend tracked, nothing enforced (the tenant's month without a budget). */
  readonly check: BudgetCheck | undefined
}

/** The name errors and records give a periodic budget: `day` (the tenant's), `key.day` (a key's), … */
export const budgetNameOf = (budget: Pick<PeriodBudget, "name" | "key">): BudgetName =>
  budget.key === undefined ? budget.name : `key.${budget.name}`

export interface AdmitRequest {
  readonly tenant: string
  /** Epoch ms from the caller's clock. */
  readonly now: number
  /** Undefined: no such limit. */
  readonly requestsPerMinute: number | undefined
  readonly tokensPerMinute: number | undefined
  /** Tokens this request is counted as before its response (input estimate + reserved output); 0 counts nothing. */
  readonly tokenCost: number
  /** micro-USD reserved against every budget of `budgets` and the session (when given). 0 for count_tokens. */
  readonly reserve: number
  /**
   * The periodic budgets that apply, checked in this order (narrowest first:
   * key day, week, month, then the tenant's day, week, month); the first
   * hard one without room refuses. The tenant's month is always in the list
   * (spend is tracked for every tenant, budget or not).
   */
  readonly budgets: ReadonlyArray<PeriodBudget>
  /** The request's session (explicit or derived), with the tenant's session budget if any; checked last. */
  readonly session: { readonly id: string; readonly budget: BudgetCheck | undefined } | undefined
  /**
   * Most live sessions the tenant keeps (`sessions.max_per_tenant`, ≥ 1). An
   * admission that starts a new session when the tenant already has this many
   * evicts the least recently used ones first (oldest last request; among equal
   * times, the smallest id), atomically with the admission. A refusal evicts
   * nothing; a request in a live session never evicts.
   */
  readonly maxSessions: number
}

/** A sliding-window counter as read at `now` (after this request was counted, when admitted). */
export interface WindowState {
  readonly limit: number
  /** Count in the current calendar minute. */
  readonly current: number
  /** Count in the previous calendar minute. */
  readonly previous: number
  /** Fraction of the current minute that has elapsed, 0 ≤ f < 1. */
  readonly elapsed: number
}

export interface Admitted {
  readonly _tag: "Admitted"
  /** Minute index (floor(now / 60 s)) whose counters this request incremented; settle adjusts the same minute. */
  readonly minute: number
  /** UTC month (`YYYY-MM`) of the admission (the tenant's month budget it reserved against). */
  readonly month: string
  readonly requests: WindowState | undefined
  readonly tokens: WindowState | undefined
  /** Soft budgets whose spend plus open reservations now passes their limit, in the order of the request. */
  readonly softExceeded: ReadonlyArray<BudgetName>
  /** Live sessions of the tenant this admission evicted to stay within `maxSessions` (0 normally). */
  readonly sessionsEvicted: number
  /** The tenant's settled spend of the month before this request (micro-USD, reservations left out). */
  readonly monthSpend: number
  /**
   * Set when a Redis lease admitted a request with a session but no session
   * budget (ADR 0065): the session was not written, and this much of the
   * request's reservation (micro-USD) is not in the session's. Settle writes
   * the session (`SettleRequest.sessionAtSettle`).
   */
  readonly sessionAtSettle?: number
  /**
   * Set when a Redis lease admitted the request (ADR 0063): far from every
   * limit, so its settlement may be sent a moment later (ADR 0066).
   */
  readonly leased?: boolean
}

/** `budget`: a hard budget had no room (`Refused.budget` names it). */
export type RefusalReason = "requests" | "tokens" | "tokens_too_large" | "budget"

export interface Refused {
  readonly _tag: "Refused"
  readonly reason: RefusalReason
  /** With reason `budget`: the first hard budget without room (narrowest first, the session last). */
  readonly budget: BudgetName | undefined
  readonly requests: WindowState | undefined
  readonly tokens: WindowState | undefined
  /** The tenant's settled spend of the month (micro-USD, reservations left out); undefined when refused before it was read. */
  readonly monthSpend: number | undefined
}

export interface SettleRequest {
  readonly tenant: string
  readonly now: number
  /** From `Admitted`. */
  readonly minute: number
  /** The admission's `budgets` (their checks are not used). */
  readonly budgets: ReadonlyArray<PeriodBudget>
  readonly sessionId: string | undefined
  /** Everything this request reserved (admission plus extensions), micro-USD. */
  readonly reserved: number
  /** The real cost, micro-USD. */
  readonly cost: number
  /** Reported tokens minus `tokenCost` at admission (may be negative). */
  readonly tokenDelta: number
  /**
   * When the admission left the session to settle (`Admitted.sessionAtSettle`):
   * the part of `reserved` that is not in the session's reservation, and the
   * most live sessions of the tenant. The session gets the request's cost and
   * last use, and is started (evicting as an admission would) when it is gone.
   */
  readonly sessionAtSettle?: { readonly unreserved: number; readonly maxSessions: number } | undefined
  /**
   * A lease admitted it (`Admitted.leased`): a store may send the settlement
   * a moment later, merged with others (ADR 0066), and answer at once; the
   * sessions it then evicts are told to `evicted`.
   */
  readonly leased?: boolean | undefined
  readonly evicted?: ((tenant: string, count: number) => void) | undefined
}

export interface ExtendRequest {
  readonly tenant: string
  readonly now: number
  /** The admission's `budgets`, checked in their order as at admission. */
  readonly budgets: ReadonlyArray<PeriodBudget>
  readonly session: { readonly id: string; readonly budget: BudgetCheck | undefined } | undefined
  /** micro-USD to add to the request's reservation. */
  readonly amount: number
}

export interface SessionState {
  readonly id: string
  readonly spend: number
  readonly reserved: number
  /** Epoch ms of the session's last request. */
  readonly lastMs: number
}

/** The spend of one (scope, period) as the store holds it, micro-USD. */
export interface SpendState {
  readonly spend: number
  readonly reserved: number
}

export interface TenantState {
  readonly month: string
  readonly monthSpend: number
  readonly monthReserved: number
  /** The spend of each budget asked for (`tenantState`'s `budgets`), in that order. */
  readonly budgets: ReadonlyArray<SpendState>
  /** Sessions whose last request was less than 24 h ago. */
  readonly sessions: ReadonlyArray<SessionState>
  readonly requests: { readonly current: number; readonly previous: number }
  readonly tokens: { readonly current: number; readonly previous: number }
}

/** The store could not be reached or failed; callers apply ADR 0006. */
export class StoreError extends Data.TaggedError("StoreError")<{ readonly message: string }> {}

/** How long session spend lives after the session's last request, ms. */
export const SESSION_TTL_MS = 24 * 60 * 60 * 1000
export const MINUTE_MS = 60_000

/**
 * How long a period's spend is kept after the period ends, ms: a request
 * admitted in it settles there (a stream across midnight), and the memory
 * store drops it after this; Redis hashes of days and weeks expire then.
 */
export const SPEND_KEPT_MS = 2 * 24 * 60 * MINUTE_MS

/** Who made a Responses API response: the tenant that asked and the provider that answered. */
export interface ResponseOwner {
  readonly tenant: string
  readonly provider: string
}

/** Whose session target a sticky route looks up (ADR 0073): the tenant's session on one route. */
export interface SessionTargetKey {
  readonly tenant: string
  readonly route: string
  readonly session: string
}

/**
 * How a session target is named in the store: its provider and model (ADR
 * 0073: a provider entry pins the key, region and account whose cache it
 * is). Names have no line breaks, so the two never run together.
 */
export const sessionTargetId = (provider: string, model: string): string => `${provider}\n${model}`

/** How a session target is named in records and traces: `provider/model`. */
export const sessionTargetLabel = (id: string): string => id.replace("\n", "/")

/** How long a response's owner is remembered, ms: OpenAI keeps a stored response 30 days. */
export const RESPONSE_OWNER_TTL_MS = 30 * 24 * 60 * 60 * 1000

export interface StoreService {
  /** Checks every rate limit and budget of one request and, only if all admit it, counts it — atomically. */
  readonly admit: (request: AdmitRequest) => Effect.Effect<Admitted | Refused, StoreError>
  /**
   * Replaces the request's reservation with its real cost and its token
   * estimate with the reported tokens. Answers the sessions evicted to start
   * the request's session (only with `sessionAtSettle`; else 0).
   */
  readonly settle: (request: SettleRequest) => Effect.Effect<number, StoreError>
  /**
   * Adds to an open request's reservation if every hard budget allows it (the
   * stream cutoff): undefined when added, else the budget that refused
   * (nothing changed).
   */
  readonly extend: (request: ExtendRequest) => Effect.Effect<BudgetName | undefined, StoreError>
  /** Remembers who made response `id` (Responses `previous_response_id`) for RESPONSE_OWNER_TTL_MS from `now`. */
  readonly rememberResponse: (
    id: string,
    owner: ResponseOwner,
    now: number,
  ) => Effect.Effect<void, StoreError>
  /** Who made response `id`, if it is remembered at `now`. */
  readonly responseOwner: (id: string, now: number) => Effect.Effect<ResponseOwner | undefined, StoreError>
  /**
   * The target that served the last request of `session` on `route` (a
   * sticky route, ADR 0073), if it is remembered at `now` (its last use less
   * than SESSION_TTL_MS ago); a lookup that finds it counts as a use. A
   * copy may keep what it learns of at most `maxSessions` of a tenant's
   * sessions for a moment (the Redis store: ADR 0074).
   */
  readonly sessionTarget: (
    key: SessionTargetKey,
    now: number,
    maxSessions: number,
  ) => Effect.Effect<string | undefined, StoreError>
  /**
   * Remembers `target` as the one that served `session` on `route` at `now`.
   * A tenant keeps at most `maxSessions` of them; the least recently used
   * are forgotten first.
   */
  readonly rememberSessionTarget: (
    key: SessionTargetKey,
    target: string,
    now: number,
    maxSessions: number,
  ) => Effect.Effect<void, StoreError>
  /** What the admin API shows of a tenant at `now`, with the spend of each of `budgets` (default none). */
  readonly tenantState: (
    tenant: string,
    now: number,
    budgets?: ReadonlyArray<Pick<PeriodBudget, "name" | "key" | "period">>,
  ) => Effect.Effect<TenantState, StoreError>
}

export class Store extends Context.Service<Store, StoreService>()("tollgate/limits/Store") {}

export { monthOf } from "./periods.js"

/** The sliding-window estimate for the last 60 seconds (ADR 0004). */
export const estimate = (w: { current: number; previous: number; elapsed: number }): number =>
  w.previous * (1 - w.elapsed) + w.current
