/**
 * Shorthands for the store conformance suite: one tenant per test (so a
 * shared Redis needs no flush), requests with every field defaulted, and
 * time from the test's `Clock`.
 */
import { assert, it } from "@effect/vitest"
import { Clock, Effect, type Layer } from "effect"
import { BUDGET_NAMES, type BudgetName } from "../../src/domain/errors.js"
import { periodOf, type PeriodName } from "../../src/limits/periods.js"
import {
  type AdmitRequest,
  type Admitted,
  type BudgetCheck,
  type PeriodBudget,
  type Refused,
  type SettleRequest,
  Store,
} from "../../src/limits/Store.js"

export const HOUR = 60 * 60 * 1000
let tenants = 0

/** A periodic budget at `now`: the tenant's (`key` undefined) or a key's, with its check. */
export const periodic = (
  name: PeriodName,
  key: string | undefined,
  check: BudgetCheck | undefined,
  now: number,
): PeriodBudget => {
  const period = periodOf(name, now)
  return { name, key, period: period.id, until: period.until, check }
}

/**
 * An admission request's fields, with `month` as a shorthand for a budget
 * list of the tenant's month alone (when `budgets` is not given).
 */
export type AdmitOver = Partial<AdmitRequest> & { readonly month?: BudgetCheck | undefined }

/** The tenant and shorthands of one test. */
export const fixture = (suite: string) => {
  const tenant = `${suite}-t${++tenants}`
  const admit = (over: AdmitOver = {}) =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = yield* Clock.currentTimeMillis
      const { month, ...rest } = over
      return yield* store.admit({
        tenant,
        now,
        requestsPerMinute: undefined,
        tokensPerMinute: undefined,
        tokenCost: 0,
        reserve: 0,
        budgets: [periodic("month", undefined, month, now)],
        session: undefined,
        maxSessions: 10_000,
        ...rest,
      })
    })
  /** Settles `admitted`; its budgets default to the tenant's month of the admission. */
  const settle = (admitted: Admitted, over: Partial<SettleRequest> = {}) =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = yield* Clock.currentTimeMillis
      yield* store.settle({
        tenant,
        now,
        minute: admitted.minute,
        budgets: [periodic("month", undefined, undefined, Date.parse(`${admitted.month}-01T00:00:00Z`))],
        sessionId: undefined,
        reserved: 0,
        cost: 0,
        tokenDelta: 0,
        ...over,
      })
    })
  const state = Effect.gen(function* () {
    const store = yield* Store
    return yield* store.tenantState(tenant, yield* Clock.currentTimeMillis)
  })
  return { tenant, admit, settle, state }
}

export const admitted = (result: Admitted | Refused): Admitted => {
  if (result._tag !== "Admitted") assert.fail(`expected Admitted, got Refused (${result.reason})`)
  return result
}

/** Asserts a refusal for `reason`, or by the budget `reason` names (reason `budget`). */
export const refusedWith = (result: Admitted | Refused, reason: Refused["reason"] | BudgetName): Refused => {
  if (result._tag !== "Refused") assert.fail(`expected Refused (${reason}), got Admitted`)
  if ((BUDGET_NAMES as ReadonlyArray<string>).includes(reason)) {
    assert.strictEqual(result.reason, "budget")
    assert.strictEqual(result.budget, reason)
  } else {
    assert.strictEqual(result.reason, reason)
    assert.strictEqual(result.budget, undefined)
  }
  return result
}

/** Admits until the first refusal (at most `max`); the number admitted. */
export const admitUntilRefused = (admit: Effect.Effect<Admitted | Refused, unknown, Store>, max: number) =>
  Effect.gen(function* () {
    for (let n = 0; n < max; n++) {
      if ((yield* admit)._tag === "Refused") return n
    }
    return max
  })

export const hard = (limit: number) => ({ limit, hard: true })
export const soft = (limit: number) => ({ limit, hard: false })

export type Fixture = ReturnType<typeof fixture>

/** Declares one test that runs `body` with a fresh fixture on a fresh store from `layer`. */
export const storeTest =
  (suite: string, layer: () => Layer.Layer<Store, unknown>) =>
  (title: string, body: (f: Fixture) => Effect.Effect<void, unknown, Store>) =>
    it.effect(title, () => Effect.provide(body(fixture(suite)), layer()))

export type StoreTest = ReturnType<typeof storeTest>
