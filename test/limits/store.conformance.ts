/**
 * One conformance suite for every limit store (limits-and-budgets.md): the
 * memory and Redis stores must answer identically. Time comes from
 * `TestClock`; each test uses its own tenant, so a shared Redis needs no flush.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, type Layer, TestClock } from "effect"
import {
  type AdmitRequest,
  type Admitted,
  type Refused,
  SESSION_TTL_MS,
  type SettleRequest,
  Store,
} from "../../src/limits/Store.js"

const HOUR = 60 * 60 * 1000
let tenants = 0

/** The tenant and shorthands of one test. */
const fixture = (suite: string) => {
  const tenant = `${suite}-t${++tenants}`
  const admit = (over: Partial<AdmitRequest> = {}) =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = yield* Clock.currentTimeMillis
      return yield* store.admit({
        tenant,
        now,
        requestsPerMinute: undefined,
        tokensPerMinute: undefined,
        tokenCost: 0,
        reserve: 0,
        month: undefined,
        session: undefined,
        ...over,
      })
    })
  const settle = (admitted: Admitted, over: Partial<SettleRequest> = {}) =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = yield* Clock.currentTimeMillis
      yield* store.settle({
        tenant,
        now,
        minute: admitted.minute,
        month: admitted.month,
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

const admitted = (result: Admitted | Refused): Admitted => {
  if (result._tag !== "Admitted") assert.fail(`expected Admitted, got Refused (${result.reason})`)
  return result
}

const refusedWith = (result: Admitted | Refused, reason: Refused["reason"]): Refused => {
  if (result._tag !== "Refused") assert.fail(`expected Refused (${reason}), got Admitted`)
  assert.strictEqual(result.reason, reason)
  return result
}

/** Admits until the first refusal (at most `max`); the number admitted. */
const admitUntilRefused = (admit: Effect.Effect<Admitted | Refused, unknown, Store>, max: number) =>
  Effect.gen(function* () {
    for (let n = 0; n < max; n++) {
      if ((yield* admit)._tag === "Refused") return n
    }
    return max
  })

const hard = (limit: number) => ({ limit, hard: true })
const soft = (limit: number) => ({ limit, hard: false })

/** Runs the suite against the store the `layer` builds (a fresh one per test). */
export const storeSuite = (name: string, layer: () => Layer.Layer<Store, unknown>) =>
  describe(`Store conformance: ${name}`, () => {
    const test = (
      title: string,
      body: (f: ReturnType<typeof fixture>) => Effect.Effect<void, unknown, Store>,
    ) => it.effect(title, () => Effect.provide(body(fixture(name)), layer()))

    test("admits exactly the request limit in a fresh minute, then refuses with reason requests", (f) =>
      Effect.gen(function* () {
        yield* TestClock.setTime(10_000)
        for (let n = 1; n <= 5; n++) {
          const result = admitted(yield* f.admit({ requestsPerMinute: 5 }))
          assert.deepStrictEqual(result.requests, { limit: 5, current: n, previous: 0, elapsed: 10 / 60 })
          assert.strictEqual(result.minute, 0)
        }
        const refused = refusedWith(yield* f.admit({ requestsPerMinute: 5 }), "requests")
        assert.deepStrictEqual(refused.requests, { limit: 5, current: 5, previous: 0, elapsed: 10 / 60 })
        assert.strictEqual((yield* f.state).requests.current, 5)
      }))

    test("the previous minute counts by the part of the current minute still to come (37.5 + 12 ≤ 50)", (f) =>
      Effect.gen(function* () {
        yield* TestClock.setTime(30_000)
        assert.strictEqual(yield* admitUntilRefused(f.admit({ requestsPerMinute: 50 }), 100), 50)
        yield* TestClock.setTime(75_000)
        assert.strictEqual(yield* admitUntilRefused(f.admit({ requestsPerMinute: 50 }), 100), 12)
        const refused = refusedWith(yield* f.admit({ requestsPerMinute: 50 }), "requests")
        assert.deepStrictEqual(refused.requests, { limit: 50, current: 12, previous: 50, elapsed: 0.25 })
        yield* TestClock.setTime(180_000)
        assert.deepStrictEqual((yield* f.state).requests, { current: 0, previous: 0 })
      }))

    test("the token limit counts token cost; too large is refused apart; a token cost of 0 is not counted", (f) =>
      Effect.gen(function* () {
        const limits = { requestsPerMinute: 10, tokensPerMinute: 1000 }
        admitted(yield* f.admit({ ...limits, tokenCost: 400 }))
        const second = admitted(yield* f.admit({ ...limits, tokenCost: 400 }))
        assert.deepStrictEqual(second.tokens, { limit: 1000, current: 800, previous: 0, elapsed: 0 })
        const refused = refusedWith(yield* f.admit({ ...limits, tokenCost: 201 }), "tokens")
        assert.strictEqual(refused.tokens?.current, 800)
        refusedWith(yield* f.admit({ ...limits, tokenCost: 1001 }), "tokens_too_large")
        const countTokens = admitted(yield* f.admit({ ...limits, tokenCost: 0 }))
        assert.strictEqual(countTokens.tokens, undefined)
        assert.strictEqual(countTokens.requests?.current, 3)
        admitted(yield* f.admit({ ...limits, tokenCost: 200 }))
        assert.deepStrictEqual((yield* f.state).tokens, { current: 1000, previous: 0 })
        assert.deepStrictEqual((yield* f.state).requests, { current: 4, previous: 0 })
      }))

    test("refusal order: requests before tokens_too_large before tokens before budgets", (f) =>
      Effect.gen(function* () {
        const all = { requestsPerMinute: 1, tokensPerMinute: 100, month: hard(10), reserve: 5 }
        admitted(yield* f.admit({ ...all, tokenCost: 100 }))
        refusedWith(yield* f.admit({ ...all, tokenCost: 1000, reserve: 100 }), "requests")
        const wide = { ...all, requestsPerMinute: 10 }
        refusedWith(yield* f.admit({ ...wide, tokenCost: 101, reserve: 100 }), "tokens_too_large")
        refusedWith(yield* f.admit({ ...wide, tokenCost: 1, reserve: 100 }), "tokens")
        refusedWith(yield* f.admit({ ...wide, tokenCost: 0, reserve: 6 }), "month_budget")
        const session = { id: "s", budget: hard(1) }
        refusedWith(yield* f.admit({ ...wide, tokenCost: 0, reserve: 5, session }), "session_budget")
      }))

    test("a refused request counts nothing: no rate counter, no reservation, no session", (f) =>
      Effect.gen(function* () {
        const limits = { requestsPerMinute: 10, tokensPerMinute: 1000, tokenCost: 50 }
        refusedWith(yield* f.admit({ ...limits, reserve: 200, month: hard(100) }), "month_budget")
        const session = { id: "sess-1", budget: hard(100) }
        refusedWith(yield* f.admit({ ...limits, reserve: 200, session }), "session_budget")
        const state = yield* f.state
        assert.deepStrictEqual(state.requests, { current: 0, previous: 0 })
        assert.deepStrictEqual(state.tokens, { current: 0, previous: 0 })
        assert.strictEqual(state.monthReserved, 0)
        assert.deepStrictEqual(state.sessions, [])
      }))

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
        assert.deepStrictEqual((yield* f.state).sessions, [
          { id: "agent-2", spend: 700, reserved: 0, lastMs },
        ])
        refusedWith(yield* f.admit({ reserve: 400, session }), "session_budget")
        yield* TestClock.adjust(14 * HOUR)
        assert.deepStrictEqual((yield* f.state).sessions, [])
        admitted(yield* f.admit({ reserve: 400, session }))
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

    test("200 parallel requests against a limit of 50 admit exactly 50", (f) =>
      Effect.gen(function* () {
        yield* TestClock.setTime(5_000)
        const results = yield* Effect.all(
          Array.from({ length: 200 }, () =>
            f.admit({ requestsPerMinute: 50, tokensPerMinute: 100_000, tokenCost: 7 }),
          ),
          { concurrency: "unbounded" },
        )
        assert.strictEqual(results.filter((r) => r._tag === "Admitted").length, 50)
        assert.deepStrictEqual((yield* f.state).requests, { current: 50, previous: 0 })
        assert.deepStrictEqual((yield* f.state).tokens, { current: 350, previous: 0 })
      }))
  })
