import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { layerRedis } from "../../src/limits/redisStore.js"
import { Store } from "../../src/limits/Store.js"
import { copyConfig, sendTo, startCopy } from "../support/copies.js"
import { startRedis, startRedisCluster, type RedisClusterHandle, type RedisHandle } from "../support/redis.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * limits-and-budgets.md's cluster tests: three Tollgate copies (whole
 * gateways, each on its own port) sharing one store, under TestClock.
 */

let redis: RedisHandle
let redisCluster: RedisClusterHandle
beforeAll(async () => {
  ;[redis, redisCluster] = await Promise.all([startRedis(), startRedisCluster()])
}, 60_000)
afterAll(async () => {
  await Promise.all([redis?.stop(), redisCluster?.stop()])
})

const START = Date.parse("2026-12-02T10:04:00.000Z")

const fakeProvider = (scenario?: string) =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeProvider(scenario === undefined ? {} : { scenario })),
    (fake) => Effect.promise(() => fake.close()),
  )

/**
 * The store each of three copies uses — one shared memory store, or one
 * Redis connection per copy — and a view of the same store for the test.
 */
const stores = {
  memory: () => {
    const shared = makeMemoryStore()
    return { layer: () => Layer.succeed(Store, shared), view: Effect.succeed(shared) }
  },
  redis: () => ({
    layer: () => layerRedis(redis.url),
    view: Effect.map(Layer.build(layerRedis(redis.url)), Context.get(Store)),
  }),
  // Issue #19: `store.cluster: true` on a real three-node Redis Cluster.
  "redis cluster": () => ({
    layer: () => layerRedis(redisCluster.url, { cluster: true }),
    view: Effect.map(Layer.build(layerRedis(redisCluster.url, { cluster: true })), Context.get(Store)),
  }),
}

const threeCopies = (
  kind: keyof typeof stores,
  tenant: Record<string, unknown>,
  options: {
    scenario?: string
    reservationOutputTokens?: number
    /** The `budgets` of key "ci"; with them the tenant also gets a key "batch" without budgets of its own. */
    ciBudgets?: Record<string, unknown>
  } = {},
) =>
  Effect.gen(function* () {
    const fake = yield* fakeProvider(options.scenario)
    const key = generateKey()
    const batchKey = generateKey()
    const dir = tempDir("tollgate-cluster-")
    const name = `acme-${Math.random().toString(36).slice(2, 8)}`
    const raw = copyConfig({
      fake,
      keyHash: hashKey(key),
      dir,
      tenants: {
        [name]: {
          keys:
            options.ciBudgets === undefined
              ? [{ id: "ci", sha256: hashKey(key) }]
              : [
                  { id: "ci", sha256: hashKey(key), budgets: options.ciBudgets },
                  { id: "batch", sha256: hashKey(batchKey) },
                ],
          routes: "*",
          ...tenant,
        },
      },
      ...(options.reservationOutputTokens === undefined
        ? {}
        : { reservationOutputTokens: options.reservationOutputTokens }),
    })
    const store = stores[kind]()
    const urls = yield* Effect.all([0, 1, 2].map(() => startCopy(raw, dir, store.layer())))
    const view = yield* store.view
    return { urls, key, batchKey, fake, tenant: name, view }
  })

