import type { TenantConfig } from "../../src/config/model.js"

/**
 * A decoded tenant for in-process tests: no keys, every route, no limits and
 * no budgets but those given.
 */
export const tenantConfig = (
  name: string,
  limits: Partial<TenantConfig["limits"]> = {},
  budgets: Partial<TenantConfig["budgets"]> = {},
): TenantConfig => ({
  name,
  keys: [],
  routes: "*",
  limits: {
    requestsPerMinute: undefined,
    tokensPerMinute: undefined,
    concurrentRequests: undefined,
    ...limits,
  },
  budgets: { day: undefined, week: undefined, month: undefined, session: undefined, ...budgets },
})
