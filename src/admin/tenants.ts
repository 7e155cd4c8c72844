/**
 * What `/admin/tenants` shows of one tenant: its configured limits and
 * budgets, the store's live state (month spend, open sessions, rate-limit
 * windows) and the live overspend bound of its open requests.
 */
import type { BudgetConfig, KeyBudgets, TenantConfig } from "../config/model.js"
import { periodOf, type PeriodName } from "../limits/periods.js"
import {
  estimate,
  MINUTE_MS,
  SESSION_TTL_MS,
  type PeriodBudget,
  type SpendState,
  type TenantState,
} from "../limits/Store.js"
import type { OverspendBound } from "../ops/OpenRequests.js"

const iso = (ms: number): string => new Date(ms).toISOString()

const budget = (config: BudgetConfig | undefined) =>
  config === undefined
    ? null
    : {
        limit_micro_usd: config.limitMicroUsd,
        limit_usd: config.limitMicroUsd / 1_000_000,
        mode: config.mode,
      }

/** A key of the tenant as its view shows it: config keys, and runtime keys that are live. */
export interface ViewKey {
  readonly id: string
  readonly source: "config" | "runtime"
  readonly budgets: KeyBudgets
}

const PERIODS: ReadonlyArray<PeriodName> = ["day", "week", "month"]

/** The tenant's config keys as `ViewKey`s. */
export const configKeys = (tenant: TenantConfig): Array<ViewKey> =>
  tenant.keys.map((key) => ({ id: key.id, source: "config", budgets: key.budgets }))

/**
 * The periodic budgets whose spend the view shows at `now` (ask the store
 * for these): the tenant's day, week, month, then each key's, in that order.
 */
export const viewBudgets = (
  tenant: TenantConfig,
  keys: ReadonlyArray<ViewKey>,
  now: number,
): Array<Pick<PeriodBudget, "name" | "key" | "period">> => {
  const refs: Array<Pick<PeriodBudget, "name" | "key" | "period">> = []
  for (const name of PERIODS)
    if (tenant.budgets[name] !== undefined)
      refs.push({ name, key: undefined, period: periodOf(name, now).id })
  for (const key of keys)
    for (const name of PERIODS)
      if (key.budgets[name] !== undefined) refs.push({ name, key: key.id, period: periodOf(name, now).id })
  return refs
}

/** A periodic budget with its current period's spend (null spend fields: the store could not be read). */
const periodView = (config: BudgetConfig, period: string, spend: SpendState | undefined) => ({
  ...budget(config)!,
  period,
  spend_micro_usd: spend?.spend ?? null,
  reserved_micro_usd: spend?.reserved ?? null,
  remaining_micro_usd:
    spend === undefined ? null : Math.max(0, config.limitMicroUsd - spend.spend - spend.reserved),
})

/** The budgets of the tenant and of its keys, each with its spend (`state.budgets`, in `viewBudgets` order). */
const budgetsView = (
  tenant: TenantConfig,
  keys: ReadonlyArray<ViewKey>,
  state: TenantState | string,
  now: number,
) => {
  const spends = typeof state === "string" ? [] : state.budgets
  let next = 0
  const periodic = (config: BudgetConfig | undefined, name: PeriodName) =>
    config === undefined ? null : periodView(config, periodOf(name, now).id, spends[next++])
  const own = {
    day: periodic(tenant.budgets.day, "day"),
    week: periodic(tenant.budgets.week, "week"),
    month: periodic(tenant.budgets.month, "month"),
    session: budget(tenant.budgets.session),
  }
  const keyViews = keys.map((key) => ({
    id: key.id,
    source: key.source,
    budgets: {
      day: periodic(key.budgets.day, "day"),
      week: periodic(key.budgets.week, "week"),
      month: periodic(key.budgets.month, "month"),
    },
  }))
  return { own, keys: keyViews }
}

const window = (
  limit: number | undefined,
  counts: { current: number; previous: number },
  elapsed: number,
) => ({
  limit: limit ?? null,
  current: counts.current,
  previous: counts.previous,
  /** The sliding-window estimate for the last 60 s (ADR 0004), what admission compares with the limit. */
  estimate: estimate({ ...counts, elapsed }),
})

/** The store part of a tenant view; sessions newest first. */
const live = (tenant: TenantConfig, state: TenantState, now: number) => {
  const elapsed = (now % MINUTE_MS) / MINUTE_MS
  const month = tenant.budgets.month
  const sessions = [...state.sessions].sort((a, b) => b.lastMs - a.lastMs)
  return {
    month: {
      month: state.month,
      spend_micro_usd: state.monthSpend,
      reserved_micro_usd: state.monthReserved,
      remaining_micro_usd:
        month === undefined
          ? null
          : Math.max(0, month.limitMicroUsd - state.monthSpend - state.monthReserved),
    },
    sessions: sessions.map((s) => ({
      id: s.id,
      spend_micro_usd: s.spend,
      reserved_micro_usd: s.reserved,
      last_request_at: iso(s.lastMs),
      expires_at: iso(s.lastMs + SESSION_TTL_MS),
    })),
    rate_limits: {
      requests: window(tenant.limits.requestsPerMinute, state.requests, elapsed),
      tokens: window(tenant.limits.tokensPerMinute, state.tokens, elapsed),
    },
  }
}

/**
 * One tenant as the admin API shows it at `now` (epoch ms). `state` is the
 * store's error message when the store could not be read: the store's
 * fields are then null and `store_error` says why. `keys`: its keys with
 * their budgets (config keys by default); `state` holds their spend when it
 * was read for `viewBudgets(tenant, keys, now)`.
 */
export const tenantView = (
  tenant: TenantConfig,
  state: TenantState | string,
  bound: OverspendBound,
  now: number,
  keys: ReadonlyArray<ViewKey> = configKeys(tenant),
) => {
  const budgets = budgetsView(tenant, keys, state, now)
  return tenantViewOf(tenant, state, bound, now, budgets)
}

const tenantViewOf = (
  tenant: TenantConfig,
  state: TenantState | string,
  bound: OverspendBound,
  now: number,
  budgets: ReturnType<typeof budgetsView>,
) => ({
  name: tenant.name,
  keys: budgets.keys,
  routes: tenant.routes,
  limits: {
    requests_per_minute: tenant.limits.requestsPerMinute ?? null,
    tokens_per_minute: tenant.limits.tokensPerMinute ?? null,
    concurrent_requests: tenant.limits.concurrentRequests ?? null,
    queue:
      tenant.limits.queue === undefined
        ? null
        : { max_wait_ms: tenant.limits.queue.maxWaitMs, max_length: tenant.limits.queue.maxLength },
  },
  budgets: budgets.own,
  ...(typeof state === "string"
    ? { month: null, sessions: null, rate_limits: null, store_error: state }
    : live(tenant, state, now)),
  overspend_bound: {
    open_requests: bound.open,
    micro_usd: bound.microUsd,
    unbounded_requests: bound.unbounded,
  },
})
