import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { layerRedis } from "../../src/limits/redisStore.js"
import { copyConfig, startCopy } from "../support/copies.js"
import { startRedis, type RedisHandle } from "../support/redis.js"
import { tempDir } from "../support/tempDirs.js"

/** TestStoreDown: Redis stops mid-test and comes back (ADR 0006). */

let redis: RedisHandle
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

const request = (url: string, key: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    })
    const body = await response.text()
    return { status: response.status, retryAfter: response.headers.get("retry-after"), body }
  })

const readyz = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/readyz`)
    return { status: response.status, body: (await response.json()) as Record<string, unknown> }
  })

describe("TestStoreDown", () => {
  it.effect(
    "hard budgets get 503, the others run on local limits, /readyz stays ready, and Redis is used again after it returns",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.parse("2026-12-02T10:04:10.000Z"))
        const fake = yield* Effect.acquireRelease(
          Effect.promise(() => startFakeProvider()),
          (f) => Effect.promise(() => f.close()),
        )
        const hardKey = generateKey()
        const softKey = generateKey()
        const dir = tempDir("tollgate-storedown-")
        const suffix = Math.random().toString(36).slice(2, 8)
        const raw = copyConfig({
          fake,
          keyHash: "",
          dir,
          tenants: {
            [`hard-${suffix}`]: {
              keys: [{ id: "h", sha256: hashKey(hardKey) }],
              routes: "*",
              budgets: { month: { limit_usd: 100, mode: "hard" } },
            },
            [`soft-${suffix}`]: {
              keys: [{ id: "s", sha256: hashKey(softKey) }],
              routes: "*",
              limits: { requests_per_minute: 4 },
              budgets: { month: { limit_usd: 100, mode: "soft" } },
            },
          },
        })
        const url = yield* startCopy(raw, dir, layerRedis(redis.url))
        let sent = 0
        const send = (key: string) => {
          sent++
          return request(url, key)
        }

        assert.strictEqual((yield* send(hardKey)).status, 200)
        assert.strictEqual((yield* send(softKey)).status, 200)
        assert.deepStrictEqual((yield* readyz(url)).body, { status: "ready", store: "ok" })

        yield* Effect.promise(() => redis.stop())
        const upstreamBefore = fake.requests().count

        const hard = yield* send(hardKey)
        assert.strictEqual(hard.status, 503)
        assert.strictEqual(hard.retryAfter, "5")
        assert.include(hard.body, "overloaded_error")
        assert.strictEqual(
          fake.requests().count,
          upstreamBefore,
          "no upstream request for a hard-budget tenant",
        )

        // Local limits with the same values: 4 a minute, counted from zero on this copy.
        const soft = []
        for (let i = 0; i < 5; i++) soft.push((yield* send(softKey)).status)
        assert.deepStrictEqual(soft, [200, 200, 200, 200, 429])

        const ready = yield* readyz(url)
        assert.strictEqual(ready.status, 200)
        assert.deepStrictEqual(ready.body, { status: "ready", store: "unavailable" })

        yield* Effect.promise(() => redis.restart())
        // Still local-only for 5 s after the last store error: the hard tenant keeps getting 503.
        assert.strictEqual((yield* send(hardKey)).status, 503)
        yield* TestClock.adjust("6 seconds")
        // The client reconnects within about a second (real time); poll with generous bounds.
        let recovered = 0
        for (let i = 0; i < 50 && recovered !== 200; i++) {
          recovered = (yield* send(hardKey)).status
          if (recovered !== 200) {
            yield* Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
            yield* TestClock.adjust("6 seconds")
          }
        }
        assert.strictEqual(recovered, 200)
        assert.deepStrictEqual((yield* readyz(url)).body, { status: "ready", store: "ok" })

        // No usage record lost: one line per request, whatever happened to it.
        const records = readFileSync(join(dir, "usage.jsonl"), "utf8").trim().split("\n")
        assert.strictEqual(records.length, sent)
      }),
  )
})
