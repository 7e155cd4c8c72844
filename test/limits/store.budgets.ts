/** The budget and session cases of the store conformance suite (`storeSuite`). */
import { assert } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { SESSION_TTL_MS, Store, type BudgetCheck } from "../../src/limits/Store.js"
import { admitted, HOUR, hard, periodic, refusedWith, soft, type StoreTest } from "./store.fixture.js"

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
      assert.isTrue(results.every((r) => r._tag === "Admitted" || r.budget === "month"))
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
      admitted(yield* f.admit({ reserve: 800, month: hard(1_000), session }))
      const month = (check: BudgetCheck) => [periodic("month", undefined, check, now)]
      const extend = (amount: number, over: Partial<Parameters<typeof store.extend>[0]> = {}) =>
        store.extend({ tenant: f.tenant, now, budgets: month(hard(1_000)), session, amount, ...over })
      assert.strictEqual(yield* extend(300), "month")
      assert.strictEqual((yield* f.state).monthReserved, 800)
      assert.strictEqual(yield* extend(200), undefined)
      assert.strictEqual((yield* f.state).monthReserved, 1_000)
      assert.strictEqual(yield* extend(600, { budgets: month(soft(1_000)) }), "session")
      assert.strictEqual((yield* f.state).sessions[0]?.reserved, 1_000)
      assert.strictEqual(yield* extend(500, { budgets: month(soft(1_000)) }), undefined)
      assert.strictEqual(
        yield* extend(5_000, { budgets: month(soft(1_000)), session: { id: "s1", budget: soft(1) } }),
        undefined,
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
      refusedWith(yield* f.admit({ reserve: 1, month: hard(1_000) }), "month")
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
      refusedWith(yield* f.admit({ reserve: 600, session }), "session")
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
      refusedWith(yield* f.admit({ reserve: 400, session }), "session")
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
        budgets: [],
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
        budgets: [],
        sessions: [],
        requests: { current: 0, previous: 0 },
        tokens: { current: 0, previous: 0 },
      })
    }))
}

