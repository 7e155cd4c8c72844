import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { M, open, P, setup } from "./breakerHarness.js"

describe("Breakers: opening", () => {
  it.effect("19 failures do not open it: fewer than min_requests attempts", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(19, "failure")
      const v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 19)
      assert.strictEqual(v.failureRatio, 1)
      assert.isFalse(t.permit().probe)
    }),
  )

  it.effect("20 attempts with 10 failures open it", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(10, "success")
      t.attempts(9, "failure")
      assert.strictEqual(t.view().state, "closed")
      t.attempts(1, "failure")
      assert.strictEqual(t.view().state, "open")
      const b = t.blocked()
      assert.strictEqual(b.reason, "breaker_open")
    }),
  )

  it.effect("20 attempts with 9 failures do not open it", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(9, "failure")
      t.attempts(11, "success")
      const v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 20)
      assert.strictEqual(v.failureRatio, 0.45)
      assert.isFalse(t.permit().probe)
    }),
  )

  it.effect("a success that brings the attempts to min_requests opens it when the ratio is reached", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(19, "failure")
      t.attempts(1, "success")
      assert.strictEqual(t.view().state, "open")
    }),
  )

  it.effect("neutral outcomes are not counted", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(100, "neutral")
      t.attempts(19, "failure")
      t.attempts(100, "neutral")
      const v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 19)
      t.attempts(1, "failure")
      assert.strictEqual(t.view().state, "open")
    }),
  )

  it.effect("opens at exactly failure_ratio for any configured ratio (no float loss)", () =>
    Effect.gen(function* () {
      // 0.28 × 25 is 7.000000000000001 in floating point; 7 failures of 25 are exactly 0.28.
      const t = yield* setup({ minRequests: 25, failureRatio: 0.28, openForMs: 30_000, shared: false })
      t.attempts(18, "success")
      t.attempts(7, "failure")
      assert.strictEqual(t.view().state, "open")
      const u = yield* setup({ minRequests: 25, failureRatio: 0.28, openForMs: 30_000, shared: false })
      u.attempts(19, "success")
      u.attempts(6, "failure")
      assert.strictEqual(u.view().state, "closed")
    }),
  )

  it.effect("does not open on failures older than the window (60 s)", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      t.attempts(15, "failure")
      yield* TestClock.adjust(60_000)
      t.attempts(5, "failure")
      let v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 5)
      // The same 15 + 5 within the window do open it.
      const u = yield* setup()
      yield* TestClock.adjust(1_000)
      u.attempts(15, "failure")
      yield* TestClock.adjust(49_000)
      u.attempts(5, "failure")
      v = u.view()
      assert.strictEqual(v.state, "open")
    }),
  )

  it.effect("keeps one breaker per provider and model", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      open(t)
      assert.strictEqual(t.blocked().reason, "breaker_open")
      assert.isFalse(t.permit(P, "claude-haiku").probe)
      assert.isFalse(t.permit("vertex", M).probe)
      assert.strictEqual(t.view(P, "claude-haiku").state, "closed")
    }),
  )
})

