/**
 * What one request asks of the limits, and the rules that need no store:
 * which budgets apply (narrowest first), which are hard, and how a store's
 * refusal becomes the client's 429 or 402.
 */
import type { BudgetConfig, KeyBudgets, TenantConfig } from "../config/model.js"
import { BudgetExceeded, RateLimited, type BudgetName } from "../domain/errors.js"
import { periodOf, type PeriodName } from "./periods.js"
import { rateHeaders, retryAfterMs, retryAfterSeconds } from "./rateHeaders.js"
import type { BudgetCheck, PeriodBudget, Refused } from "./Store.js"

/** The key a request came with and its own budgets (a `Principal` is one). */
export interface AdmissionKey {
  readonly keyId: string
  readonly keyBudgets: KeyBudgets
}

/** What one request asks of the limits. */
export interface AdmissionInput {
  readonly tenant: TenantConfig
  /** Tokens counted against tokens_per_minute before the response (0: the request limit only). */
  readonly tokenCost: number
  /** micro-USD reserved against the budgets. */
  readonly reserve: number
  readonly sessionId: string | undefined
  /** The request's key: its budgets apply beside the tenant's. Undefined: the tenant's budgets alone. */
  readonly key?: AdmissionKey | undefined
  /**
   * With the tenant's `limits.queue`: the epoch ms until which a refusal for a rate window waits in the
   * tenant's queue instead of failing at once (ADR 0057). Undefined: no waiting.
   */
  readonly waitUntil?: number | undefined
}

export const check = (budget: BudgetConfig | undefined): BudgetCheck | undefined =>
  budget === undefined ? undefined : { limit: budget.limitMicroUsd, hard: budget.mode === "hard" }

/** A request that costs nothing and counts no tokens (count_tokens): only the request limit applies. */
export const requestLimitOnly = (input: AdmissionInput): boolean =>
  input.reserve === 0 && input.tokenCost === 0

export const isHard = (budget: BudgetConfig | undefined): boolean => budget?.mode === "hard"

/** Whether any budget of the tenant or of the request's key is hard (ADR 0006: 503 while the store is down). */
export const hasHardBudget = (input: AdmissionInput): boolean => {
  const { day, week, month, session } = input.tenant.budgets
  const key = input.key?.keyBudgets
  return (
    isHard(day) ||
    isHard(week) ||
    isHard(month) ||
    isHard(session) ||
    (key !== undefined && (isHard(key.day) || isHard(key.week) || isHard(key.month)))
  )
}

const periodic = (
  name: PeriodName,
  key: string | undefined,
  budget: BudgetCheck | undefined,
  t: number,
): PeriodBudget => {
  const period = periodOf(name, t)
  return { name, key, period: period.id, until: period.until, check: budget }
}

/**
 * The periodic budgets of a request at `t`, narrowest first (the order the
 * store checks them in): the key's day, week, month, then the tenant's day,
 * week, month. The tenant's month is always there (its spend is tracked for
 * every tenant); with `trackOnly` (count_tokens: no money) it is alone and
 * checks nothing.
 */
export const budgetsOf = (
  tenant: TenantConfig,
  key: AdmissionKey | undefined,
  t: number,
  trackOnly = false,
): Array<PeriodBudget> => {
  const own = trackOnly ? undefined : key?.keyBudgets
  // The usual case, one literal (a stream holds its budgets while it is open; `push` would size the array for 17).
  if (
    trackOnly ||
    (own === undefined && tenant.budgets.day === undefined && tenant.budgets.week === undefined)
  )
    return [periodic("month", undefined, trackOnly ? undefined : check(tenant.budgets.month), t)]
  const list: Array<PeriodBudget> = []
  if (own !== undefined) {
    if (own.day !== undefined) list.push(periodic("day", key!.keyId, check(own.day), t))
    if (own.week !== undefined) list.push(periodic("week", key!.keyId, check(own.week), t))
    if (own.month !== undefined) list.push(periodic("month", key!.keyId, check(own.month), t))
  }
  if (tenant.budgets.day !== undefined) list.push(periodic("day", undefined, check(tenant.budgets.day), t))
  if (tenant.budgets.week !== undefined) list.push(periodic("week", undefined, check(tenant.budgets.week), t))
  list.push(periodic("month", undefined, check(tenant.budgets.month), t))
  return list
}

/** The 402 message of each budget. */
const budgetMessage = (budget: BudgetName): string =>
  budget === "session"
    ? "the session's budget has no money left for this request"
    : budget.startsWith("key.")
      ? `the key's ${budget.slice(4)} budget has no money left for this request`
      : `the tenant's ${budget} budget has no money left for this request`

export const refusal = (refused: Refused, input: AdmissionInput): RateLimited | BudgetExceeded => {
  const headers = rateHeaders(refused.requests, refused.tokens)
  const rateHeadersField = headers === undefined ? {} : { rateHeaders: { ...headers } }
  switch (refused.reason) {
    case "requests":
      return new RateLimited({
        message: "requests_per_minute exceeded for this tenant",
        retryAfterSeconds: retryAfterSeconds(refused.requests!, 1),
        retryAfterMs: retryAfterMs(refused.requests!, 1),
        ...rateHeadersField,
      })
    case "tokens":
      return new RateLimited({
        message: "tokens_per_minute exceeded for this tenant",
        retryAfterSeconds: retryAfterSeconds(refused.tokens!, input.tokenCost),
        retryAfterMs: retryAfterMs(refused.tokens!, input.tokenCost),
        ...rateHeadersField,
      })
    case "tokens_too_large":
      return new RateLimited({
        message:
          `this request is estimated at ${input.tokenCost} tokens (input plus reserved output), more than the ` +
          `tenant's tokens_per_minute of ${input.tenant.limits.tokensPerMinute}; it can never be admitted — ` +
          "make the request smaller (fewer input tokens or a lower max_tokens)",
        retryAfterSeconds: 60,
        ...rateHeadersField,
      })
    case "budget": {
      const budget = refused.budget ?? "month"
      return new BudgetExceeded({ message: budgetMessage(budget), budget, ...rateHeadersField })
    }
  }
}
