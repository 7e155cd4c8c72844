/**
 * Issue #19 acceptance: three copies on one Redis with `breaker.shared:
 * true`; one failing target is tested once per `open_for` by the whole fleet
 * (counted at the fake provider), where three copies with their own breakers
 * test it three times as often; and the fleet's fallbacks stay within the
 * retry budget's formula for the fleet's requests.
 */
import { join } from "node:path"
import { Redis } from "ioredis"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { generateKey } from "../../src/keys/keys.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startRedis, type RedisHandle } from "../support/redis.js"
import { tempDir } from "../support/tempDirs.js"

const OPEN_FOR_S = 1

let redis: RedisHandle
let fake: FakeProviderHandle
let healthy: FakeProviderHandle
let overloaded: FakeProviderHandle
beforeAll(async () => {
  redis = await startRedis()
  fake = await startFakeProvider({ scenario: "status:500" })
  healthy = await startFakeProvider()
  overloaded = await startFakeProvider({ scenario: "status:529" })
})
beforeEach(async () => {
  // Each test starts with an empty Redis: no breaker or budget state of the one before.
  const client = new Redis(redis.url)
  await client.flushall()
  client.disconnect()
})
afterAll(async () => {
  await fake?.close()
  await healthy?.close()
  await overloaded?.close()
  await redis?.stop()
})

const threeCopies = async (
  shared: boolean,
  /** Fall back from the failing target to a healthy one, with a breaker that never opens. */
  fallback = false,
): Promise<Array<Harness>> => {
  const key = generateKey()
  const copies: Array<Harness> = []
  for (let i = 0; i < 3; i++) {
    const dir = tempDir(`tollgate-fleet-${i}-`)
    copies.push(
      await startHarness({
        dir,
        key,
        // With `fallback`, the first target is overloaded (529: the next target is tried, not the same again).
        sharedFakes: [fallback ? overloaded : fake, healthy],
        // The 500s' request lines are warnings: kept out of the test output.
        logLevel: "Error",
        config: (urls, keyHash) => ({
          server: { listen: "127.0.0.1:0" },
          store: { kind: "redis", url: redis.url },
          usage: { file: join(dir, "usage.jsonl") },
          breaker: {
            min_requests: fallback ? 1_000_000 : 5,
            failure_ratio: 0.5,
            open_for: `${OPEN_FOR_S}s`,
            shared,
          },
          retry: { max_attempts: fallback ? 2 : 1 },
          providers: {
            failing: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
            healthy: { kind: "anthropic", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
          },
          routes: {
            claude: {
              api: "anthropic",
              targets: [
                { provider: "failing", model: "claude-sonnet-5-5" },
                ...(fallback ? [{ provider: "healthy", model: "claude-sonnet-5-5" }] : []),
              ],
            },
          },
          tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
        }),
      }),
    )
  }
  return copies
}

const post = async (h: Harness): Promise<number> => {
  const res = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": h.key, "content-type": "application/json" },
    body: JSON.stringify({ model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
  })
  await res.arrayBuffer()
  return res.status
}

/** Requests from every copy, one after another per copy, for `ms`; the upstream requests the fake got meanwhile. */
const steadyTraffic = async (copies: ReadonlyArray<Harness>, ms: number): Promise<number> => {
  fake.reset()
  const until = performance.now() + ms
  await Promise.all(
    copies.map(async (h) => {
      while (performance.now() < until) {
        await post(h)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }),
  )
  return fake.requests().count
}

describe("one failing target, three copies on one Redis", () => {
  for (const shared of [true, false]) {
    it(`breaker.shared: ${shared} — the target is tested ${shared ? "once per open_for by the fleet" : "by every copy"}`, async () => {
      const copies = await threeCopies(shared)
      try {
        // Until every copy answers 502 at once: the breakers are open (on Redis, or each copy's own).
        await eventually(async () => {
          const statuses = await Promise.all(copies.map(post))
          return statuses.every((status) => status === 502)
        }, 15_000)
        const seconds = 3.5
        const tests = await steadyTraffic(copies, seconds * 1000)
        const perOpenFor = Math.ceil(seconds / OPEN_FOR_S)
        if (shared) {
          // One test per open_for for the fleet (each fails and opens it again for open_for).
          expect(tests).toBeGreaterThanOrEqual(perOpenFor - 2)
          expect(tests).toBeLessThanOrEqual(perOpenFor)
        } else {
          // Each copy tests on its own.
          expect(tests).toBeGreaterThanOrEqual(2 * perOpenFor - 2)
        }
      } finally {
        for (const h of copies) await h.close()
      }
    })
  }
})

describe("the retry budget of three copies on one Redis", () => {
  for (const shared of [true, false]) {
    it(`breaker.shared: ${shared} — fallbacks ${shared ? "within 10 + 0.1 × the fleet's requests" : "within each copy's own budget"}`, async () => {
      const copies = await threeCopies(shared, true)
      try {
        // 30 requests from each copy, one every 20 ms: every one would fall back if the budget let it.
        const statuses = await Promise.all(
          copies.map(async (h) => {
            const seen: Array<number> = []
            for (let i = 0; i < 30; i++) {
              seen.push(await post(h))
              await new Promise((resolve) => setTimeout(resolve, 20))
            }
            return seen
          }),
        )
        const records = copies.flatMap((h) => h.records())
        expect(records).toHaveLength(90)
        const fallbacks = records.reduce((n, r) => n + r.attempts - 1, 0)
        // Served by the fallback, or the first target's 529 sent on when the budget refused the fallback.
        expect(statuses.flat().filter((s) => s === 200)).toHaveLength(fallbacks)
        if (shared) {
          // At most 10 + 0.1 × 90 = 19 for the fleet (copies spending at the same moment may pass it by a
          // little); the floor at least. Another copy's requests count once synced, so a few fewer is usual.
          expect(fallbacks).toBeGreaterThanOrEqual(10)
          expect(fallbacks).toBeLessThanOrEqual(19 + 2)
        } else {
          // Each copy: 10 + 0.1 × its 30 requests = 13.
          expect(fallbacks).toBe(39)
        }
      } finally {
        for (const h of copies) await h.close()
      }
    })
  }
})
