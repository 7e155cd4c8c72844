/** Shared setup for the breaker tests: a `makeBreakers` on the test clock and small helpers. */
import { assert } from "@effect/vitest"
import { Clock, Effect } from "effect"
import type { BreakerConfig } from "../../src/config/model.js"
import { makeBreakers, type Blocked, type Outcome, type Permit } from "../../src/reliability/Breakers.js"

/** The seed's defaults: 20 attempts, ratio 0.5, open for 30 s. */
export const defaults: BreakerConfig = {
  minRequests: 20,
  failureRatio: 0.5,
  openForMs: 30_000,
  shared: false,
}

/** The provider, model and region of the breaker under test. */
export const P = "anthropic"
export const M = "claude-sonnet"
export const R = ""
/** The tenant the helpers act for unless told otherwise. */
export const T = "acme"

/** `makeBreakers(config)` reading time from the test clock, with `tenants` tenants configured (default one). */
export const setup = (config: BreakerConfig = defaults, tenants = 1) =>
  Effect.map(Clock.Clock, (clock) => {
    const now = () => clock.currentTimeMillisUnsafe()
    const breakers = makeBreakers(config, now, tenants)
    const permit = (provider = P, model = M, tenant = T): Permit => {
      const result = breakers.acquire(provider, model, R, tenant)
      if (result._tag !== "Permit") throw new Error(`expected a permit, got ${JSON.stringify(result)}`)
      return result
    }
    const blocked = (provider = P, model = M, tenant = T): Blocked => {
      const result = breakers.acquire(provider, model, R, tenant)
      if (result._tag !== "Blocked") throw new Error(`expected blocked, got ${JSON.stringify(result)}`)
      return result
    }
    /** `n` attempts, each acquired and then recorded with `outcome`. */
    const attempts = (n: number, outcome: Outcome, provider = P, model = M, tenant = T) => {
      for (let i = 0; i < n; i++) breakers.record(permit(provider, model, tenant), outcome)
    }
    /** The shared breaker of provider + model (`tenant` null), or a tenant's own one (listed only when not closed). */
    const view = (provider = P, model = M, tenant: string | null = null) => {
      const found = breakers
        .view()
        .find((v) => v.provider === provider && v.model === model && v.tenant === tenant)
      if (found === undefined) throw new Error("no such breaker")
      return found
    }
    return { breakers, now, permit, blocked, attempts, view }
  })

/** A breaker set on the test clock, with helpers that acquire, record and inspect. */
export type Harness = Effect.Success<ReturnType<typeof setup>>

/** Opens the breaker with 20 failures at the current time; returns the open time. */
export const open = (t: Harness) => {
  t.attempts(20, "failure")
  assert.strictEqual(t.view().state, "open")
  return t.now()
}
