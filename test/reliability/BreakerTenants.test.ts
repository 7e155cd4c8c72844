import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { AttemptHold } from "../../src/gateway/attempt.js"
import type { Deadlines } from "../../src/reliability/Deadlines.js"
import { defaults, M, P, R, setup, type Harness } from "./breakerHarness.js"

/**
 * ADR 0048: with several tenants configured the shared breaker of a target
 * opens only on failures from two distinct tenants in its window, and each
 * tenant has its own breaker of the target with the seed's rules.
 */

const A = "acme"
const B = "globex"
const C = "initech"

/** The tenants' own breakers in the view (only those not closed are listed). */
const tenantViews = (t: Harness) => t.breakers.view().filter((v) => v.tenant !== null)

describe("Breakers with several tenants: one tenant cannot open the shared breaker", () => {
  it.effect(
    "one tenant failing alone (20 failures) opens only its own breaker; another tenant still gets permits",
    () =>
      Effect.gen(function* () {
        const t = yield* setup(defaults, 2)
        yield* TestClock.adjust(5_000)
        t.attempts(19, "failure", P, M, A)
        assert.deepStrictEqual(tenantViews(t), [])
        t.attempts(1, "failure", P, M, A)
        const openedAt = t.now()
        const shared = t.view()
        assert.strictEqual(shared.state, "closed")
        assert.strictEqual(shared.attempts, 20)
        assert.strictEqual(shared.failureRatio, 1)
        const own = t.view(P, M, A)
        assert.deepInclude(own, { tenant: A, state: "open", attempts: 20, testableAt: openedAt + 30_000 })
        assert.deepStrictEqual(t.blocked(P, M, A), {
          _tag: "Blocked",
          until: openedAt + 30_000,
          reason: "breaker_open",
        })
        const other = t.permit(P, M, B)
        assert.isFalse(other.probe)
        assert.isFalse(other.own!.probe)
        // Still more of A's failures would be needed from somebody else: B's successes keep everything closed.
        t.attempts(30, "success", P, M, B)
        assert.strictEqual(t.view().state, "closed")
        assert.isFalse(t.permit(P, M, C).probe)
      }),
  )

  it.effect("failures from two tenants open the shared breaker for everyone", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 3)
      t.attempts(1, "failure", P, M, B)
      t.attempts(18, "failure", P, M, A)
      assert.strictEqual(t.view().state, "closed")
      t.attempts(1, "failure", P, M, A)
      assert.strictEqual(t.view().state, "open")
      // Neither tenant's own breaker reached min_requests; the shared one blocks all three.
      assert.deepStrictEqual(tenantViews(t), [])
      for (const tenant of [A, B, C]) assert.strictEqual(t.blocked(P, M, tenant).reason, "breaker_open")
    }),
  )

  it.effect("the distinct-tenant rule is checked only when the ratio rule already holds", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 3)
      // Two failing tenants, but 10 of 22 and then 11 of 23 are under 0.5.
      t.attempts(12, "success", P, M, C)
      t.attempts(5, "failure", P, M, A)
      t.attempts(5, "failure", P, M, B)
      assert.strictEqual(t.view().state, "closed")
      t.attempts(1, "failure", P, M, A)
      assert.strictEqual(t.view().state, "closed")
      // 12 of 24: open.
      t.attempts(1, "failure", P, M, A)
      assert.strictEqual(t.view().state, "open")
    }),
  )

  it.effect(
    "ratio and min_requests reached by one tenant's failures: the shared breaker waits for a second tenant failing at the ratio",
    () =>
      Effect.gen(function* () {
        const t = yield* setup(defaults, 2)
        t.attempts(10, "success", P, M, B)
        t.attempts(12, "failure", P, M, A)
        assert.strictEqual(t.view().state, "closed")
        assert.strictEqual(t.view().failureRatio, 12 / 22)
        // A chance failure of a tenant whose attempts mostly succeed (1 of 11) is not a second failing tenant.
        t.attempts(1, "failure", P, M, B)
        assert.strictEqual(t.view().state, "closed")
        // B failing at the ratio on its own attempts (10 of 20) is.
        t.attempts(8, "failure", P, M, B)
        assert.strictEqual(t.view().state, "closed")
        t.attempts(1, "failure", P, M, B)
        assert.strictEqual(t.view().state, "open")
      }),
  )

  it.effect("a tenant counts as failing only while its failure is in the window", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(1, "failure", P, M, B)
      yield* TestClock.adjust(60_000)
      t.attempts(20, "failure", P, M, A)
      assert.strictEqual(t.view().state, "closed")
      assert.strictEqual(t.view(P, M, A).state, "open")
      // The same within the window (49 s later) opens the shared one.
      const u = yield* setup(defaults, 2)
      yield* TestClock.adjust(1_000)
      u.attempts(1, "failure", P, M, B)
      yield* TestClock.adjust(49_000)
      u.attempts(19, "failure", P, M, A)
      assert.strictEqual(u.view().state, "open")
    }),
  )

  it.effect("each tenant's breaker follows min_requests and the ratio boundary on its own attempts", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(9, "failure", P, M, A)
      t.attempts(10, "success", P, M, A)
      assert.deepStrictEqual(tenantViews(t), [])
      t.attempts(1, "success", P, M, A)
      assert.deepStrictEqual(tenantViews(t), [])
      const u = yield* setup(defaults, 2)
      u.attempts(10, "success", P, M, A)
      u.attempts(9, "failure", P, M, A)
      assert.deepStrictEqual(tenantViews(u), [])
      u.attempts(1, "failure", P, M, A)
      assert.deepInclude(u.view(P, M, A), { state: "open", attempts: 20, failureRatio: 0.5 })
      // Only A failed: the shared breaker is still closed at the same ratio.
      assert.deepInclude(u.view(), { state: "closed", attempts: 20, failureRatio: 0.5 })
    }),
  )

  it.effect("a tenant's breakers are per provider and model", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(20, "failure", P, M, A)
      assert.strictEqual(t.blocked(P, M, A).reason, "breaker_open")
      assert.isFalse(t.permit(P, "claude-haiku", A).probe)
      assert.isFalse(t.permit("vertex", M, A).probe)
    }),
  )

  it.effect("a cooldown is checked first and shared by every tenant", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(20, "failure", P, M, A)
      t.breakers.cooldown(P, M, R, t.now() + 5_000)
      assert.strictEqual(t.blocked(P, M, A).reason, "cooldown")
      assert.strictEqual(t.blocked(P, M, B).reason, "cooldown")
    }),
  )
})

