import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { makeRetryBudget, RETRY_BUDGET_FLOOR } from "../../src/reliability/RetryBudget.js"

/** A budget with `ratio`, reading time from the test clock. */
const budgetWith = (ratio: number) =>
  Effect.map(Clock.Clock, (clock) => makeRetryBudget(ratio, () => clock.currentTimeMillisUnsafe()))

const requests = (budget: { readonly recordRequest: () => void }, n: number) => {
  for (let i = 0; i < n; i++) budget.recordRequest()
}

/** Consumes until the budget refuses (at most `limit` tries); how many were granted. */
const drain = (budget: { readonly tryConsume: () => boolean }, limit = 10_000): number => {
  let granted = 0
  while (granted < limit && budget.tryConsume()) granted++
  return granted
}

describe("RetryBudget", () => {
  it.effect("permits the floor of 10 extra attempts with no traffic", () =>
    Effect.gen(function* () {
      assert.strictEqual(RETRY_BUDGET_FLOOR, 10)
      const budget = yield* budgetWith(0.1)
      assert.strictEqual(budget.remaining(), 10)
      assert.strictEqual(drain(budget), 10)
      assert.strictEqual(budget.remaining(), 0)
      assert.isFalse(budget.tryConsume())
    }),
  )

  it.effect("with ratio 0 permits exactly 10 extra attempts whatever the traffic", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0)
      requests(budget, 1_000)
      assert.strictEqual(budget.remaining(), 10)
      assert.strictEqual(drain(budget), 10)
    }),
  )

  it.effect("with ratio 0.1 and 100 requests in the minute permits 20 extra attempts", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0.1)
      yield* TestClock.adjust(5_000)
      requests(budget, 50)
      yield* TestClock.adjust(20_000)
      requests(budget, 50)
      assert.strictEqual(budget.remaining(), 20)
      assert.strictEqual(drain(budget), 20)
      assert.isFalse(budget.tryConsume())
    }),
  )

  it.effect("recordRequest counts: each request adds ratio of an attempt, whole attempts only", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0.1)
      requests(budget, 9)
      assert.strictEqual(budget.remaining(), 10)
      budget.recordRequest()
      assert.strictEqual(budget.remaining(), 11)
      requests(budget, 95)
      // 10 + 0.1 × 105 = 20.5: 20 whole attempts.
      assert.strictEqual(budget.remaining(), 20)
      assert.strictEqual(drain(budget), 20)
      // More traffic in the same minute permits more.
      requests(budget, 5)
      assert.strictEqual(budget.remaining(), 1)
      assert.isTrue(budget.tryConsume())
      assert.isFalse(budget.tryConsume())
    }),
  )

  it.effect("ratio × requests that is whole in decimal permits that many, without float loss", () =>
    Effect.gen(function* () {
      // 0.57 × 200 is 113.99999999999999 in floating point; the seed's arithmetic gives 114.
      const budget = yield* budgetWith(0.57)
      requests(budget, 200)
      assert.strictEqual(budget.remaining(), 124)
      assert.strictEqual(drain(budget), 124)
      const other = yield* budgetWith(1.13)
      requests(other, 100)
      assert.strictEqual(drain(other), 123)
    }),
  )

  it.effect("consumed attempts expire with the window", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0.1)
      assert.strictEqual(drain(budget), 10)
      yield* TestClock.adjust(59_999)
      assert.strictEqual(budget.remaining(), 0)
      assert.isFalse(budget.tryConsume())
      yield* TestClock.adjust(1)
      assert.strictEqual(budget.remaining(), 10)
      assert.strictEqual(drain(budget), 10)
    }),
  )

  it.effect("requests expire with the window too", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0.1)
      requests(budget, 100)
      assert.strictEqual(budget.remaining(), 20)
      yield* TestClock.adjust(60_000)
      assert.strictEqual(budget.remaining(), 10)
    }),
  )

  it.effect("attempts consumed after the requests expired keep the budget spent until they expire", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0.1)
      requests(budget, 100)
      yield* TestClock.adjust(30_000)
      assert.strictEqual(drain(budget), 20)
      // At 60 s the requests are gone but the 20 attempts (consumed at 30 s) still count: 10 − 20 < 0.
      yield* TestClock.adjust(30_000)
      assert.strictEqual(budget.remaining(), 0)
      assert.isFalse(budget.tryConsume())
      // At 90 s the attempts expire too.
      yield* TestClock.adjust(30_000)
      assert.strictEqual(budget.remaining(), 10)
    }),
  )

  it.effect("a refused attempt consumes nothing", () =>
    Effect.gen(function* () {
      const budget = yield* budgetWith(0.1)
      assert.strictEqual(drain(budget), 10)
      for (let i = 0; i < 100; i++) assert.isFalse(budget.tryConsume())
      requests(budget, 10)
      assert.strictEqual(budget.remaining(), 1)
      assert.isTrue(budget.tryConsume())
    }),
  )
})
