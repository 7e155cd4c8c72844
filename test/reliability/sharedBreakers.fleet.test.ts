/**
 * Issue #19 acceptance: three copies on one Redis with `breaker.shared:
 * true`; one failing target is tested once per `open_for` by the whole fleet
 * (counted at the fake provider), where three copies with their own breakers
 * test it three times as often.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { generateKey } from "../../src/keys/keys.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startRedis, type RedisHandle } from "../support/redis.js"

const OPEN_FOR_S = 1

let redis: RedisHandle
let fake: FakeProviderHandle
beforeAll(async () => {
  redis = await startRedis()
  fake = await startFakeProvider({ scenario: "status:500" })
})
afterAll(async () => {
  await fake?.close()
  await redis?.stop()
})

const threeCopies = async (shared: boolean): Promise<Array<Harness>> => {
  const key = generateKey()
  const copies: Array<Harness> = []
  for (let i = 0; i < 3; i++) {
    const dir = mkdtempSync(join(tmpdir(), `tollgate-fleet-${i}-`))
    copies.push(
      await startHarness({
        dir,
        key,
        sharedFakes: [fake],
        config: (urls, keyHash) => ({
          server: { listen: "127.0.0.1:0" },
          store: { kind: "redis", url: redis.url },
          usage: { file: join(dir, "usage.jsonl") },
          breaker: { min_requests: 5, failure_ratio: 0.5, open_for: `${OPEN_FOR_S}s`, shared },
          retry: { max_attempts: 1 },
          providers: { failing: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
          routes: {
            claude: { api: "anthropic", targets: [{ provider: "failing", model: "claude-sonnet-5-5" }] },
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