/** Issue #19: day, week and key budgets beside the month and the session, in one atomic admission. */
export const periodBudgetCases = (test: StoreTest) => {
  const T = Date.UTC(2026, 11, 2, 10, 0, 0) // a Wednesday: week 2026-W49, from Monday 2026-11-30
  /** Every periodic budget a request can have, narrowest first, each `check` (key "ci"). */
  const all = (now: number, check: (name: string) => BudgetCheck | undefined, key = "ci") => [
    periodic("day", key, check("key.day"), now),
    periodic("week", key, check("key.week"), now),
    periodic("month", key, check("key.month"), now),
    periodic("day", undefined, check("day"), now),
    periodic("week", undefined, check("week"), now),
    periodic("month", undefined, check("month"), now),
  ]
  const refs = (now: number, key = "ci") => all(now, () => undefined, key)

  test("a refusal names the narrowest budget without room: key day, week, month, then the tenant's, the session last", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const order = ["key.day", "key.week", "key.month", "day", "week", "month", "session"] as const
      for (const [i, name] of order.entries()) {
        // Budgets before `name` have room; `name` and every later one have none.
        const check = (n: string) => (order.indexOf(n as never) < i ? hard(1_000) : hard(99))
        const session = { id: "s1", budget: check("session") }
        refusedWith(yield* f.admit({ reserve: 100, budgets: all(T, check), session }), name)
      }
      const state = yield* f.state
      assert.deepStrictEqual(state.requests, { current: 0, previous: 0 })
      assert.deepStrictEqual(
        (yield* Effect.flatMap(Store, (s) => s.tenantState(f.tenant, T, refs(T)))).budgets,
        Array.from({ length: 6 }, () => ({ spend: 0, reserved: 0 })),
      )
      assert.deepStrictEqual(state.sessions, [])
    }))

  test("an admission reserves against every budget that applies; settle moves each to spend", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const budgets = all(T, () => hard(10_000))
      const session = { id: "s1", budget: hard(10_000) }
      const first = admitted(yield* f.admit({ reserve: 700, budgets, session }))
      const read = Effect.flatMap(Store, (s) => s.tenantState(f.tenant, T + 1_000, refs(T)))
      assert.deepStrictEqual(
        (yield* read).budgets,
        Array.from({ length: 6 }, () => ({ spend: 0, reserved: 700 })),
      )
      yield* TestClock.setTime(T + 1_000)
      yield* f.settle(first, { budgets, sessionId: "s1", reserved: 700, cost: 450 })
      const state = yield* read
      assert.deepStrictEqual(
        state.budgets,
        Array.from({ length: 6 }, () => ({ spend: 450, reserved: 0 })),
      )
      assert.strictEqual(state.monthSpend, 450)
      assert.deepStrictEqual(state.sessions, [{ id: "s1", spend: 450, reserved: 0, lastMs: T + 1_000 }])
    }))

  test("each key has its own budgets; the tenant's count every key's spend", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const budgets = (key: string) => [
        periodic("day", key, hard(1_000), T),
        periodic("day", undefined, hard(1_500), T),
        periodic("month", undefined, undefined, T),
      ]
      admitted(yield* f.admit({ reserve: 900, budgets: budgets("a") }))
      refusedWith(yield* f.admit({ reserve: 200, budgets: budgets("a") }), "key.day")
      admitted(yield* f.admit({ reserve: 500, budgets: budgets("b") }))
      refusedWith(yield* f.admit({ reserve: 200, budgets: budgets("b") }), "day")
      admitted(yield* f.admit({ reserve: 100, budgets: budgets("b") }))
      const state = yield* Effect.flatMap(Store, (s) =>
        s.tenantState(f.tenant, T, [
          { name: "day", key: "a", period: "2026-12-02" },
          { name: "day", key: "b", period: "2026-12-02" },
          { name: "day", key: undefined, period: "2026-12-02" },
        ]),
      )
      assert.deepStrictEqual(state.budgets, [
        { spend: 0, reserved: 900 },
        { spend: 0, reserved: 600 },
        { spend: 0, reserved: 1_500 },
      ])
      assert.strictEqual(state.monthReserved, 1_500)
    }))

  test("120 parallel requests of two keys: the tenant's day admits exactly 44, neither key passes its 26", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const budgets = (key: string) => [
        periodic("day", key, hard(6_000), T),
        periodic("day", undefined, hard(10_000), T),
        periodic("month", undefined, undefined, T),
      ]
      const results = yield* Effect.all(
        Array.from({ length: 120 }, (_, i) =>
          f.admit({ reserve: 223, budgets: budgets(i % 2 === 0 ? "a" : "b") }),
        ),
        { concurrency: "unbounded" },
      )
      const of = (parity: number) =>
        results.filter((r, i) => i % 2 === parity && r._tag === "Admitted").length
      assert.strictEqual(of(0) + of(1), 44)
      assert.isAtMost(of(0), 26)
      assert.isAtMost(of(1), 26)
      for (const r of results) if (r._tag === "Refused") assert.include(["key.day", "day"], r.budget)
    }))

  test("a day budget starts again at UTC midnight; a settle across midnight goes to the day it reserved in", (f) =>
    Effect.gen(function* () {
      const before = Date.UTC(2026, 11, 2, 23, 59, 30)
      yield* TestClock.setTime(before)
      const day = (now: number) => [
        periodic("day", "ci", hard(1_000), now),
        periodic("month", undefined, undefined, now),
      ]
      const late = admitted(yield* f.admit({ reserve: 1_000, budgets: day(before) }))
      refusedWith(yield* f.admit({ reserve: 1, budgets: day(before) }), "key.day")
      const after = Date.UTC(2026, 11, 3, 0, 0, 5)
      yield* TestClock.setTime(after)
      const today = day(after)
      assert.strictEqual(today[0]!.period, "2026-12-03")
      admitted(yield* f.admit({ reserve: 600, budgets: today }))
      yield* f.settle(late, { budgets: day(before), reserved: 1_000, cost: 900 })
      const state = yield* Effect.flatMap(Store, (s) =>
        s.tenantState(f.tenant, after, [
          { name: "day", key: "ci", period: "2026-12-02" },
          { name: "day", key: "ci", period: "2026-12-03" },
        ]),
      )
      assert.deepStrictEqual(state.budgets, [
        { spend: 900, reserved: 0 },
        { spend: 0, reserved: 600 },
      ])
      // The month holds both days.
      assert.strictEqual(state.monthSpend, 900)
      assert.strictEqual(state.monthReserved, 600)
    }))

  test("a week budget starts again on Monday 00:00 UTC (ISO weeks: 2027-01-01 is in 2026-W53)", (f) =>
    Effect.gen(function* () {
      const sunday = Date.UTC(2026, 11, 6, 23, 59, 59, 999)
      const monday = Date.UTC(2026, 11, 7)
      const week = (now: number) => [
        periodic("week", undefined, hard(1_000), now),
        periodic("month", undefined, undefined, now),
      ]
      assert.strictEqual(week(sunday)[0]!.period, "2026-W49")
      assert.strictEqual(week(monday)[0]!.period, "2026-W50")
      assert.strictEqual(week(Date.UTC(2027, 0, 1))[0]!.period, "2026-W53")
      assert.strictEqual(week(Date.UTC(2027, 0, 4))[0]!.period, "2027-W01")
      yield* TestClock.setTime(sunday)
      admitted(yield* f.admit({ reserve: 1_000, budgets: week(sunday) }))
      refusedWith(yield* f.admit({ reserve: 1, budgets: week(sunday) }), "week")
      yield* TestClock.setTime(monday)
      admitted(yield* f.admit({ reserve: 1_000, budgets: week(monday) }))
      refusedWith(yield* f.admit({ reserve: 1, budgets: week(monday) }), "week")
    }))

  test("soft day and key budgets admit and are named in softExceeded, in the order of the list", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const budgets = [
        periodic("day", "ci", soft(300), T),
        periodic("week", "ci", hard(10_000), T),
        periodic("day", undefined, soft(499), T),
        periodic("month", undefined, soft(100_000), T),
      ]
      assert.deepStrictEqual(admitted(yield* f.admit({ reserve: 250, budgets })).softExceeded, [])
      assert.deepStrictEqual(admitted(yield* f.admit({ reserve: 250, budgets })).softExceeded, [
        "key.day",
        "day",
      ])
    }))

  test("extend checks every hard budget of the admission and names the first that refuses", (f) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T)
      const budgets = [
        periodic("month", "ci", hard(1_000), T),
        periodic("day", undefined, hard(2_000), T),
        periodic("month", undefined, undefined, T),
      ]
      admitted(yield* f.admit({ reserve: 800, budgets }))
      const store = yield* Store
      const extend = (amount: number) =>
        store.extend({ tenant: f.tenant, now: T, budgets, session: undefined, amount })
      assert.strictEqual(yield* extend(300), "key.month")
      assert.strictEqual(yield* extend(200), undefined)
      const read = Effect.map(store.tenantState(f.tenant, T, budgets), (s) => s.budgets)
      assert.deepStrictEqual(yield* read, [
        { spend: 0, reserved: 1_000 },
        { spend: 0, reserved: 1_000 },
        { spend: 0, reserved: 1_000 },
      ])
      admitted(yield* f.admit({ reserve: 1_000, budgets: budgets.slice(1) }))
      assert.strictEqual(
        yield* store.extend({
          tenant: f.tenant,
          now: T,
          budgets: budgets.slice(1),
          session: undefined,
          amount: 1,
        }),
        "day",
      )
    }))
}
