import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startHarness, UPSTREAM_KEY_ENV } from "../support/harness.js"
import { startRedis, type RedisHandle } from "../support/redis.js"

/** ADR 0006 / 0029: a hard-budget stream whose extension meets a dead store ends as "store unavailable". */

let redis: RedisHandle
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

describe("a store outage during a hard-budget stream", () => {
  it("ends the stream with an overloaded_error event and records store_unavailable, not budget_exceeded", async () => {
    const h = await startHarness({
      config: (urls, keyHash, dir) => ({
        server: { listen: "127.0.0.1:0" },
        usage: { file: join(dir, "usage.jsonl") },
        store: { kind: "redis", url: redis.url },
        reservation: { output_tokens: 10 },
        providers: { a: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
        routes: { claude: { api: "anthropic", targets: [{ provider: "a", model: "claude-sonnet-5-5" }] } },
        tenants: {
          acme: {
            keys: [{ id: "ci", sha256: keyHash }],
            routes: "*",
            budgets: { month: { limit_usd: 100, mode: "hard" } },
          },
        },
      }),
    })
    try {
      const response = await fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: {
          "x-api-key": h.key,
          "content-type": "application/json",
          "x-fake-scenario": "max-tokens,delay:5",
        },
        body: JSON.stringify({
          model: "claude",
          max_tokens: 2000,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
        }),
      })
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      // The stream is flowing (admitted through Redis); now the store goes away.
      await reader.read()
      await redis.stop()
      let text = ""
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        text += Buffer.from(value).toString("utf8")
      }
      expect(text).toContain('event: error\ndata: {"type":"error","error":{"type":"overloaded_error"')
      expect(text).not.toContain("message_stop")
      const record = h.records().at(-1)!
      expect(record).toMatchObject({ incomplete: true, error: "store_unavailable", status: 200 })
      expect(record.output_tokens).toBeLessThan(2000)
    } finally {
      await h.close()
    }
  })
})
