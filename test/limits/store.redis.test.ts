import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Clock, Context, Effect, Layer, Result, Schedule } from "effect"
import { Redis } from "ioredis"
import { Socket } from "node:net"
import { layerRedis } from "../../src/limits/redisStore.js"
import { type AdmitRequest, Store, StoreError } from "../../src/limits/Store.js"
import { type RedisHandle, startRedis } from "../support/redis.js"
import { storeSuite } from "./store.conformance.js"
import { periodic } from "./store.fixture.js"

let redis: RedisHandle

beforeAll(async () => {
  redis = await startRedis()
})

afterAll(async () => {
  await redis?.stop()
})

// The conformance suite checks exact counters against the memory store: leases (ADR 0063) off here, on in store.lease.test.ts.
storeSuite("redis", () => layerRedis(redis.url, { leaseRequests: 1 }))

const request = (tenant: string, now: number): AdmitRequest => ({
  tenant,
  now,
  requestsPerMinute: 100,
  tokensPerMinute: 10_000,
  tokenCost: 10,
  reserve: 5,
  budgets: [
    periodic("day", "ci/1", { limit: 1_000_000, hard: true }, now),
    periodic("week", undefined, { limit: 1_000_000, hard: false }, now),
    periodic("month", undefined, { limit: 1_000_000, hard: false }, now),
  ],
  session: { id: "s}{1", budget: undefined },
  maxSessions: 10_000,
})

/** A raw client for looking at the keys the store wrote. */
const rawClient = Effect.acquireRelease(
  Effect.sync(() => new Redis(redis.url)),
  (client) => Effect.promise(() => client.quit()),
)

/**
 * Counts the writes to the Redis at `port` (by kind: `write` of one chunk, `writev` of several) until `stop`
 * of the sockets that sent a script call (EVALSHA or EVAL) meanwhile: what the store sent, as the socket handed
 * it to the OS. Other connections are left out: a client of an earlier test that connects in the window (its
 * ready check, an INFO) is not the store.
 */
const countWritesTo = (port: number) =>
  Effect.sync(() => {
    const socket = Socket.prototype as unknown as {
      _write: (this: Socket, ...args: Array<unknown>) => void
      _writev: (this: Socket, chunks: Array<unknown>, ...args: Array<unknown>) => void
    }
    const { _write: write, _writev: writev } = socket
    const bySocket = new Map<Socket, { writes: number; writevs: number; chunks: number; script: boolean }>()
    const of = (s: Socket) => {
      let entry = bySocket.get(s)
      if (entry === undefined) bySocket.set(s, (entry = { writes: 0, writevs: 0, chunks: 0, script: false }))
      return entry
    }
    const scriptCall = (chunk: unknown) => /^\*\d+\r\n\$(?:7\r\nevalsha|4\r\neval)\r\n/i.test(String(chunk))
    socket._write = function (...args) {
      if (this.remotePort === port) {
        const entry = of(this)
        entry.writes++
        if (scriptCall(args[0])) entry.script = true
      }
      write.apply(this, args)
    }
    socket._writev = function (chunks, ...args) {
      if (this.remotePort === port) {
        const entry = of(this)
        entry.writevs++
        entry.chunks += chunks.length
        if (chunks.some((c) => scriptCall((c as { chunk?: unknown }).chunk ?? c))) entry.script = true
      }
      writev.call(this, chunks, ...args)
    }
    const counts = { writes: 0, writevs: 0, chunks: 0 }
    return {
      counts,
      stop: () => {
        socket._write = write
        socket._writev = writev
        for (const entry of bySocket.values()) {
          if (!entry.script) continue
          counts.writes += entry.writes
          counts.writevs += entry.writevs
          counts.chunks += entry.chunks
        }
      },
    }
  })

/** Calls of `commands` Redis has run so far (scripts' own calls included), from INFO commandstats. */
const commandCalls = (client: Redis, commands: ReadonlyArray<string>) =>
  Effect.promise(async () => {
    const info = await client.info("commandstats")
    let calls = 0
    for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
      if (commands.includes(match[1]!)) calls += Number(match[2])
    }
    return calls
  })