describe("Breakers with one tenant: the shared breaker as before", () => {
  it.effect(
    "one tenant's failures open the shared breaker (min_requests, ratio boundary); no tenant breakers",
    () =>
      Effect.gen(function* () {
        const t = yield* setup(defaults, 1)
        t.attempts(19, "failure", P, M, A)
        assert.strictEqual(t.view().state, "closed")
        assert.isUndefined(t.permit(P, M, A).own)
        t.attempts(1, "failure", P, M, A)
        assert.strictEqual(t.view().state, "open")
        assert.deepStrictEqual(tenantViews(t), [])
        assert.strictEqual(t.blocked(P, M, A).reason, "breaker_open")

        const u = yield* setup(defaults, 1)
        u.attempts(9, "failure", P, M, A)
        u.attempts(11, "success", P, M, A)
        assert.strictEqual(u.view().state, "closed")
        const v = yield* setup(defaults, 1)
        v.attempts(10, "success", P, M, A)
        v.attempts(10, "failure", P, M, A)
        assert.strictEqual(v.view().state, "open")
      }),
  )
})

describe("Breakers with several tenants: generations per level", () => {
  it.effect(
    "a result permitted before the shared breaker opened still counts for the tenant's own breaker",
    () =>
      Effect.gen(function* () {
        const t = yield* setup(defaults, 2)
        const early = Array.from({ length: 10 }, () => t.permit(P, M, A))
        t.attempts(10, "failure", P, M, A)
        t.attempts(10, "failure", P, M, B)
        const openedAt = t.now()
        assert.strictEqual(t.view().state, "open")
        yield* TestClock.adjust(5_000)
        for (const permit of early) t.breakers.record(permit, "failure")
        // The shared breaker ignores them (older generation); A's own breaker counts them: 20 failures.
        assert.strictEqual(t.view().testableAt, openedAt + 30_000)
        const own = t.view(P, M, A)
        assert.strictEqual(own.state, "open")
        assert.strictEqual(own.testableAt, t.now() + 30_000)
      }),
  )

  it.effect(
    "a result permitted before the tenant's breaker opened changes nothing there, but counts for the shared one",
    () =>
      Effect.gen(function* () {
        const t = yield* setup(defaults, 2)
        const early = t.permit(P, M, A)
        t.attempts(20, "failure", P, M, A)
        const until = t.now() + 30_000
        t.breakers.record(early, "success")
        assert.deepStrictEqual(t.blocked(P, M, A), { _tag: "Blocked", until, reason: "breaker_open" })
        assert.strictEqual(t.view().attempts, 21)
      }),
  )
})

