/**
 * What `/admin/tenants` shows of one tenant: its configured limits and
 * budgets, the store's live state (month spend, open sessions, rate-limit
 * windows) and the live overspend bound of its open requests.
 */
import type { BudgetConfig, TenantConfig } from "../config/model.js"
import { estimate, MINUTE_MS, SESSION_TTL_MS, type TenantState } from "../limits/Store.js"
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
 * fields are then null and `store_error` says why.
 */
export const tenantView = (
  tenant: TenantConfig,
  state: TenantState | string,
  bound: OverspendBound,
  now: number,
) => ({
  name: tenant.name,
  keys: tenant.keys.map((k) => k.id),
  routes: tenant.routes,
  limits: {
    requests_per_minute: tenant.limits.requestsPerMinute ?? null,
    tokens_per_minute: tenant.limits.tokensPerMinute ?? null,
    concurrent_requests: tenant.limits.concurrentRequests ?? null,
  },
  budgets: { month: budget(tenant.budgets.month), session: budget(tenant.budgets.session) },
  ...(typeof state === "string"
    ? { month: null, sessions: null, rate_limits: null, store_error: state }
    : live(tenant, state, now)),
  overspend_bound: {
    open_requests: bound.open,
    micro_usd: bound.microUsd,
    unbounded_requests: bound.unbounded,
  },
})