/** Script calls (EVALSHA and EVAL) Redis has run so far. */
const scriptCalls = (client: Redis) => commandCalls(client, ["evalsha", "eval"])

/** `n` store calls issued in the same event-loop turn (all started before any answer), their results in call order. */
const inOneTurn = <A, E>(n: number, call: (i: number) => Effect.Effect<A, E>) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => call(i)),
    (effect) => effect,
    { concurrency: "unbounded" },
  )

/**
 * What `lookup` answers once the background read it started has landed: tried every 10 ms for up to 5 s
 * (real time) until it answers `expected`; the last answer otherwise.
 */
const answerOnceRead = <A, E>(lookup: () => Effect.Effect<A, E>, expected: A) =>
  Effect.gen(function* () {
    let answer = yield* lookup()
    for (let tries = 0; tries < 500 && answer !== expected; tries++) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      answer = yield* lookup()
    }
    return answer
  })

const admitWhenBack = (tenant: string) =>
  Effect.gen(function* () {
    const store = yield* Store
    const now = yield* Clock.currentTimeMillis
    return yield* store
      .admit(request(tenant, now))
      .pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo({ duration: "15 seconds" }))))
  })

describe("Redis store", () => {
  it.effect(
    "every key carries a hash tag — a tenant's keys the tenant — encoded so braces cannot break it",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const tenant = "we}ird{tenant"
        const admission = request(tenant, 90_000)
        yield* store.admit(admission)
        yield* store.settle({
          tenant,
          now: 91_000,
          minute: 1,
          budgets: admission.budgets,
          sessionId: "s}{1",
          reserved: 5,
          cost: 4,
          tokenDelta: 1,
        })
        const client = yield* rawClient
        const keys = (yield* Effect.promise(() => client.keys("*we%7Dird%7Btenant*"))).sort()
        assert.deepStrictEqual(keys, [
          "tollgate:{we%7Dird%7Btenant}:key:ci%2F1:day:1970-01-01",
          "tollgate:{we%7Dird%7Btenant}:month:1970-01",
          "tollgate:{we%7Dird%7Btenant}:rq:1",
          "tollgate:{we%7Dird%7Btenant}:session:s}{1",
          "tollgate:{we%7Dird%7Btenant}:sessions",
          "tollgate:{we%7Dird%7Btenant}:tk:1",
          "tollgate:{we%7Dird%7Btenant}:week:1970-W01",
        ])
        for (const key of yield* Effect.promise(() => client.keys("*"))) {
          assert.match(key, /^tollgate:\{[^{}]+\}:/)
        }
        const ttl = yield* Effect.promise(() => client.pttl("tollgate:{we%7Dird%7Btenant}:rq:1"))
        assert.isTrue(ttl > 120_000 && ttl <= 180_000, `counter PTTL ${ttl}`)
        // A day's spend lives until 2 days after the day ends (written at 91 s into 1970-01-01).
        const dayTtl = yield* Effect.promise(() =>
          client.pttl("tollgate:{we%7Dird%7Btenant}:key:ci%2F1:day:1970-01-01"),
        )
        const dayPx = 3 * 86_400_000 - 91_000
        assert.isTrue(dayTtl > dayPx - 10_000 && dayTtl <= dayPx, `day PTTL ${dayTtl}`)
        const state = yield* store.tenantState(tenant, 91_000)
        assert.deepStrictEqual(state.sessions, [{ id: "s}{1", spend: 4, reserved: 0, lastMs: 91_000 }])
        assert.deepStrictEqual(state.tokens, { current: 11, previous: 0 })
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.effect("an evicted session's hash is deleted with its index entry, by its hash-tagged key name", () =>
    Effect.gen(function* () {
      const store = yield* Store
      const tenant = "cap}{tenant"
      const session = (id: string, now: number) =>
        store.admit({ ...request(tenant, now), session: { id, budget: undefined }, maxSessions: 2 })
      yield* session("old{}", 90_000)
      yield* session("mid", 91_000)
      const result = yield* session("new", 92_000)
      assert.strictEqual(result._tag === "Admitted" ? result.sessionsEvicted : -1, 1)
      const client = yield* rawClient
      const keys = (yield* Effect.promise(() => client.keys("*cap%7D%7Btenant*"))).sort()
      assert.deepStrictEqual(
        keys.filter((key) => key.includes(":session")),
        [
          "tollgate:{cap%7D%7Btenant}:session:mid",
          "tollgate:{cap%7D%7Btenant}:session:new",
          "tollgate:{cap%7D%7Btenant}:sessions",
        ],
      )
      const index = yield* Effect.promise(() =>
        client.zrange("tollgate:{cap%7D%7Btenant}:sessions", "0", "-1"),
      )
      assert.deepStrictEqual(index, ["mid", "new"])
    }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.effect(
    "a copy answers a session's target from what it read or wrote for 1 s, reads it again in the background after 0.5 s, and sees another copy's move within 1 s",
    () =>
      Effect.gen(function* () {
        const raw = yield* rawClient
        // Two copies of the gateway on one Redis.
        const a = Context.get(yield* Layer.build(layerRedis(redis.url, { leaseRequests: 1 })), Store)
        const b = Context.get(yield* Layer.build(layerRedis(redis.url, { leaseRequests: 1 })), Store)
        const key = {
          tenant: `known_${Math.random().toString(36).slice(2)}`,
          route: "claude",
          session: "s-1",
        }
        const at = 1_000_000
        yield* a.rememberSessionTarget(key, "a\nm", at, 100)
        // Its writer knows it at once, without asking.
        let before = yield* scriptCalls(raw)
        assert.strictEqual(yield* a.sessionTarget(key, at + 10, 100), "a\nm")
        assert.strictEqual((yield* scriptCalls(raw)) - before, 0)
        // The other copy reads it once, then answers from what it read.
        before = yield* scriptCalls(raw)
        assert.strictEqual(yield* b.sessionTarget(key, at + 100, 100), "a\nm")
        for (const t of [at + 200, at + 400, at + 599])
          assert.strictEqual(yield* b.sessionTarget(key, t, 100), "a\nm")
        assert.strictEqual((yield* scriptCalls(raw)) - before, 1)
        // a moves the session; b still answers what it read (at most 1 s old) ...
        yield* a.rememberSessionTarget(key, "b\nm", at + 650, 100)
        before = yield* scriptCalls(raw)
        assert.strictEqual(yield* b.sessionTarget(key, at + 700, 100), "a\nm")
        // ... which was read 0.6 s ago: read again in the background (once), and the next lookups have the move.
        assert.strictEqual(yield* answerOnceRead(() => b.sessionTarget(key, at + 750, 100), "b\nm"), "b\nm")
        assert.strictEqual((yield* scriptCalls(raw)) - before, 1)
        // A lookup 1 s after the last read asks Redis before it answers: a copy never answers older than 1 s.
        yield* a.rememberSessionTarget(key, "c\nm", at + 800, 100)
        assert.strictEqual(yield* b.sessionTarget(key, at + 1_700, 100), "c\nm")
        assert.strictEqual((yield* scriptCalls(raw)) - before, 3)
        // A target Redis forgot (here deleted outright) is forgotten by the background read (then one read
        // finds none).
        yield* Effect.promise(() => raw.del(`tollgate:{${key.tenant}}:targets`))
        before = yield* scriptCalls(raw)
        assert.strictEqual(yield* b.sessionTarget(key, at + 2_300, 100), "c\nm")
        assert.strictEqual(
          yield* answerOnceRead(() => b.sessionTarget(key, at + 2_400, 100), undefined),
          undefined,
        )
        assert.strictEqual((yield* scriptCalls(raw)) - before, 2)
      }),
  )

  it.effect("a copy keeps what it knows of at most maxSessions of a tenant's sessions", () =>
    Effect.gen(function* () {
      const raw = yield* rawClient
      const store = yield* Store
      const tenant = `knowncap_${Math.random().toString(36).slice(2)}`
      const key = (session: string) => ({ tenant, route: "claude", session })
      const at = 2_000_000
      for (let i = 0; i < 5; i++) yield* store.rememberSessionTarget(key(`s${i}`), `t${i}`, at, 3)
      // Redis keeps the 3 most recent; this copy knows those 3 too, and asks for the others.
      const before = yield* scriptCalls(raw)
      for (const i of [2, 3, 4])
        assert.strictEqual(yield* store.sessionTarget(key(`s${i}`), at + 1, 3), `t${i}`)
      assert.strictEqual((yield* scriptCalls(raw)) - before, 0)
      for (const i of [0, 1])
        assert.strictEqual(yield* store.sessionTarget(key(`s${i}`), at + 1, 3), undefined)
      assert.strictEqual((yield* scriptCalls(raw)) - before, 2)
    }).pipe(Effect.provide(layerRedis(redis.url, { leaseRequests: 1 }))),
  )

  it.live("the layer builds while Redis is down, fails fast, and recovers when Redis is back", () =>
    Effect.gen(function* () {
      yield* Effect.promise(() => redis.stop())
      const url = `redis://:s3cret-pass@127.0.0.1:${redis.port}/0`
      const store = Context.get(yield* Layer.build(layerRedis(url)), Store)
      const started = yield* Clock.currentTimeMillis
      const result = yield* Effect.result(store.admit(request("down-at-start", started)))
      const elapsed = (yield* Clock.currentTimeMillis) - started
      assert.isTrue(Result.isFailure(result) && result.failure instanceof StoreError)
      if (Result.isFailure(result)) assert.notInclude(result.failure.message, "s3cret")
      assert.isBelow(elapsed, 2_000)
      yield* Effect.promise(() => redis.restart())
      const back = yield* admitWhenBack("down-at-start").pipe(Effect.provideService(Store, store))
      assert.strictEqual(back._tag, "Admitted")
    }),
  )

  it.effect(
    "the calls of one event-loop turn go to Redis as one script call in one write, and each gets its own answer",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const raw = yield* rawClient
        // The scripts are loaded on the connection: what follows are plain EVALSHA calls.
        yield* store.admit(request("warm-up", 120_000))
        yield* inOneTurn(2, () => store.admit(request("warm-up", 120_000)))
        // 120 admissions issued in the same turn against a limit of 100 requests a minute.
        const before = yield* scriptCalls(raw)
        const writes = yield* countWritesTo(redis.port)
        const results = yield* inOneTurn(120, () => store.admit(request("batched", 120_000)))
        writes.stop()
        assert.deepStrictEqual(writes.counts, { writes: 1, writevs: 0, chunks: 0 })
        assert.strictEqual((yield* scriptCalls(raw)) - before, 1)
        assert.strictEqual(results.filter((r) => r._tag === "Admitted").length, 100)
        assert.deepStrictEqual(
          results.slice(100).map((r) => (r._tag === "Refused" ? r.reason : r._tag)),
          Array.from({ length: 20 }, () => "requests"),
        )
        // Each admitted call saw its own count: 1, 2, …, 100 in the order of the calls.
        assert.deepStrictEqual(
          results.slice(0, 100).map((r) => r.requests?.current),
          Array.from({ length: 100 }, (_, i) => i + 1),
        )
        assert.strictEqual((yield* store.tenantState("batched", 120_000)).requests.current, 100)
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.effect(
    "admissions and settlements of two tenants in one turn are one script call, run in call order",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const raw = yield* rawClient
        const now = 120_000
        const settle = (tenant: string, cost: number) =>
          store.settle({
            tenant,
            now,
            minute: 2,
            budgets: request(tenant, now).budgets,
            sessionId: "s}{1",
            reserved: 5,
            cost,
            tokenDelta: 0,
          })
        yield* store.admit(request("mix-a", now))
        yield* store.admit(request("mix-a", now))
        const before = yield* scriptCalls(raw)
        const results = yield* Effect.all(
          [
            settle("mix-a", 4),
            store.admit(request("mix-a", now)),
            store.admit(request("mix-b", now)),
            settle("mix-a", 3),
          ],
          { concurrency: "unbounded" },
        )
        assert.strictEqual((yield* scriptCalls(raw)) - before, 1)
        // The third admission of mix-a counts after the two before it; mix-b's is its first.
        assert.strictEqual(results[1]._tag === "Admitted" && results[1].requests?.current, 3)
        assert.strictEqual(results[2]._tag === "Admitted" && results[2].requests?.current, 1)
        const month = (tenant: string) =>
          Effect.map(
            store.tenantState(tenant, now, request(tenant, now).budgets),
            (state) => state.budgets[2],
          )
        // mix-a: 4 + 3 spent, one reservation of 5 left (the third admission); mix-b: its reservation.
        assert.deepStrictEqual(yield* month("mix-a"), { spend: 7, reserved: 5 })
        assert.deepStrictEqual(yield* month("mix-b"), { spend: 0, reserved: 5 })
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.effect(
    "settlements of one turn with the same budgets merge into one: the sums as one after the other",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const raw = yield* rawClient
        const now = 180_000
        const admission: AdmitRequest = { ...request("merge", now), session: undefined }
        for (let i = 0; i < 4; i++) assert.strictEqual((yield* store.admit(admission))._tag, "Admitted")
        const settle = (cost: number, tokenDelta: number) =>
          store.settle({
            tenant: "merge",
            now,
            minute: 3,
            budgets: admission.budgets,
            sessionId: undefined,
            reserved: 5,
            cost,
            tokenDelta,
          })
        const before = yield* commandCalls(raw, ["hset"])
        yield* Effect.all([settle(4, 2), settle(3, -1), settle(2, 5)], { concurrency: "unbounded" })
        // One settle's writes: one HSET per budget (three), not nine.
        assert.strictEqual((yield* commandCalls(raw, ["hset"])) - before, 3)
        const state = yield* store.tenantState("merge", now, admission.budgets)
        // Four reservations of 5, three settled (4 + 3 + 2 spent), one still open.
        for (const budget of state.budgets) assert.deepStrictEqual(budget, { spend: 9, reserved: 5 })
        // Four admissions of 10 tokens each, then +2 − 1 + 5.
        assert.strictEqual(state.tokens.current, 46)
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.effect(
    "settlements of one session in one turn merge too: its spend summed, its last request the latest",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const raw = yield* rawClient
        const now = 240_000
        const admission = request("merge-session", now)
        for (let i = 0; i < 4; i++) assert.strictEqual((yield* store.admit(admission))._tag, "Admitted")
        const settle = (cost: number, at: number) =>
          store.settle({
            tenant: "merge-session",
            now: at,
            minute: 4,
            budgets: admission.budgets,
            sessionId: "s}{1",
            reserved: 5,
            cost,
            tokenDelta: 0,
          })
        const before = yield* commandCalls(raw, ["hset"])
        yield* Effect.all([settle(4, now + 30), settle(3, now + 10), settle(2, now + 20)], {
          concurrency: "unbounded",
        })
        // One settle's writes: three budgets and the session.
        assert.strictEqual((yield* commandCalls(raw, ["hset"])) - before, 4)
        const state = yield* store.tenantState("merge-session", now + 30, admission.budgets)
        assert.deepStrictEqual(state.sessions, [{ id: "s}{1", spend: 9, reserved: 5, lastMs: now + 30 }])
        for (const budget of state.budgets) assert.deepStrictEqual(budget, { spend: 9, reserved: 5 })
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.effect(
    "a batch whose scripts Redis forgot (SCRIPT FLUSH) is resent, in order, and every call succeeds",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const raw = yield* rawClient
        yield* store.admit(request("flushed", 120_000))
        yield* Effect.promise(() => raw.script("FLUSH"))
        const results = yield* inOneTurn(50, () => store.admit(request("flushed", 120_000)))
        assert.deepStrictEqual(
          results.map((r) => r.requests?.current),
          Array.from({ length: 50 }, (_, i) => i + 2),
        )
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.live("a connection lost while a batch is held fails the batch at once, and the next batch works", () =>
    Effect.gen(function* () {
      const store = yield* Store
      yield* store.admit(request("lost", 120_000))
      // The connection breaks right after the store held it for this turn's batch.
      const socket = Socket.prototype
      const cork = socket.cork
      let broken = false
      socket.cork = function (this: Socket) {
        cork.call(this)
        if (!broken && this.remotePort === redis.port) {
          broken = true
          queueMicrotask(() => this.destroy())
        }
      }
      const started = yield* Clock.currentTimeMillis
      const results = yield* inOneTurn(40, () => Effect.result(store.admit(request("lost", 120_000)))).pipe(
        Effect.ensuring(Effect.sync(() => (socket.cork = cork))),
      )
      assert.isTrue(broken)
      assert.isTrue(results.every((r) => Result.isFailure(r) && r.failure._tag === "StoreError"))
      assert.isBelow((yield* Clock.currentTimeMillis) - started, 1_000)
      assert.strictEqual((yield* admitWhenBack("lost"))._tag, "Admitted")
      const writes = yield* countWritesTo(redis.port)
      const again = yield* inOneTurn(10, () => store.admit(request("lost", 120_000)))
      writes.stop()
      assert.isTrue(again.every((r) => r._tag === "Admitted"))
      assert.deepStrictEqual(writes.counts, { writes: 1, writevs: 0, chunks: 0 })
    }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.live(
    "a Redis that stops answering fails every operation in flight within 2 s and is used again once it answers",
    () =>
      Effect.gen(function* () {
        const store = yield* Store
        const raw = yield* rawClient
        const now = yield* Clock.currentTimeMillis
        assert.strictEqual((yield* store.admit(request("hung", now)))._tag, "Admitted")
        // Redis holds every client's commands for 3 s: connected, but silent (a stuck or overloaded server).
        assert.strictEqual(yield* Effect.promise(() => raw.call("CLIENT", "PAUSE", "3000", "ALL")), "OK")
        const started = yield* Clock.currentTimeMillis
        const results = yield* inOneTurn(20, (i) =>
          Effect.result<unknown, StoreError, never>(
            i % 2 === 0 ? store.admit(request("hung", now)) : store.tenantState("hung", now),
          ),
        )
        const elapsed = (yield* Clock.currentTimeMillis) - started
        for (const result of results)
          assert.isTrue(Result.isFailure(result) && result.failure._tag === "StoreError")
        assert.isBelow(elapsed, 2_000)
        assert.strictEqual((yield* admitWhenBack("hung"))._tag, "Admitted")
      }).pipe(Effect.provide(layerRedis(redis.url))),
  )

  it.live("a Redis stopped mid-run fails each operation within 2 s and works again after restart", () =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = yield* Clock.currentTimeMillis
      assert.strictEqual((yield* store.admit(request("restart", now)))._tag, "Admitted")
      yield* Effect.promise(() => redis.stop())
      for (const operation of [
        store.admit(request("restart", now)) as Effect.Effect<unknown, StoreError>,
        store.settle({
          tenant: "restart",
          now,
          minute: 0,
          budgets: request("restart", now).budgets,
          sessionId: undefined,
          reserved: 0,
          cost: 0,
          tokenDelta: 0,
        }),
        store.tenantState("restart", now),
      ]) {
        const started = yield* Clock.currentTimeMillis
        const result = yield* Effect.result(operation)
        assert.isTrue(Result.isFailure(result) && result.failure._tag === "StoreError")
        assert.isBelow((yield* Clock.currentTimeMillis) - started, 2_000)
      }
      yield* Effect.promise(() => redis.restart())
      assert.strictEqual((yield* admitWhenBack("restart"))._tag, "Admitted")
      assert.strictEqual((yield* store.tenantState("restart", now)).requests.current, 1)
    }).pipe(Effect.provide(layerRedis(redis.url))),
  )
})
