import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { Redis } from "ioredis"
import { LEASE_MARGIN, LEASE_REQUESTS, LEASE_SLACK, layerRedis } from "../../src/limits/redisStore.js"
import { type Admitted, type AdmitRequest, Store, type StoreService } from "../../src/limits/Store.js"
import { type RedisHandle, startRedis } from "../support/redis.js"
import { periodic } from "./store.fixture.js"

/** Leases (ADR 0063): far from every limit one admission in LEASE_REQUESTS asks Redis; near one, every one does. */

let redis: RedisHandle
let raw: Redis

beforeAll(async () => {
  redis = await startRedis()
  raw = new Redis(redis.url)
})

afterAll(async () => {
  await raw?.quit()
  await redis?.stop()
})

/** Minute 5 of 1970: `tollgate:{T}:rq:5`. */
const NOW = 5 * 60_000 + 1_000

const request = (tenant: string, over: Partial<AdmitRequest> = {}): AdmitRequest => ({
  tenant,
  now: NOW,
  requestsPerMinute: 1_000_000,
  tokensPerMinute: 100_000_000,
  tokenCost: 10,
  reserve: 5,
  budgets: [periodic("month", undefined, { limit: 1_000_000_000, hard: true }, NOW)],
  session: undefined,
  maxSessions: 10_000,
  ...over,
})

/** Script calls Redis has run so far. */
const scriptCalls = async (): Promise<number> => {
  const info = await raw.info("commandstats")
  let calls = 0
  for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1])
  return calls
}

const counter = async (key: string): Promise<number> => Number((await raw.get(key)) ?? 0)
const reserved = async (tenant: string): Promise<number> =>
  Number((await raw.hget(`tollgate:{${tenant}}:month:1970-01`, "reserved")) ?? 0)
const spent = async (tenant: string): Promise<number> =>
  Number((await raw.hget(`tollgate:{${tenant}}:month:1970-01`, "spend")) ?? 0)

/** A store (one Tollgate copy) open until `scope` closes: closing it gives back what its leases have left. */
const openStore = (scope: Scope.Closeable) =>
  Effect.map(Layer.buildWithScope(layerRedis(redis.url), scope), (context) => Context.get(context, Store))

const admitAll = (store: StoreService, requests: ReadonlyArray<AdmitRequest>) =>
  Effect.forEach(requests, (r) => store.admit(r))

