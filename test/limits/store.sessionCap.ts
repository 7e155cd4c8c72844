/** The session-cap cases of the store conformance suite (`storeSuite`): `maxSessions` per tenant, LRU eviction. */
import { assert } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { SESSION_TTL_MS, Store } from "../../src/limits/Store.js"
import {
  admitted,
  type AdmitOver,
  type Fixture,
  HOUR,
  hard,
  refusedWith,
  type StoreTest,
} from "./store.fixture.js"

const T0 = Date.UTC(2026, 11, 2, 10, 0, 0)
const SECOND = 1_000

/** Admits one request in session `id` at `at` with a cap of `maxSessions`. */
const inSession = (f: Fixture, id: string, at: number, maxSessions: number, over: AdmitOver = {}) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(at)
    return yield* f.admit({ reserve: 10, session: { id, budget: undefined }, maxSessions, ...over })
  })

/** The ids of the live sessions of `tenant` (default: the fixture's) now, sorted. */
const ids = (f: Fixture, tenant: string = f.tenant) =>
  Effect.gen(function* () {
    const store = yield* Store
    const state = yield* store.tenantState(tenant, yield* Clock.currentTimeMillis)
    return state.sessions.map((s) => s.id).sort()
  })

/** Declares the session-cap tests with `test`. */
export const sessionCapCases = (test: StoreTest) => {
  test("cap 3: touching s1 then starting s4 evicts s2, the least recently used", (f) =>
    Effect.gen(function* () {
      for (const [i, id] of ["s1", "s2", "s3"].entries()) {
        assert.strictEqual(admitted(yield* inSession(f, id, T0 + i * SECOND, 3)).sessionsEvicted, 0)
      }
      // A request in a live session never evicts, at the cap or not.
      assert.strictEqual(admitted(yield* inSession(f, "s1", T0 + 3 * SECOND, 3)).sessionsEvicted, 0)
      assert.strictEqual(admitted(yield* inSession(f, "s4", T0 + 4 * SECOND, 3)).sessionsEvicted, 1)
      const state = yield* f.state
      assert.deepStrictEqual(
        state.sessions.map((s) => [s.id, s.lastMs]),
        [
          ["s4", T0 + 4 * SECOND],
          ["s1", T0 + 3 * SECOND],
          ["s3", T0 + 2 * SECOND],
        ],
      )
      // The month keeps every admission's reservation: eviction forgets session spend only.
      assert.strictEqual(state.monthReserved, 5 * 10)
    }))

  test("a settle touches its session: the session settled last is evicted last", (f) =>
    Effect.gen(function* () {
      const first = admitted(yield* inSession(f, "s1", T0, 3))
      yield* inSession(f, "s2", T0 + SECOND, 3)
      yield* inSession(f, "s3", T0 + 2 * SECOND, 3)
      yield* TestClock.setTime(T0 + 3 * SECOND)
      yield* f.settle(first, { sessionId: "s1", reserved: 10, cost: 7 })
      assert.strictEqual(admitted(yield* inSession(f, "s4", T0 + 4 * SECOND, 3)).sessionsEvicted, 1)
      assert.deepStrictEqual(yield* ids(f), ["s1", "s3", "s4"])
    }))

  test("a refused admission of a new session at the cap evicts nothing", (f) =>
    Effect.gen(function* () {
      for (const [i, id] of ["s1", "s2", "s3"].entries()) yield* inSession(f, id, T0 + i * SECOND, 3)
      const at = T0 + 3 * SECOND
      refusedWith(yield* inSession(f, "s4", at, 3, { reserve: 100, month: hard(50) }), "month")
      refusedWith(yield* inSession(f, "s4", at, 3, { session: { id: "s4", budget: hard(5) } }), "session")
      refusedWith(
        yield* inSession(f, "s4", at, 3, { tokenCost: 2_000, tokensPerMinute: 1_000 }),
        "tokens_too_large",
      )
      // A request without a session counts no session either.
      assert.strictEqual(admitted(yield* f.admit({ maxSessions: 3 })).sessionsEvicted, 0)
      assert.deepStrictEqual(yield* ids(f), ["s1", "s2", "s3"])
    }))

  test("another tenant's sessions are unaffected by a tenant at its cap", (f) =>
    Effect.gen(function* () {
      const other = `${f.tenant}-other`
      for (const [i, id] of ["s1", "s2", "s3"].entries()) {
        yield* inSession(f, id, T0 + i * SECOND, 3, { tenant: other })
        yield* inSession(f, id, T0 + i * SECOND, 3)
      }
      assert.strictEqual(admitted(yield* inSession(f, "s4", T0 + 3 * SECOND, 3)).sessionsEvicted, 1)
      assert.strictEqual(admitted(yield* inSession(f, "s5", T0 + 4 * SECOND, 3)).sessionsEvicted, 1)
      assert.deepStrictEqual(yield* ids(f), ["s3", "s4", "s5"])
      assert.deepStrictEqual(yield* ids(f, other), ["s1", "s2", "s3"])
    }))

  test("expired sessions do not count toward the cap", (f) =>
    Effect.gen(function* () {
      yield* inSession(f, "s1", T0, 3)
      yield* inSession(f, "s2", T0 + HOUR, 3)
      yield* inSession(f, "s3", T0 + 2 * HOUR, 3)
      // s1 has been idle for 24 h: two live sessions, room for a third.
      const later = T0 + SESSION_TTL_MS + 30 * 60 * SECOND
      assert.strictEqual(admitted(yield* inSession(f, "s4", later, 3)).sessionsEvicted, 0)
      assert.deepStrictEqual(yield* ids(f), ["s2", "s3", "s4"])
      // Now at the cap: the next new session evicts s2.
      assert.strictEqual(admitted(yield* inSession(f, "s5", later + SECOND, 3)).sessionsEvicted, 1)
      assert.deepStrictEqual(yield* ids(f), ["s3", "s4", "s5"])
      // An expired session used again is a new session, and counts as one.
      yield* TestClock.setTime(T0 + 2 * HOUR + SESSION_TTL_MS)
      assert.deepStrictEqual(yield* ids(f), ["s4", "s5"])
      assert.strictEqual(
        admitted(yield* inSession(f, "s3", T0 + 2 * HOUR + SESSION_TTL_MS, 3)).sessionsEvicted,
        0,
      )
      assert.deepStrictEqual(yield* ids(f), ["s3", "s4", "s5"])
    }))

  test("an evicted session's spend is gone: a later request in it starts a fresh session", (f) =>
    Effect.gen(function* () {
      const budget = hard(1_000)
      const first = admitted(
        yield* inSession(f, "s1", T0, 3, { reserve: 600, session: { id: "s1", budget } }),
      )
      yield* f.settle(first, { sessionId: "s1", reserved: 600, cost: 600 })
      refusedWith(
        yield* inSession(f, "s1", T0 + SECOND, 3, { reserve: 600, session: { id: "s1", budget } }),
        "session",
      )
      yield* inSession(f, "s2", T0 + 2 * SECOND, 3)
      yield* inSession(f, "s3", T0 + 3 * SECOND, 3)
      assert.strictEqual(admitted(yield* inSession(f, "s4", T0 + 4 * SECOND, 3)).sessionsEvicted, 1)
      assert.deepStrictEqual(yield* ids(f), ["s2", "s3", "s4"])
      // s1 again: a new session (spend 0) that the budget admits, evicting s2 in turn.
      const again = admitted(
        yield* inSession(f, "s1", T0 + 5 * SECOND, 3, { reserve: 600, session: { id: "s1", budget } }),
      )
      assert.strictEqual(again.sessionsEvicted, 1)
      const state = yield* f.state
      assert.deepStrictEqual(state.sessions[0], {
        id: "s1",
        spend: 0,
        reserved: 600,
        lastMs: T0 + 5 * SECOND,
      })
      assert.deepStrictEqual(
        state.sessions.map((s) => s.id),
        ["s1", "s4", "s3"],
      )
      assert.strictEqual(state.monthSpend, 600)
    }))

  test("among sessions last used at the same time, the smallest id is evicted first", (f) =>
    Effect.gen(function* () {
      for (const id of ["s-b", "s-c", "s-a"]) yield* inSession(f, id, T0, 3)
      assert.strictEqual(admitted(yield* inSession(f, "s-d", T0, 3)).sessionsEvicted, 1)
      assert.deepStrictEqual(yield* ids(f), ["s-b", "s-c", "s-d"])
      assert.strictEqual(admitted(yield* inSession(f, "s-e", T0 + SECOND, 3)).sessionsEvicted, 1)
      assert.deepStrictEqual(yield* ids(f), ["s-c", "s-d", "s-e"])
    }))

  test("a cap below the live count (a lowered max_per_tenant) evicts down to it at the next new session", (f) =>
    Effect.gen(function* () {
      for (let i = 1; i <= 5; i++) yield* inSession(f, `s${i}`, T0 + i * SECOND, 10)
      // Requests in live sessions still never evict.
      assert.strictEqual(admitted(yield* inSession(f, "s1", T0 + 6 * SECOND, 3)).sessionsEvicted, 0)
      assert.strictEqual(admitted(yield* inSession(f, "s6", T0 + 7 * SECOND, 3)).sessionsEvicted, 3)
      assert.deepStrictEqual(yield* ids(f), ["s1", "s5", "s6"])
      assert.strictEqual(admitted(yield* inSession(f, "s7", T0 + 8 * SECOND, 1)).sessionsEvicted, 3)
      assert.deepStrictEqual(yield* ids(f), ["s7"])
    }))
}