for (const kind of ["memory", "redis", "redis cluster"] as const) {
  describe(`TestThreeCopiesShareOneLimit (${kind})`, () => {
    it.effect("180 parallel requests, 60 to each copy, admit exactly 50", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(START + 10_000)
        const { urls, key } = yield* threeCopies(kind, { limits: { requests_per_minute: 50 } })
        const statuses = yield* Effect.all(
          Array.from({ length: 180 }, (_, i) => sendTo(urls[i % 3]!, key)),
          { concurrency: "unbounded" },
        )
        assert.strictEqual(statuses.filter((s) => s === 200).length, 50)
        assert.strictEqual(statuses.filter((s) => s === 429).length, 130)
      }),
    )

    it.effect(
      "3 requests a second for 4 minutes: no calendar minute over the limit, no 60 s over twice it",
      () =>
        Effect.gen(function* () {
          yield* TestClock.setTime(START)
          const { urls, key } = yield* threeCopies(kind, { limits: { requests_per_minute: 50 } })
          const admittedAt: Array<number> = []
          for (let second = 0; second < 240; second++) {
            const statuses = yield* Effect.all(
              urls.map((url) => sendTo(url, key)),
              { concurrency: "unbounded" },
            )
            for (const status of statuses) if (status === 200) admittedAt.push(second)
            yield* TestClock.adjust("1 second")
          }
          const perMinute = [0, 1, 2, 3].map((m) => admittedAt.filter((s) => Math.floor(s / 60) === m).length)
          for (const count of perMinute) {
            assert.isAtMost(count, 50, `calendar minutes: ${perMinute}`)
            // Every minute is a full minute of overload (180 offered): at least 90 % of the limit.
            assert.isAtLeast(count, 45, `calendar minutes: ${perMinute}`)
          }
          let largest = 0
          for (let start = 0; start + 60 <= 240; start++) {
            largest = Math.max(largest, admittedAt.filter((s) => s >= start && s < start + 60).length)
          }
          assert.isAtMost(largest, 100)
          // For steady traffic the count stays near the limit (the document's test sees 50).
          assert.isAtMost(largest, 52, `largest 60 s count ${largest}`)
        }),
    )
  })

  describe(`TestWorstCaseOverspend (${kind})`, () => {
    it.effect(
      "120 parallel requests against one hard budget: 44 admitted, spend 89,012 within the bound 89,200",
      () =>
        Effect.gen(function* () {
          yield* TestClock.setTime(START + 10_000)
          // "hi": 1 estimated and 1 reported input token; 22 reserved and 202 real output tokens at 3 / 10 USD per
          // million: a reservation of 223 micro-USD and a cost of 2,023 each. The fake holds every response for
          // a second, so all 120 reservations are open at once.
          const { urls, key, fake, tenant, view } = yield* threeCopies(
            kind,
            { budgets: { month: { limit_usd: 0.01, mode: "hard" } } },
            { scenario: "max-tokens,delay:1000", reservationOutputTokens: 22 },
          )
          const statuses = yield* Effect.all(
            Array.from({ length: 120 }, (_, i) => sendTo(urls[i % 3]!, key, { max_tokens: 202 })),
            { concurrency: "unbounded" },
          )
          assert.strictEqual(statuses.filter((s) => s === 200).length, 44)
          assert.strictEqual(statuses.filter((s) => s === 402).length, 76)
          assert.strictEqual(fake.requests().count, 44)
          const state = yield* view.tenantState(tenant, START + 10_000)
          const spend = state.monthSpend
          assert.strictEqual(state.monthReserved, 0)
          assert.strictEqual(spend, 89_012)
          assert.isAtMost(spend, 10_000 + 44 * (202 - 22) * 10)
        }),
    )

    it.effect(
      "a key's day budget inside the tenant's month: 22 + 22 admitted, the key spends 44,506 within 44,600, the tenant 89,012 within 89,200",
      () =>
        Effect.gen(function* () {
          yield* TestClock.setTime(START + 10_000)
          // As above: each request reserves 223 micro-USD and costs 2,023; each overspends its reservation by
          // (202 − 22) × 10 = 1,800. Key "ci" has a hard day budget of 5,000 inside the tenant's hard month of
          // 10,000; key "batch" has none of its own. The fake holds every response for two seconds.
          const { urls, key, batchKey, fake, tenant, view } = yield* threeCopies(
            kind,
            { budgets: { month: { limit_usd: 0.01, mode: "hard" } } },
            {
              scenario: "max-tokens,delay:2000",
              reservationOutputTokens: 22,
              ciBudgets: { day: { limit_usd: 0.005, mode: "hard" } },
            },
          )
          const burst = (k: string) =>
            Effect.all(
              Array.from({ length: 60 }, (_, i) => sendTo(urls[i % 3]!, k, { max_tokens: 202 })),
              { concurrency: "unbounded" },
            )
          // Key "ci" first: its day budget binds at 22 open requests (22 × 223 = 4,906 ≤ 5,000 < 23 × 223).
          const ci = yield* Effect.forkChild(burst(key))
          yield* Effect.promise(async () => {
            while (fake.requests().count < 22) await new Promise((resolve) => setTimeout(resolve, 5))
          })
          // While those 22 are open, key "batch" meets the tenant's month: (10,000 − 4,906) / 223 → 22 more.
          const batch = yield* burst(batchKey)
          const ciStatuses = yield* Fiber.join(ci)
          const count = (statuses: ReadonlyArray<number>, status: number) =>
            statuses.filter((s) => s === status).length
          assert.deepStrictEqual([count(ciStatuses, 200), count(ciStatuses, 402)], [22, 38])
          assert.deepStrictEqual([count(batch, 200), count(batch, 402)], [22, 38])
          assert.strictEqual(fake.requests().count, 44)
          const state = yield* view.tenantState(tenant, START + 10_000, [
            { name: "day", key: "ci", period: "2026-12-02" },
          ])
          // The key's bound: its limit plus the excess of its own open requests.
          assert.deepStrictEqual(state.budgets, [{ spend: 22 * 2_023, reserved: 0 }])
          assert.strictEqual(state.budgets[0]!.spend, 44_506)
          assert.isAtMost(44_506, 5_000 + 22 * (202 - 22) * 10)
          assert.strictEqual(5_000 + 22 * (202 - 22) * 10, 44_600)
          // The tenant's bound: its limit plus the excess of all its open requests, both keys'.
          assert.strictEqual(state.monthReserved, 0)
          assert.strictEqual(state.monthSpend, 89_012)
          assert.isAtMost(state.monthSpend, 10_000 + 44 * (202 - 22) * 10)
          assert.strictEqual(10_000 + 44 * (202 - 22) * 10, 89_200)
        }),
    )
  })
}