describe("Redis store leases", () => {
  it.live(
    "far from every limit one admission in 32 asks Redis, and closing the store gives back what its lease left",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const store = yield* openStore(scope)
        const before = yield* Effect.promise(scriptCalls)
        const answers = yield* admitAll(
          store,
          Array.from({ length: 40 }, () => request("far")),
        )
        assert.isTrue(answers.every((a) => a._tag === "Admitted"))
        // 40 admissions: a lease of 32 (this request and 31), then another for the last 8.
        assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 2)
        assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{far}:rq:5")), 2 * LEASE_REQUESTS)
        // A lease holds LEASE_SLACK times its requests' reservations; the first one's rest went back when it was spent.
        const secondLeft = (LEASE_REQUESTS * LEASE_SLACK - 8) * 5
        assert.strictEqual(yield* Effect.promise(() => reserved("far")), 40 * 5 + secondLeft)
        // Every admitted request settles as without a lease: its own reservation, its cost.
        yield* Effect.forEach(answers, (a) =>
          a._tag === "Admitted"
            ? store.settle({
                tenant: "far",
                now: NOW,
                minute: a.minute,
                budgets: request("far").budgets,
                sessionId: undefined,
                reserved: 5,
                cost: 3,
                tokenDelta: 2,
              })
            : Effect.void,
        )
        // What the second lease did not use.
        assert.strictEqual(yield* Effect.promise(() => reserved("far")), secondLeft)
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{far}:rq:5")), 40)
        assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{far}:tk:5")), 40 * (10 + 2))
        assert.strictEqual(yield* Effect.promise(() => reserved("far")), 0)
        assert.strictEqual(yield* Effect.promise(() => spent("far")), 40 * 3)
      }),
  )

  it.live(
    "when a lease is spent, the requests that come while the next one is asked for wait for it instead of asking Redis",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const store = yield* openStore(scope)
        // One lease, spent to the last request.
        yield* admitAll(
          store,
          Array.from({ length: LEASE_REQUESTS }, () => request("waits")),
        )
        const before = yield* Effect.promise(scriptCalls)
        // 20 admissions started in the same turn: the first asks for a lease, the other 19 take from it.
        const answers = yield* Effect.forEach(
          Array.from({ length: 20 }, () => store.admit(request("waits"))),
          (effect) => effect,
          { concurrency: "unbounded" },
        )
        assert.isTrue(answers.every((a) => a._tag === "Admitted"))
        assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 1)
        assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{waits}:rq:5")), 2 * LEASE_REQUESTS)
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{waits}:rq:5")), LEASE_REQUESTS + 20)
      }),
  )

  it.live("near a limit, with a session budget, or in a new minute, an admission asks Redis", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const store = yield* openStore(scope)
      // A request limit below LEASE_REQUESTS × LEASE_MARGIN: every admission is counted on its own.
      const limited = request("near", { requestsPerMinute: LEASE_REQUESTS * LEASE_MARGIN - 1 })
      let before = yield* Effect.promise(scriptCalls)
      yield* admitAll(
        store,
        Array.from({ length: 10 }, () => limited),
      )
      assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 10)
      assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{near}:rq:5")), 10)
      // A hard budget with less than LEASE_MARGIN leases' worth of room: the same.
      const budget = request("near-budget", {
        budgets: [
          periodic("month", undefined, { limit: LEASE_REQUESTS * LEASE_MARGIN * 5 - 1, hard: true }, NOW),
        ],
      })
      before = yield* Effect.promise(scriptCalls)
      yield* admitAll(
        store,
        Array.from({ length: 10 }, () => budget),
      )
      assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 10)
      assert.strictEqual(yield* Effect.promise(() => reserved("near-budget")), 50)
      // A session budget is checked against the session's own spend: never leased.
      const session = request("session", {
        session: { id: "s-1", budget: { limit: 1_000_000, hard: false } },
      })
      before = yield* Effect.promise(scriptCalls)
      yield* admitAll(
        store,
        Array.from({ length: 5 }, () => session),
      )
      assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 5)
      // The next minute has its own counters: a new lease.
      yield* store.admit(request("minutes"))
      before = yield* Effect.promise(scriptCalls)
      yield* store.admit(request("minutes"))
      assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 0)
      yield* store.admit(request("minutes", { now: NOW + 60_000 }))
      assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 1)
      assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{minutes}:rq:6")), LEASE_REQUESTS)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{minutes}:rq:5")), 2)
      assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{minutes}:rq:6")), 1)
    }),
  )

  it.live(
    "sessions without a budget are leased: each is written when its request settles, started there and evicting beyond the most",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const store = yield* openStore(scope)
        const sessionKey = (tenant: string, id: string) => `tollgate:{${tenant}}:session:${id}`
        const settleAll = (
          tenant: string,
          ids: ReadonlyArray<string>,
          answers: ReadonlyArray<unknown>,
          most: number,
        ) =>
          Effect.forEach(answers, (answer, i) => {
            const a = answer as Admitted
            assert.strictEqual(a._tag, "Admitted")
            return store.settle({
              tenant,
              now: NOW + 1 + i,
              minute: a.minute,
              budgets: request(tenant).budgets,
              sessionId: ids[i],
              reserved: 5,
              cost: 3,
              tokenDelta: 0,
              sessionAtSettle:
                a.sessionAtSettle === undefined
                  ? undefined
                  : { unreserved: a.sessionAtSettle, maxSessions: most },
            })
          })

        const ids = Array.from({ length: 40 }, (_, i) => `s-${i}`)
        const before = yield* Effect.promise(scriptCalls)
        const answers = yield* admitAll(
          store,
          ids.map((id) => request("sessions", { session: { id, budget: undefined } })),
        )
        // As without sessions: a lease of 32, then another for the last 8.
        assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 2)
        // The requests that asked wrote their sessions; the leased ones did not, and say what the session lacks.
        assert.strictEqual((answers[0] as Admitted).sessionAtSettle, undefined)
        assert.strictEqual((answers[1] as Admitted).sessionAtSettle, 5)
        assert.strictEqual(yield* Effect.promise(() => raw.exists(sessionKey("sessions", "s-0"))), 1)
        assert.strictEqual(yield* Effect.promise(() => raw.exists(sessionKey("sessions", "s-1"))), 0)
        const evicted = yield* settleAll("sessions", ids, answers, 10_000)
        assert.deepStrictEqual(
          evicted,
          ids.map(() => 0),
        )
        // Settled, every session holds its cost, no reservation, and its last use; the index has all 40.
        for (const [i, id] of ids.entries()) {
          const [spend, held, last] = yield* Effect.promise(() =>
            raw.hmget(sessionKey("sessions", id), "spend", "reserved", "last"),
          )
          assert.deepStrictEqual([spend, held, last], ["3", "0", String(NOW + 1 + i)], id)
        }
        assert.strictEqual(yield* Effect.promise(() => raw.zcard("tollgate:{sessions}:sessions")), 40)

        // At most 3 live sessions: the leased ones start at settle and evict the least recently used.
        const capped = ["c-0", "c-1", "c-2", "c-3", "c-4"]
        const cappedAnswers = yield* admitAll(
          store,
          capped.map((id) => request("capped", { session: { id, budget: undefined }, maxSessions: 3 })),
        )
        const cappedEvicted = yield* settleAll("capped", capped, cappedAnswers, 3)
        assert.deepStrictEqual(cappedEvicted, [0, 0, 0, 1, 1])
        assert.deepStrictEqual(
          yield* Effect.promise(() => raw.zrange("tollgate:{capped}:sessions", "0", "-1")),
          ["c-2", "c-3", "c-4"],
        )
        assert.strictEqual(yield* Effect.promise(() => raw.exists(sessionKey("capped", "c-0"))), 0)
        yield* Scope.close(scope, Exit.void)
      }),
  )

  it.live(
    "a leased request's settle answers at once; the settlements of SETTLE_DEFER_MS go to Redis merged, in one script call, and closing the store sends what waits",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const store = yield* openStore(scope)
        const answers = (yield* admitAll(
          store,
          Array.from({ length: 20 }, () => request("deferred")),
        )) as ReadonlyArray<Admitted>
        // The asking request and the 19 its lease admitted are all leased.
        assert.isTrue(answers.every((a) => a._tag === "Admitted" && a.leased === true))
        const leaseLeft = (LEASE_REQUESTS * LEASE_SLACK - 20) * 5
        assert.strictEqual(yield* Effect.promise(() => reserved("deferred")), 20 * 5 + leaseLeft)
        const evictedTold: Array<number> = []
        const settle = (a: Admitted, i: number) =>
          store.settle({
            tenant: "deferred",
            now: NOW + i,
            minute: a.minute,
            budgets: request("deferred").budgets,
            sessionId: undefined,
            reserved: 5,
            cost: 3,
            tokenDelta: 2,
            leased: a.leased,
            evicted: (_tenant, count) => evictedTold.push(count),
          })
        const before = yield* Effect.promise(scriptCalls)
        const replies = yield* Effect.forEach(answers, settle)
        assert.deepStrictEqual(
          replies,
          answers.map(() => 0),
        )
        // Answered before Redis was written: nothing settled yet.
        assert.strictEqual(yield* Effect.promise(() => spent("deferred")), 0)
        // Within SETTLE_DEFER_MS (polled, generous bound): all 20 in one script call, the sums exact.
        const deadline = Date.now() + 5_000
        while ((yield* Effect.promise(() => spent("deferred"))) !== 20 * 3 && Date.now() < deadline)
          yield* Effect.sleep("10 millis")
        assert.strictEqual(yield* Effect.promise(() => spent("deferred")), 20 * 3)
        assert.strictEqual(yield* Effect.promise(() => reserved("deferred")), leaseLeft)
        // The lease counted LEASE_SLACK times its requests' tokens; each settlement added its delta.
        assert.strictEqual(
          yield* Effect.promise(() => counter("tollgate:{deferred}:tk:5")),
          LEASE_REQUESTS * LEASE_SLACK * 10 + 20 * 2,
        )
        assert.strictEqual((yield* Effect.promise(scriptCalls)) - before, 1)
        assert.deepStrictEqual(evictedTold, [])

        // Deferred settlements that start sessions beyond the most evict, and say so to `evicted`.
        const capped = ["c-0", "c-1", "c-2", "c-3", "c-4"]
        const cappedAnswers = (yield* admitAll(
          store,
          capped.map((id) =>
            request("deferred-capped", { session: { id, budget: undefined }, maxSessions: 3 }),
          ),
        )) as ReadonlyArray<Admitted>
        yield* Effect.forEach(cappedAnswers, (a, i) =>
          store.settle({
            tenant: "deferred-capped",
            now: NOW + i,
            minute: a.minute,
            budgets: request("deferred-capped").budgets,
            sessionId: capped[i],
            reserved: 5,
            cost: 3,
            tokenDelta: 0,
            sessionAtSettle:
              a.sessionAtSettle === undefined ? undefined : { unreserved: a.sessionAtSettle, maxSessions: 3 },
            leased: a.leased,
            evicted: (_tenant, count) => evictedTold.push(count),
          }),
        )
        const cappedBy = Date.now() + 5_000
        while (evictedTold.length < 2 && Date.now() < cappedBy) yield* Effect.sleep("10 millis")
        assert.deepStrictEqual(evictedTold, [1, 1])
        assert.deepStrictEqual(
          yield* Effect.promise(() => raw.zrange("tollgate:{deferred-capped}:sessions", "0", "-1")),
          ["c-2", "c-3", "c-4"],
        )

        // Settled and closed at once: the store sends the waiting settlements before it gives the lease back.
        const more = (yield* admitAll(store, [request("deferred")])) as ReadonlyArray<Admitted>
        yield* settle(more[0]!, 20)
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(yield* Effect.promise(() => spent("deferred")), 21 * 3)
        assert.strictEqual(yield* Effect.promise(() => reserved("deferred")), 0)
        assert.strictEqual(yield* Effect.promise(() => counter("tollgate:{deferred}:rq:5")), 21)
      }),
  )

  it.live(
    "two copies on one hard budget never reserve past it, and each stops only when less than a lease's worth is left to it",
    () =>
      Effect.gen(function* () {
        const limit = 1_000_000
        const reserve = 100
        const scopes = [yield* Scope.make(), yield* Scope.make()]
        const stores = [yield* openStore(scopes[0]!), yield* openStore(scopes[1]!)]
        const ask = request("shared", {
          reserve,
          budgets: [periodic("month", undefined, { limit, hard: true }, NOW)],
        })
        const admitted = [0, 0]
        const refused = [false, false]
        // The two copies take turns until both are refused.
        for (let turn = 0; !(refused[0] && refused[1]); turn++) {
          const copy = turn % 2
          if (refused[copy]) continue
          const answer = yield* stores[copy]!.admit(ask)
          if (answer._tag === "Admitted") admitted[copy]!++
          else {
            assert.strictEqual(answer.reason, "budget")
            refused[copy] = true
          }
        }
        const total = admitted[0]! + admitted[1]!
        assert.isAtMost(total * reserve, limit)
        // Refused only once the budget, less the copies' unused leases, had no room left.
        assert.isAtLeast(total * reserve, limit - 2 * (LEASE_REQUESTS * LEASE_SLACK - 1) * reserve)
        for (const scope of scopes) yield* Scope.close(scope, Exit.void)
        assert.strictEqual(yield* Effect.promise(() => reserved("shared")), total * reserve)
      }),
  )
})
