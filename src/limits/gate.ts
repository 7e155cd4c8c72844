import type { TenantConfig } from "../config/model.js"
import type { Endpoint } from "../domain/endpoint.js"
import { BudgetExceeded, RateLimited } from "../domain/errors.js"
import { monthOf } from "./Store.js"

/**
 * Admission before the body (issue #16, ADR 0049): what this copy can decide
 * about an authenticated request from its headers alone, without a store
 * call, so that a tenant that would be refused anyway cannot make Tollgate
 * read and hold its body.
 *
 * - `concurrent_requests`: the tenant's requests in flight on this copy,
 *   counted from the headers to the record.
 * - The request limit: after the store refused a request for the request
 *   limit, the tenant is refused here until the store's retry-after. The
 *   store's counts only grow within a minute (other copies add to them), so
 *   the store would refuse these too.
 * - A hard month budget: once the tenant's settled spend of the month has
 *   reached the limit (spend only grows within a month), every request that
 *   costs money is refused here until the month ends.
 *
 * Everything else (tokens, sessions, reservations) needs the body and the
 * store, and is decided by the admission as before.
 */
export interface Gate {
  /** Refuses the request, or counts it in flight (`leave` ends that). */
  readonly enter: (tenant: TenantConfig, endpoint: Endpoint) => RateLimited | BudgetExceeded | undefined
  readonly leave: (tenant: TenantConfig) => void
  /** The store refused a request of `tenant` for its request limit; it admits one more at `untilMs` (epoch ms). */
  readonly learnRequestLimit: (tenant: TenantConfig, refusal: RateLimited, untilMs: number) => void
  /** The tenant's settled spend of `month`, as the store last reported it (micro-USD). */
  readonly learnMonthSpend: (tenant: TenantConfig, month: string, spend: number) => void
  /** Requests in flight on this copy, for `tenant`. */
  readonly inFlight: (tenant: string) => number
}

interface TenantGate {
  inFlight: number
  /** Epoch ms until which the request limit is known to be spent. */
  requestsUntil: number
  requestsRefusal: RateLimited | undefined
  month: string
  monthSpend: number
}

export const makeGate = (now: () => number): Gate => {
  const tenants = new Map<string, TenantGate>()
  const of = (name: string): TenantGate => {
    let gate = tenants.get(name)
    if (gate === undefined) {
      gate = { inFlight: 0, requestsUntil: 0, requestsRefusal: undefined, month: "", monthSpend: 0 }
      tenants.set(name, gate)
    }
    return gate
  }

  const enter = (tenant: TenantConfig, endpoint: Endpoint): RateLimited | BudgetExceeded | undefined => {
    const gate = of(tenant.name)
    const t = now()
    if (gate.requestsRefusal !== undefined && t < gate.requestsUntil) {
      const refusal = gate.requestsRefusal
      return new RateLimited({
        message: refusal.message,
        retryAfterSeconds: Math.max(1, Math.ceil((gate.requestsUntil - t) / 1000)),
        ...(refusal.rateHeaders === undefined ? {} : { rateHeaders: refusal.rateHeaders }),
      })
    }
    const month = tenant.budgets.month
    // count_tokens costs nothing: no budget refuses it.
    if (
      month?.mode === "hard" &&
      endpoint !== "/v1/messages/count_tokens" &&
      gate.month === monthOf(t) &&
      gate.monthSpend >= month.limitMicroUsd
    ) {
      return new BudgetExceeded({
        message: "the tenant's month budget has no money left for this request",
        budget: "month",
      })
    }
    const cap = tenant.limits.concurrentRequests
    if (cap !== undefined && gate.inFlight >= cap) {
      return new RateLimited({
        message: `concurrent_requests exceeded for this tenant (${cap} in flight)`,
        retryAfterSeconds: 1,
      })
    }
    gate.inFlight++
    return undefined
  }

  return {
    enter,
    leave: (tenant) => {
      const gate = tenants.get(tenant.name)
      if (gate !== undefined && gate.inFlight > 0) gate.inFlight--
    },
    learnRequestLimit: (tenant, refusal, untilMs) => {
      const gate = of(tenant.name)
      gate.requestsUntil = untilMs
      gate.requestsRefusal = refusal
    },
    learnMonthSpend: (tenant, month, spend) => {
      const gate = of(tenant.name)
      // A later month replaces what is known; an answer about an earlier month changes nothing.
      if (month > gate.month) {
        gate.month = month
        gate.monthSpend = spend
      } else if (month === gate.month && spend > gate.monthSpend) gate.monthSpend = spend
    },
    inFlight: (tenant) => tenants.get(tenant)?.inFlight ?? 0,
  }
}
