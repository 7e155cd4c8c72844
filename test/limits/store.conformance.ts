/**
 * One conformance suite for every limit store (limits-and-budgets.md): the
 * memory and Redis stores must answer identically. Time comes from
 * `TestClock`; each test uses its own tenant. Rate limits here, budgets and
 * sessions in `store.budgets.ts`, the per-tenant session cap in `store.sessionCap.ts`.
 */
import { assert, describe } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { TestClock } from "effect/testing"
import { Store } from "../../src/limits/Store.js"
import { budgetCases, periodBudgetCases } from "./store.budgets.js"
import { sessionCapCases } from "./store.sessionCap.js"
import { admitted, admitUntilRefused, hard, refusedWith, storeTest } from "./store.fixture.js"

/** Runs the suite against the store the `layer` builds (a fresh one per test). */
export const storeSuite = (name: string, layer: () => Layer.Layer<Store, unknown>) =>
  describe(`Store conformance: ${name}`, () => {
    const test = storeTest(name, layer)

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

    test("admissions report the settled month spend (reservations left out) for admission before the body", (f) =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.UTC(2026, 11, 3))
        const first = admitted(yield* f.admit({ reserve: 300, month: hard(1_000) }))
        assert.strictEqual(first.monthSpend, 0)
        // Open reservations are not spend.
        assert.strictEqual(admitted(yield* f.admit({ reserve: 300, month: hard(1_000) })).monthSpend, 0)
        yield* f.settle(first, { reserved: 300, cost: 250 })
        assert.strictEqual(admitted(yield* f.admit({ reserve: 100, month: hard(1_000) })).monthSpend, 250)
        // A budget refusal reports it too; a refusal before the month is read does not.
        assert.strictEqual(
          refusedWith(yield* f.admit({ reserve: 900, month: hard(1_000) }), "month").monthSpend,
          250,
        )
        admitted(yield* f.admit({ requestsPerMinute: 5 }))
        for (let i = 0; i < 5; i++) yield* f.admit({ requestsPerMinute: 5 })
        assert.strictEqual(
          refusedWith(yield* f.admit({ requestsPerMinute: 5 }), "requests").monthSpend,
          undefined,
        )
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
        refusedWith(yield* f.admit({ ...wide, tokenCost: 0, reserve: 6 }), "month")
        const session = { id: "s", budget: hard(1) }
        refusedWith(yield* f.admit({ ...wide, tokenCost: 0, reserve: 5, session }), "session")
      }))

    test("a refused request counts nothing: no rate counter, no reservation, no session", (f) =>
      Effect.gen(function* () {
        const limits = { requestsPerMinute: 10, tokensPerMinute: 1000, tokenCost: 50 }
        refusedWith(yield* f.admit({ ...limits, reserve: 200, month: hard(100) }), "month")
        const session = { id: "sess-1", budget: hard(100) }
        refusedWith(yield* f.admit({ ...limits, reserve: 200, session }), "session")
        const state = yield* f.state
        assert.deepStrictEqual(state.requests, { current: 0, previous: 0 })
        assert.deepStrictEqual(state.tokens, { current: 0, previous: 0 })
        assert.strictEqual(state.monthReserved, 0)
        assert.deepStrictEqual(state.sessions, [])
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

    test("remembers who made a response, and knows nothing of other ids", () =>
      Effect.gen(function* () {
        const store = yield* Store
        const id = `resp_${name}_${Math.random().toString(36).slice(2)}`
        yield* store.rememberResponse(id, { tenant: "acme", provider: "openai-b" }, 1_000)
        assert.deepStrictEqual(yield* store.responseOwner(id, 2_000), {
          tenant: "acme",
          provider: "openai-b",
        })
        assert.strictEqual(yield* store.responseOwner(`${id}-other`, 2_000), undefined)
        // Remembering again replaces the owner (a retried request may be answered by another provider).
        yield* store.rememberResponse(id, { tenant: "acme", provider: "openai-a" }, 3_000)
        assert.deepStrictEqual(yield* store.responseOwner(id, 4_000), {
          tenant: "acme",
          provider: "openai-a",
        })
      }))

    test("remembers a sticky session's target per tenant, route and session, for 24 h after its last use", () =>
      Effect.gen(function* () {
        const store = yield* Store
        const tenant = `sticky_${name}_${Math.random().toString(36).slice(2)}`
        const key = { tenant, route: "claude", session: "s-1" }
        const day = 24 * 60 * 60 * 1000
        assert.strictEqual(yield* store.sessionTarget(key, 1_000, 100), undefined)
        yield* store.rememberSessionTarget(key, "a\nclaude-sonnet-5-5", 1_000, 100)
        assert.strictEqual(yield* store.sessionTarget(key, 2_000, 100), "a\nclaude-sonnet-5-5")
        // Another route, session or tenant has its own.
        assert.strictEqual(yield* store.sessionTarget({ ...key, route: "other" }, 2_000, 100), undefined)
        assert.strictEqual(yield* store.sessionTarget({ ...key, session: "s-2" }, 2_000, 100), undefined)
        assert.strictEqual(
          yield* store.sessionTarget({ ...key, tenant: `${tenant}-b` }, 2_000, 100),
          undefined,
        )
        // A move replaces it.
        yield* store.rememberSessionTarget(key, "b\nclaude-sonnet-5-5", 3_000, 100)
        // A lookup is a use: found a moment before its lifetime ends, it lives a lifetime from then.
        assert.strictEqual(yield* store.sessionTarget(key, 3_000 + day - 1, 100), "b\nclaude-sonnet-5-5")
        assert.strictEqual(yield* store.sessionTarget(key, 3_000 + 2 * day - 2, 100), "b\nclaude-sonnet-5-5")
        // Unused for a whole lifetime: forgotten.
        assert.strictEqual(yield* store.sessionTarget(key, 3_000 + 3 * day - 2, 100), undefined)
        assert.strictEqual(yield* store.sessionTarget(key, 3_000 + 3 * day, 100), undefined)
      }))

    test("answers session-target lookups made at once (one script call of the turn on Redis), each its own", () =>
      Effect.gen(function* () {
        const store = yield* Store
        const tenant = `stickymany_${name}_${Math.random().toString(36).slice(2)}`
        const key = (session: string) => ({ tenant, route: "claude", session })
        for (let i = 0; i < 5; i++) yield* store.rememberSessionTarget(key(`s${i}`), `t${i}`, 1_000, 100)
        const found = yield* Effect.all(
          [0, 1, 2, 3, 4, 5].map((i) => store.sessionTarget(key(`s${i}`), 2_000, 100)),
          { concurrency: "unbounded" },
        )
        assert.deepStrictEqual(found, ["t0", "t1", "t2", "t3", "t4", undefined])
      }))

    test("keeps at most maxSessions session targets per tenant, forgetting the least recently used", () =>
      Effect.gen(function* () {
        const store = yield* Store
        const tenant = `stickycap_${name}_${Math.random().toString(36).slice(2)}`
        const key = (session: string) => ({ tenant, route: "claude", session })
        for (let i = 0; i < 5; i++) yield* store.rememberSessionTarget(key(`s${i}`), `t${i}`, 1_000 + i, 5)
        // s0 is used again, so s1 is now the least recently used.
        assert.strictEqual(yield* store.sessionTarget(key("s0"), 2_000, 5), "t0")
        yield* store.rememberSessionTarget(key("s5"), "t5", 3_000, 5)
        assert.strictEqual(yield* store.sessionTarget(key("s1"), 3_001, 5), undefined)
        for (const i of [0, 2, 3, 4, 5])
          assert.strictEqual(yield* store.sessionTarget(key(`s${i}`), 3_002, 5), `t${i}`, `s${i}`)
        // Another tenant's bound is its own.
        yield* store.rememberSessionTarget({ ...key("s0"), tenant: `${tenant}-b` }, "x", 3_003, 1)
        assert.strictEqual(yield* store.sessionTarget(key("s0"), 3_004, 5), "t0")
      }))

    budgetCases(test)
    periodBudgetCases(test)
    sessionCapCases(test)
  })