describe("Breakers: open and half-open", () => {
  it.effect("stays open for open_for (30 s), Blocked with until = open time + 30 s", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      yield* TestClock.adjust(12_345)
      const openedAt = open(t)
      const until = openedAt + 30_000
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until, reason: "breaker_open" })
      assert.strictEqual(t.view().testableAt, until)
      yield* TestClock.adjust(29_999)
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until, reason: "breaker_open" })
      assert.strictEqual(t.view().state, "open")
      yield* TestClock.adjust(1)
      assert.strictEqual(t.view().state, "half_open")
      assert.isTrue(t.permit().probe)
    }),
  )

  it.effect("then permits exactly one test; others are Blocked with breaker_testing", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      open(t)
      yield* TestClock.adjust(30_000)
      const probe = t.permit()
      assert.isTrue(probe.probe)
      for (let i = 0; i < 5; i++) {
        const b = t.blocked()
        assert.strictEqual(b.reason, "breaker_testing")
        assert.isTrue(b.until > t.now())
      }
      assert.strictEqual(t.view().state, "half_open")
    }),
  )

  it.effect("a successful test closes it and clears the window", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      open(t)
      yield* TestClock.adjust(30_000)
      t.breakers.record(t.permit(), "success")
      const v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 0)
      assert.strictEqual(v.failureRatio, 0)
      assert.strictEqual(v.testableAt, 0)
      // The 20 failures from before are forgotten: 19 new ones do not reopen it, the 20th does.
      t.attempts(19, "failure")
      assert.strictEqual(t.view().state, "closed")
      t.attempts(1, "failure")
      assert.strictEqual(t.view().state, "open")
    }),
  )

  it.effect("a failed test opens it again for another 30 s", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      open(t)
      yield* TestClock.adjust(30_000)
      const probe = t.permit()
      yield* TestClock.adjust(4_000)
      t.breakers.record(probe, "failure")
      const until = t.now() + 30_000
      assert.strictEqual(t.view().state, "open")
      assert.deepStrictEqual(t.blocked(), { _tag: "Blocked", until, reason: "breaker_open" })
      yield* TestClock.adjust(29_999)
      assert.strictEqual(t.blocked().reason, "breaker_open")
      yield* TestClock.adjust(1)
      assert.isTrue(t.permit().probe)
    }),
  )

  it.effect("a neutral test result permits another test", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      open(t)
      yield* TestClock.adjust(30_000)
      t.breakers.record(t.permit(), "neutral")
      assert.strictEqual(t.view().state, "half_open")
      const second = t.permit()
      assert.isTrue(second.probe)
      assert.strictEqual(t.blocked().reason, "breaker_testing")
      t.breakers.record(second, "success")
      assert.strictEqual(t.view().state, "closed")
    }),
  )
})

describe("Breakers: stale results", () => {
  it.effect("a result from an attempt permitted before the breaker opened changes nothing", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const early = t.permit()
      const openedAt = open(t)
      t.breakers.record(early, "success")
      t.breakers.record(early, "failure")
      assert.deepStrictEqual(t.blocked(), {
        _tag: "Blocked",
        until: openedAt + 30_000,
        reason: "breaker_open",
      })
    }),
  )

  it.effect("a stale success while half-open neither closes it nor frees the test slot", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const early = t.permit()
      open(t)
      yield* TestClock.adjust(30_000)
      const probe = t.permit()
      t.breakers.record(early, "success")
      assert.strictEqual(t.view().state, "half_open")
      assert.strictEqual(t.blocked().reason, "breaker_testing")
      t.breakers.record(early, "neutral")
      assert.strictEqual(t.blocked().reason, "breaker_testing")
      // The real test still decides.
      t.breakers.record(probe, "failure")
      assert.strictEqual(t.view().state, "open")
    }),
  )

  it.effect("a stale failure after re-closing is not counted", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      const early = t.permit()
      open(t)
      yield* TestClock.adjust(30_000)
      t.breakers.record(t.permit(), "success")
      assert.strictEqual(t.view().state, "closed")
      t.breakers.record(early, "failure")
      assert.strictEqual(t.view().attempts, 0)
      t.attempts(19, "failure")
      t.breakers.record(early, "failure")
      const v = t.view()
      assert.strictEqual(v.state, "closed")
      assert.strictEqual(v.attempts, 19)
    }),
  )

  it.effect("a probe's result after a later test already decided changes nothing", () =>
    Effect.gen(function* () {
      const t = yield* setup()
      open(t)
      yield* TestClock.adjust(30_000)
      const probe = t.permit()
      t.breakers.record(probe, "success")
      assert.strictEqual(t.view().state, "closed")
      // Reported again (e.g. the stream failed later): the closed breaker's new generation ignores it.
      t.breakers.record(probe, "failure")
      assert.strictEqual(t.view().state, "closed")
      assert.strictEqual(t.view().attempts, 0)
    }),
  )
})
