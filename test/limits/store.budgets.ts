/** The budget and session cases of the store conformance suite (`storeSuite`). */
import { assert } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { SESSION_TTL_MS, Store } from "../../src/limits/Store.js"
import { admitted, HOUR, hard, refusedWith, soft, type StoreTest } from "./store.fixture.js"

/** Declares the budget and session tests with `test`. */
export const budgetCases = (test: StoreTest) => {
  test("a hard month budget counts open reservations: 44 of 120 parallel 223 µUSD requests fit 10,000", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.UTC(2026, 11, 2, 10, 4, 5))
      const results = yield* Effect.all(
        Array.from({ length: 120 }, () => f.admit({ reserve: 223, month: hard(10_000) })),
        { concurrency: "unbounded" },
      )
      assert.strictEqual(results.filter((r) => r._tag === "Admitted").length, 44)
      assert.isTrue(results.every((r) => r._tag === "Admitted" || r.reason === "month_budget"))
      const state = yield* f.state
      assert.strictEqual(state.month, "2026-12")
      assert.strictEqual(state.monthReserved, 44 * 223)
      assert.strictEqual(state.monthSpend, 0)
    }))

  test("a soft budget admits and reports softExceeded once spend plus reservations pass it", (f) =>
    Effect.gen(function* () {
      const request = { reserve: 223, month: soft(300), session: { id: "s1", budget: soft(400) } }
      assert.deepStrictEqual(admitted(yield* f.admit(request)).softExceeded, [])
      assert.deepStrictEqual(admitted(yield* f.admit(request)).softExceeded, ["month", "session"])
      const onlyMonth = { ...request, session: { id: "s2", budget: soft(400) } }
      assert.deepStrictEqual(admitted(yield* f.admit(onlyMonth)).softExceeded, ["month"])
      const state = yield* f.state
      assert.strictEqual(state.monthReserved, 3 * 223)
    }))

  test("settle moves the reservation to spend and adjusts the tokens of the admission minute", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(59_000)
      const limits = { requestsPerMinute: 10, tokensPerMinute: 1000 }
      const session = { id: "s1", budget: undefined }
      const first = admitted(yield* f.admit({ ...limits, tokenCost: 100, reserve: 500, session }))
      yield* TestClock.setTime(61_000)
      yield* f.settle(first, { sessionId: "s1", reserved: 500, cost: 120, tokenDelta: -30 })
      const state = yield* f.state
      assert.deepStrictEqual(state.tokens, { current: 0, previous: 70 })
      assert.strictEqual(state.monthSpend, 120)
      assert.strictEqual(state.monthReserved, 0)
      assert.deepStrictEqual(state.sessions, [{ id: "s1", spend: 120, reserved: 0, lastMs: 61_000 }])
      yield* f.settle(first, { sessionId: "s1", reserved: 999, cost: 0, tokenDelta: -1_000 })
      const after = yield* f.state
      assert.deepStrictEqual(after.tokens, { current: 0, previous: 0 })
      assert.strictEqual(after.monthReserved, 0)
      assert.strictEqual(after.sessions[0]?.reserved, 0)
    }))

  test("extend is refused by a hard month or session budget and then changes nothing", (f) =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = yield* Clock.currentTimeMillis
      const session = { id: "s1", budget: hard(1_500) }
      const first = admitted(yield* f.admit({ reserve: 800, month: hard(1_000), session }))
      const extend = (amount: number, over: Partial<Parameters<typeof store.extend>[0]> = {}) =>
        store.extend({
          tenant: f.tenant,
          now,
          month: first.month,
          monthBudget: hard(1_000),
          session,
          amount,
          ...over,
        })
      assert.isFalse(yield* extend(300))
      assert.strictEqual((yield* f.state).monthReserved, 800)
      assert.isTrue(yield* extend(200))
      assert.strictEqual((yield* f.state).monthReserved, 1_000)
      assert.isFalse(yield* extend(600, { monthBudget: soft(1_000) }))
      assert.strictEqual((yield* f.state).sessions[0]?.reserved, 1_000)
      assert.isTrue(yield* extend(500, { monthBudget: soft(1_000) }))
      assert.isTrue(
        yield* extend(5_000, { monthBudget: soft(1_000), session: { id: "s1", budget: soft(1) } }),
      )
      const state = yield* f.state
      assert.strictEqual(state.monthReserved, 6_500)
      assert.strictEqual(state.sessions[0]?.reserved, 6_500)
    }))

  test("a new UTC month starts at 0 spend; a late settle goes to the admission's month", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.UTC(2026, 11, 31, 23, 59, 30))
      const december = admitted(yield* f.admit({ reserve: 1_000, month: hard(1_000) }))
      assert.strictEqual(december.month, "2026-12")
      refusedWith(yield* f.admit({ reserve: 1, month: hard(1_000) }), "month_budget")
      yield* TestClock.setTime(Date.UTC(2027, 0, 1, 0, 0, 5))
      const state = yield* f.state
      assert.strictEqual(state.month, "2027-01")
      assert.strictEqual(state.monthSpend, 0)
      assert.strictEqual(state.monthReserved, 0)
      const january = admitted(yield* f.admit({ reserve: 600, month: hard(1_000) }))
      assert.strictEqual(january.month, "2027-01")
      yield* f.settle(december, { reserved: 1_000, cost: 900 })
      const after = yield* f.state
      assert.strictEqual(after.monthSpend, 0)
      assert.strictEqual(after.monthReserved, 600)
    }))

  test("session spend ends 24 h after the session's last request", (f) =>
    Effect.gen(function* () {
      const t0 = Date.UTC(2026, 11, 2, 10, 0, 0)
      yield* TestClock.setTime(t0)
      const session = { id: "agent-1", budget: hard(1_000) }
      const first = admitted(yield* f.admit({ reserve: 600, session }))
      yield* f.settle(first, { sessionId: "agent-1", reserved: 600, cost: 600 })
      yield* TestClock.setTime(t0 + SESSION_TTL_MS - 1)
      refusedWith(yield* f.admit({ reserve: 600, session }), "session_budget")
      assert.deepStrictEqual((yield* f.state).sessions, [
        { id: "agent-1", spend: 600, reserved: 0, lastMs: t0 },
      ])
      yield* TestClock.setTime(t0 + SESSION_TTL_MS)
      assert.deepStrictEqual((yield* f.state).sessions, [])
      admitted(yield* f.admit({ reserve: 600, session }))
      const now = t0 + SESSION_TTL_MS
      assert.deepStrictEqual((yield* f.state).sessions, [
        { id: "agent-1", spend: 0, reserved: 600, lastMs: now },
      ])
      assert.strictEqual((yield* f.state).monthSpend, 600)
    }))

  test("a request within 24 h keeps the session's spend alive", (f) =>
    Effect.gen(function* () {
      const t0 = Date.UTC(2026, 11, 2, 10, 0, 0)
      yield* TestClock.setTime(t0)
      const session = { id: "agent-2", budget: hard(1_000) }
      const first = admitted(yield* f.admit({ reserve: 600, session }))
      yield* f.settle(first, { sessionId: "agent-2", reserved: 600, cost: 600 })
      yield* TestClock.adjust(20 * HOUR)
      const second = admitted(yield* f.admit({ reserve: 100, session }))
      yield* f.settle(second, { sessionId: "agent-2", reserved: 100, cost: 100 })
      yield* TestClock.adjust(10 * HOUR)
      const lastMs = t0 + 20 * HOUR
      assert.deepStrictEqual((yield* f.state).sessions, [{ id: "agent-2", spend: 700, reserved: 0, lastMs }])
      refusedWith(yield* f.admit({ reserve: 400, session }), "session_budget")
      yield* TestClock.adjust(14 * HOUR)
      assert.deepStrictEqual((yield* f.state).sessions, [])
      admitted(yield* f.admit({ reserve: 400, session }))
    }))

  test("sessions used in turns end 24 h after each one's own last request", (f) =>
    Effect.gen(function* () {
      const t0 = Date.UTC(2026, 11, 2, 10, 0, 0)
      const a = { id: "agent-a", budget: undefined }
      const b = { id: "agent-b", budget: undefined }
      const use = (session: typeof a, at: number) =>
        Effect.gen(function* () {
          yield* TestClock.setTime(at)
          const admission = admitted(yield* f.admit({ reserve: 10, session }))
          yield* f.settle(admission, { sessionId: session.id, reserved: 10, cost: 10 })
        })
      yield* use(a, t0)
      yield* use(b, t0 + HOUR)
      yield* use(a, t0 + 2 * HOUR)
      // The same session again and again (an agent's turns).
      yield* use(a, t0 + 3 * HOUR)
      yield* use(a, t0 + 4 * HOUR)
      yield* TestClock.setTime(t0 + HOUR + SESSION_TTL_MS)
      assert.deepStrictEqual(
        (yield* f.state).sessions.map((s) => [s.id, s.spend, s.lastMs]),
        [["agent-a", 40, t0 + 4 * HOUR]],
      )
      yield* use(b, t0 + 2 * HOUR + SESSION_TTL_MS)
      yield* TestClock.setTime(t0 + 4 * HOUR + SESSION_TTL_MS)
      assert.deepStrictEqual(
        (yield* f.state).sessions.map((s) => [s.id, s.spend]),
        [["agent-b", 10]],
      )
    }))

  test("a settle after the session ended changes the month only", (f) =>
    Effect.gen(function* () {
      const session = { id: "late", budget: undefined }
      const first = admitted(yield* f.admit({ reserve: 50, session }))
      yield* TestClock.adjust(SESSION_TTL_MS)
      yield* f.settle(first, { sessionId: "late", reserved: 50, cost: 40 })
      const state = yield* f.state
      assert.deepStrictEqual(state.sessions, [])
      assert.strictEqual(state.monthSpend, 40)
    }))

  test("tenantState shows the month, live sessions newest first, and the rate counters", (f) =>
    Effect.gen(function* () {
      const t0 = Date.UTC(2026, 11, 2, 10, 0, 30)
      yield* TestClock.setTime(t0)
      const a = admitted(
        yield* f.admit({ tokenCost: 10, reserve: 100, session: { id: "a", budget: undefined } }),
      )
      yield* TestClock.adjust(60_000)
      yield* f.admit({ tokenCost: 20, reserve: 200, session: { id: "b", budget: hard(10_000) } })
      yield* f.admit({ tokenCost: 5, reserve: 300 })
      yield* f.settle(a, { sessionId: "a", reserved: 100, cost: 70, tokenDelta: 3 })
      const state = yield* f.state
      assert.deepStrictEqual(state, {
        month: "2026-12",
        monthSpend: 70,
        monthReserved: 500,
        sessions: [
          { id: "a", spend: 70, reserved: 0, lastMs: t0 + 60_000 },
          { id: "b", spend: 0, reserved: 200, lastMs: t0 + 60_000 },
        ],
        requests: { current: 2, previous: 1 },
        tokens: { current: 25, previous: 13 },
      })
      const other = yield* Effect.flatMap(Store, (s) => s.tenantState(`${f.tenant}-other`, t0))
      assert.deepStrictEqual(other, {
        month: "2026-12",
        monthSpend: 0,
        monthReserved: 0,
        sessions: [],
        requests: { current: 0, previous: 0 },
        tokens: { current: 0, previous: 0 },
      })
    }))
}