describe("Breakers with several tenants: half-open tests per level", () => {
  it.effect("the tenant's own breaker permits one test by that tenant; other tenants are not held up", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(20, "failure", P, M, A)
      yield* TestClock.adjust(30_000)
      assert.strictEqual(t.view(P, M, A).state, "half_open")
      const probe = t.permit(P, M, A)
      assert.isFalse(probe.probe)
      assert.isTrue(probe.own!.probe)
      assert.strictEqual(t.blocked(P, M, A).reason, "breaker_testing")
      assert.isFalse(t.permit(P, M, B).own!.probe)
      t.breakers.record(probe, "success")
      assert.deepStrictEqual(tenantViews(t), [])
      assert.isFalse(t.permit(P, M, A).own!.probe)
    }),
  )

  it.effect("a failed test of the tenant's breaker opens it again for 30 s", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(20, "failure", P, M, A)
      yield* TestClock.adjust(30_000)
      const probe = t.permit(P, M, A)
      yield* TestClock.adjust(2_000)
      t.breakers.record(probe, "failure")
      const until = t.now() + 30_000
      assert.deepStrictEqual(t.blocked(P, M, A), { _tag: "Blocked", until, reason: "breaker_open" })
      // One tenant's test failing does not open the shared breaker.
      assert.strictEqual(t.view().state, "closed")
    }),
  )

  it.effect("the shared breaker permits one test, by whichever tenant; its failure reopens it", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 3)
      t.attempts(10, "failure", P, M, A)
      t.attempts(10, "failure", P, M, B)
      yield* TestClock.adjust(30_000)
      const probe = t.permit(P, M, C)
      assert.isTrue(probe.probe)
      assert.isFalse(probe.own!.probe)
      assert.strictEqual(t.blocked(P, M, A).reason, "breaker_testing")
      assert.strictEqual(t.blocked(P, M, C).reason, "breaker_testing")
      t.breakers.record(probe, "failure")
      assert.strictEqual(t.view().state, "open")
      assert.strictEqual(t.blocked(P, M, B).reason, "breaker_open")
      yield* TestClock.adjust(30_000)
      t.breakers.record(t.permit(P, M, B), "success")
      assert.strictEqual(t.view().state, "closed")
      assert.strictEqual(t.view().attempts, 0)
    }),
  )

  it.effect("a tenant blocked by its own breaker does not take the shared breaker's test", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      const held = Array.from({ length: 10 }, () => t.permit(P, M, A))
      t.attempts(10, "failure", P, M, A)
      t.attempts(10, "failure", P, M, B)
      yield* TestClock.adjust(5_000)
      // A's own breaker opens 5 s after the shared one.
      for (const permit of held) t.breakers.record(permit, "failure")
      const ownUntil = t.now() + 30_000
      yield* TestClock.adjust(25_000)
      assert.strictEqual(t.view().state, "half_open")
      assert.deepStrictEqual(t.blocked(P, M, A), { _tag: "Blocked", until: ownUntil, reason: "breaker_open" })
      const probe = t.permit(P, M, B)
      assert.isTrue(probe.probe)
    }),
  )
})

describe("Breakers with several tenants: neutral results", () => {
  /** Opens the shared breaker and A's own one at the same time; returns after open_for. */
  const bothOpen = (t: Harness) =>
    Effect.gen(function* () {
      const held = t.permit(P, M, A)
      t.attempts(1, "failure", P, M, B)
      t.attempts(19, "failure", P, M, A)
      t.breakers.record(held, "failure")
      assert.strictEqual(t.view().state, "open")
      assert.strictEqual(t.view(P, M, A).state, "open")
      yield* TestClock.adjust(30_000)
    })

  it.effect("a neutral result of a test of both levels frees both test slots", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      yield* bothOpen(t)
      const probe = t.permit(P, M, A)
      assert.isTrue(probe.probe)
      assert.isTrue(probe.own!.probe)
      assert.strictEqual(t.blocked(P, M, A).reason, "breaker_testing")
      assert.strictEqual(t.blocked(P, M, B).reason, "breaker_testing")
      t.breakers.record(probe, "neutral")
      assert.strictEqual(t.view().state, "half_open")
      assert.strictEqual(t.view(P, M, A).state, "half_open")
      const again = t.permit(P, M, A)
      assert.isTrue(again.probe)
      assert.isTrue(again.own!.probe)
      t.breakers.record(again, "success")
      assert.strictEqual(t.view().state, "closed")
      assert.deepStrictEqual(tenantViews(t), [])
    }),
  )

  it.effect("an attempt released without a result (its scope closed) frees both test slots", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      yield* bothOpen(t)
      const hold = new AttemptHold({} as Deadlines["Service"], t.breakers)
      hold.hold(t.permit(P, M, A))
      assert.strictEqual(t.blocked(P, M, B).reason, "breaker_testing")
      yield* hold.release
      const next = t.permit(P, M, A)
      assert.isTrue(next.probe)
      assert.isTrue(next.own!.probe)
    }),
  )

  it.effect("neutral results count at neither level", () =>
    Effect.gen(function* () {
      const t = yield* setup(defaults, 2)
      t.attempts(50, "neutral", P, M, A)
      t.attempts(19, "failure", P, M, A)
      assert.strictEqual(t.view().attempts, 19)
      assert.deepStrictEqual(tenantViews(t), [])
    }),
  )
})
