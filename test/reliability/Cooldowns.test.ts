import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { M, P, R, setup } from "./breakerHarness.js"

describe("Breakers: cooldowns", () => {
  it.effect("a 429 cooldown blocks the target until it ends", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      yield* TestClock.adjust(1_000)
      const until = t.now() + 7_000
      t.breakers.cooldown(P, M, R, until)
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until, reason: "cooldown" })
      assert.strictEqual(t.view().cooldownUntil, until)
      assert.strictEqual(t.view().state, "closed")
      // Only this target.
      assert.isFalse(t.permit(P, "claude-haiku").probe)
      yield* TestClock.adjust(6_999)
      assert.strictEqual(t.blocked().reason, "cooldown")
      yield* TestClock.adjust(1)
      assert.isFalse(t.permit().probe)
      assert.strictEqual(t.view().cooldownUntil, 0)
    }),
  )

  it.effect("a later, longer cooldown extends it", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.breakers.cooldown(P, M, R, t.now() + 5_000)
      yield* TestClock.adjust(2_000)
      const until = t.now() + 20_000
      t.breakers.cooldown(P, M, R, until)
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until, reason: "cooldown" })
      yield* TestClock.adjust(10_000)
      assert.strictEqual(t.blocked().until, until)
    }),
  )

  it.effect("a shorter cooldown never shortens it", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const until = t.now() + 60_000
      t.breakers.cooldown(P, M, R, until)
      yield* TestClock.adjust(1_000)
      t.breakers.cooldown(P, M, R, t.now() + 1_000)
      t.breakers.cooldown(P, M, R, 0)
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until, reason: "cooldown" })
      yield* TestClock.adjust(5_000)
      assert.strictEqual(t.blocked().until, until)
    }),
  )

  it.effect("is capped at 10 minutes from now", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      yield* TestClock.adjust(3_000)
      const capped = t.now() + 600_000
      t.breakers.cooldown(P, M, R, t.now() + 3_600_000)
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until: capped, reason: "cooldown" })
      yield* TestClock.adjust(599_999)
      assert.strictEqual(t.blocked().reason, "cooldown")
      yield* TestClock.adjust(1)
      assert.isFalse(t.permit().probe)
    }),
  )

  it.effect("a cooldown does not count toward the breaker", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(19, "failure")
      t.breakers.cooldown(P, M, R, t.now() + 1_000)
      const v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 19)
    }),
  )
})
