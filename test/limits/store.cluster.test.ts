/**
 * Issue #19, `store.cluster: true`: the limit store's conformance suite on a
 * real three-node Redis Cluster. Every script touches keys of one hash slot
 * (a tenant's `{tenant}` tag, or a response's): a CROSSSLOT error would fail
 * these tests.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Redis } from "ioredis"
import { layerRedis } from "../../src/limits/redisStore.js"
import { Store } from "../../src/limits/Store.js"
import { startRedisCluster, type RedisClusterHandle } from "../support/redis.js"
import { storeSuite } from "./store.conformance.js"
import { periodic } from "./store.fixture.js"

let cluster: RedisClusterHandle

beforeAll(async () => {
  cluster = await startRedisCluster()
}, 60_000)

afterAll(async () => {
  await cluster?.stop()
})

// Exact counters, as the memory store: leases (ADR 0063) off, as in store.redis.test.ts.
storeSuite("redis cluster", () => layerRedis(cluster.url, { cluster: true, leaseRequests: 1 }))

describe("the store on a Redis Cluster", () => {
  it.effect("spreads tenants over the nodes: each node holds some tenants' keys", () =>
    Effect.gen(function* () {
      const store = yield* Store
      const now = Date.parse("2026-12-03T10:00:00.000Z")
      for (let i = 0; i < 30; i++) {
        const result = yield* store.admit({
          tenant: `spread-${i}`,
          now,
          requestsPerMinute: 10,
          tokensPerMinute: 1_000,
          tokenCost: 10,
          reserve: 5,
          budgets: [
            periodic("day", "k", { limit: 1_000_000, hard: true }, now),
            periodic("week", undefined, { limit: 1_000_000, hard: true }, now),
            periodic("month", undefined, { limit: 1_000_000, hard: true }, now),
          ],
          session: { id: `s-${i}`, budget: { limit: 100, hard: true } },
          maxSessions: 10,
        })
        assert.strictEqual(result._tag, "Admitted")
      }
      const sizes = yield* Effect.promise(() =>
        Promise.all(
          cluster.nodes.map(async (node) => {
            const client = new Redis(node.url)
            try {
              return await client.dbsize()
            } finally {
              client.disconnect()
            }
          }),
        ),
      )
      for (const size of sizes) assert.isAbove(size, 0)
    }).pipe(Effect.provide(layerRedis(cluster.url, { cluster: true }))),
  )
})
