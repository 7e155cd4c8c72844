import { request as httpRequest, type IncomingMessage } from "node:http"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { FakeProviderOptions } from "../../fakeprovider/server.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startRedis, type RedisHandle } from "../support/redis.js"

/**
 * The failure scenarios of reliability.md's M3 table, for every provider
 * kind, on the memory or the Redis store: route `main` tries fake A first,
 * then fake B (scenario `ok`), both of the kind under test.
 */

export type Kind = "anthropic" | "openai" | "bedrock" | "azure" | "gemini"
export type Api = "anthropic" | "openai"

/** The client API of a kind's routes. */
export const apiOf = (kind: Kind): Api =>
  kind === "anthropic" || kind === "bedrock" ? "anthropic" : "openai"

/** The AWS credentials the gateway signs with and the fake provider checks (both read the environment). */
process.env["AWS_ACCESS_KEY_ID"] ??= "AKIDFAKE"
process.env["AWS_SECRET_ACCESS_KEY"] ??= "fake-secret"

export interface Setup {
  readonly a?: string
  readonly b?: string
  readonly targets?: number
  readonly retry?: Record<string, unknown>
  readonly timeouts?: Record<string, unknown>
  readonly breaker?: Record<string, unknown>
  /** A target whose base_url refuses connections, tried first. */
  readonly refused?: boolean
  /** A Redis limit store. */
  readonly redisUrl?: string | undefined
}

const provider = (kind: Kind, baseUrl: string): Record<string, unknown> => {
  switch (kind) {
    case "bedrock":
      return { kind, region: "us-east-1", base_url: baseUrl }
    default:
      return { kind, base_url: baseUrl, api_key_env: UPSTREAM_KEY_ENV }
  }
}

export const modelOf = (kind: Kind): string =>
  kind === "gemini" ? "gemini-2.5-flash" : apiOf(kind) === "anthropic" ? "claude-sonnet-5-5" : "gpt-5-mini"

const PRICES = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 },
    { model: "gpt-5-mini", input: 0.25, output: 2, cache_read: 0.025, cache_write: 0 },
    { model: "gemini-2.5-flash", input: 0.3, output: 2.5, cache_read: 0.03, cache_write: 0 },
  ],
}

export const start = (kind: Kind, setup: Setup): Promise<Harness> => {
  const api = apiOf(kind)
  const fakes: Array<FakeProviderOptions> = [
    { name: "A", scenario: setup.a ?? "ok" },
    { name: "B", scenario: setup.b ?? "ok" },
  ]
  const model = modelOf(kind)
  return startHarness({
    fakes,
    prices: PRICES,
    config: (urls, keyHash, dir) => {
      const providers: Record<string, unknown> = {
        a: provider(kind, urls[0]!),
        b: provider(kind, urls[1]!),
        refused: provider(kind, "http://127.0.0.1:1"),
      }
      const targets = [
        ...(setup.refused ? [{ provider: "refused", model }] : []),
        { provider: "a", model },
        { provider: "b", model },
      ].slice(0, setup.targets ?? 3)
      return {
        server: { listen: "127.0.0.1:0" },
        usage: { file: join(dir, "usage.jsonl") },
        ...(setup.redisUrl === undefined ? {} : { store: { kind: "redis", url: setup.redisUrl } }),
        ...(setup.retry ? { retry: setup.retry } : {}),
        ...(setup.breaker ? { breaker: setup.breaker } : {}),
        timeouts: { first_token: "400ms", idle: "400ms", ...setup.timeouts },
        providers,
        routes: { main: { api, targets } },
        tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
      }
    },
  })
}

export const send = async (
  h: Harness,
  api: Api,
  options: { stream?: boolean; headers?: Record<string, string> } = {},
) => {
  const path = api === "anthropic" ? "/v1/messages" : "/v1/chat/completions"
  const auth: Record<string, string> =
    api === "anthropic" ? { "x-api-key": h.key } : { authorization: `Bearer ${h.key}` }
  const started = performance.now()
  const response = await fetch(`${h.url}${path}`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", ...options.headers },
    body: JSON.stringify({
      model: "main",
      max_tokens: 6,
      stream: options.stream ?? false,
      messages: [{ role: "user", content: "hello there" }],
    }),
  })
  const text = await response.text()
  return { response, text, ms: performance.now() - started }
}

const count = (h: Harness, fake: 0 | 1) => h.fakes[fake]!.requests().count

/** The failure table for `kind` on the memory store, or on a Redis store of its own. */
export const failureTable = (kind: Kind, store: "memory" | "redis"): void => {
  const api = apiOf(kind)
  let redis: RedisHandle | undefined
  if (store === "redis") {
    beforeAll(async () => {
      redis = await startRedis()
    })
    afterAll(async () => {
      await redis?.stop()
    })
  }
  const begin = (setup: Omit<Setup, "redisUrl">) => start(kind, { ...setup, redisUrl: redis?.url })
  describe(`failure scenarios (${kind}, ${store} store)`, () => {
    let h: Harness | undefined
    afterEach(async () => {
      await h?.close()
      h = undefined
    })

    it("429_retry_after: tries the next target and skips the first until its retry-after ends", async () => {
      h = await begin({ a: "status:429:7" })
      const first = await send(h, api)
      expect(first.response.status).toBe(200)
      expect(first.response.headers.get("x-tollgate-provider")).toBe("b")
      expect(first.response.headers.get("x-tollgate-attempts")).toBe("2")
      const second = await send(h, api)
      expect(second.response.headers.get("x-tollgate-attempts")).toBe("1")
      expect(second.response.headers.get("x-tollgate-provider")).toBe("b")
      expect(count(h, 0)).toBe(1)
    })

    it("529_overloaded: tries the next target", async () => {
      h = await begin({ a: "status:529" })
      const { response } = await send(h, api)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-attempts")).toBe("2")
      expect(count(h, 0)).toBe(1)
    })

    it("500_retry_once: retries the same target once, then the next", async () => {
      h = await begin({ a: "status:500" })
      const { response } = await send(h, api)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-attempts")).toBe("3")
      expect(count(h, 0)).toBe(2)
      expect(h.records().at(-1)).toMatchObject({ attempts: 3, provider: "b", status: 200 })
    })

    it("hang_before_headers: the first-token timeout moves on to the next target and aborts the hung request", async () => {
      h = await begin({ a: "hang-before-headers" })
      const { response, ms } = await send(h, api)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(ms).toBeLessThan(5_000)
      await eventually(() => h!.fakes[0]!.requests().recent[0]?.aborted === true)
    })

    it("hang-after:2-tokens: after the first byte there is no fallback; the stream ends with an error event", async () => {
      h = await begin({ a: "hang-after:2-tokens" })
      const { response, text } = await send(h, api, { stream: true })
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("a")
      expect(text).toContain("tok1 ")
      expect(text).toMatch(api === "anthropic" ? /event: error\ndata: \{"type":"error"/ : /data: \{"error":/)
      expect(text).not.toContain("[DONE]")
      expect(count(h, 1)).toBe(0)
      expect(h.records().at(-1)).toMatchObject({ status: 200, incomplete: true, error: "idle_timeout" })
      // Anthropic streams report the input at the start; the OpenAI formats (and Gemini, translated) at the end.
      expect(h.records().at(-1)!.input_tokens).toBe(api === "anthropic" ? 2 : 0)
    })

    it("reset-after:2-tokens: a reset stream ends with an error event and keeps the usage received", async () => {
      h = await begin({ a: "reset-after:2-tokens" })
      const { response, text } = await send(h, api, { stream: true })
      expect(response.status).toBe(200)
      expect(text).toContain("tok1 ")
      expect(text).toMatch(api === "anthropic" ? /event: error/ : /data: \{"error":/)
      expect(count(h, 1)).toBe(0)
      const record = h.records().at(-1)!
      expect(record.incomplete).toBe(true)
      expect(record.error).toMatch(/^connection_failed/)
    })

    it("malformed-after:2-tokens: the client gets the bytes, then an error event; no fallback", async () => {
      h = await begin({ a: "malformed-after:2-tokens" })
      const { response, text } = await send(h, api, { stream: true })
      expect(response.status).toBe(200)
      expect(text).toContain("oops")
      expect(text).toMatch(api === "anthropic" ? /event: error/ : /data: \{"error":/)
      expect(h.records().at(-1)).toMatchObject({ incomplete: true, error: "malformed" })
    })

    it("no_usage: a success without usage is charged on the estimate and marked usage_estimated", async () => {
      h = await begin({ a: "no-usage" })
      for (const stream of [false, true]) {
        const { response } = await send(h, api, { stream })
        expect(response.status).toBe(200)
        const record = h.records().at(-1)!
        expect(record.usage_estimated).toBe(true)
        expect(record.input_tokens).toBeGreaterThan(0)
        expect(record.cost_micro_usd).toBeGreaterThan(0)
      }
    })

    it("in-band error before the first content: the stream falls back as if it were the status", async () => {
      h = await begin({ a: "inband-error:overloaded_error" })
      const { response, text } = await send(h, api, { stream: true })
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-attempts")).toBe("2")
      expect(text).not.toContain("overloaded")
      expect(text).toContain("tok5 ")
    })

    it("client_disconnect: the upstream request is cancelled and the breaker does not count it", async () => {
      h = await begin({ a: "hang-after:2-tokens", breaker: { min_requests: 1, failure_ratio: 0.5 } })
      const controller = new AbortController()
      const path = api === "anthropic" ? "/v1/messages" : "/v1/chat/completions"
      const response = await fetch(`${h.url}${path}`, {
        method: "POST",
        headers: { "x-api-key": h.key, authorization: `Bearer ${h.key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "main",
          max_tokens: 6,
          stream: true,
          messages: [{ role: "user", content: "x" }],
        }),
        signal: controller.signal,
      })
      const reader = response.body!.getReader()
      await reader.read()
      controller.abort()
      await eventually(() => h!.fakes[0]!.requests().recent[0]?.aborted === true, 1_000)
      await eventually(() => h!.records().length === 1)
      expect(h.records()[0]).toMatchObject({ error: "client_disconnected", incomplete: true })
      // With min_requests 1, one counted failure would open A's breaker; the next request still reaches A.
      h.fakes[0]!.reset()
      const next = await send(h, api, { headers: { "x-fake-scenario": "ok" } })
      expect(next.response.headers.get("x-tollgate-provider")).toBe("a")
    })

    it("slow_client: Tollgate stops reading upstream while the client does not read", async () => {
      h = await begin({ a: "max-tokens", timeouts: { idle: "30s" } })
      const harness = h
      const path = api === "anthropic" ? "/v1/messages" : "/v1/chat/completions"
      const payload = JSON.stringify({
        model: "main",
        max_tokens: 2_000_000,
        stream: true,
        messages: [{ role: "user", content: "x" }],
      })
      const res = await new Promise<IncomingMessage>((resolve) => {
        const req = httpRequest(`${harness.url}${path}`, {
          method: "POST",
          headers: {
            "x-api-key": harness.key,
            authorization: `Bearer ${harness.key}`,
            "content-type": "application/json",
          },
        })
        req.on("response", resolve)
        req.end(payload)
      })
      res.pause()
      const sent = () => harness.fakes[0]!.requests().recent[0]?.bytes_sent ?? 0
      let previous = -1
      await eventually(async () => {
        const now = sent()
        if (now === previous && now > 0) return true
        previous = now
        await new Promise((r) => setTimeout(r, 400))
        return false
      }, 20_000)
      expect(sent()).toBeLessThan(32 * 1024 * 1024)
      // Tollgate's own memory for this response: ≤ 32 KiB queued plus the chunk in hand, plus at most a chunk or two
      // waiting for the client (the rest sits in the kernel's socket buffers, not in Tollgate).
      const metrics = await (await fetch(`${harness.url}/metrics`)).text()
      const buffered = Number(/^tollgate_relay_buffered_bytes (\d+)/m.exec(metrics)?.[1])
      expect(buffered).toBeGreaterThan(0)
      expect(buffered).toBeLessThanOrEqual(128 * 1024)
      res.destroy()
    })

    it("all_breakers_open: a fast 502 names the targets, carries retry-after, and sends nothing upstream", async () => {
      h = await begin({
        a: "status:500",
        b: "status:500",
        breaker: { min_requests: 2, failure_ratio: 0.5 },
      })
      // Request 1: A, A (retry), B → 500 unchanged; A's breaker opens after two failures.
      const first = await send(h, api)
      expect(first.response.status).toBe(500)
      // Request 2: A skipped; B fails twice → B opens.
      await send(h, api)
      const before = count(h, 0) + count(h, 1)
      const blocked = await send(h, api)
      expect(blocked.response.status).toBe(502)
      expect(Number(blocked.response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(count(h, 0) + count(h, 1)).toBe(before)
      const body = JSON.parse(blocked.text) as {
        error: { targets: Array<{ provider: string; outcome: string }> }
      }
      expect(body.error.targets.map((t) => [t.provider, t.outcome])).toEqual([
        ["a", "skipped"],
        ["b", "skipped"],
      ])
      expect(blocked.ms).toBeLessThan(1_000)
    })

    it("max_attempts bounds all attempts; the last upstream response goes back unchanged", async () => {
      h = await begin({ a: "status:529:3", b: "status:529:3", retry: { max_attempts: 1 } })
      const { response, text } = await send(h, api)
      expect(response.status).toBe(529)
      expect(response.headers.get("retry-after")).toBe("3")
      expect(response.headers.get("x-tollgate-attempts")).toBe("1")
      expect(text.toLowerCase()).toContain("overloaded")
      expect(count(h, 1)).toBe(0)
    })

    it("the last error response is sent unchanged: status, retry-after and body", async () => {
      h = await begin({ a: "status:503:9", b: "status:529:4" })
      const { response, text } = await send(h, api)
      expect(response.status).toBe(529)
      expect(response.headers.get("retry-after")).toBe("4")
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-attempts")).toBe("3")
      expect(JSON.parse(text)).toBeTypeOf("object")
    })

    it("a refused connection moves on to the next target", async () => {
      h = await begin({ refused: true })
      const { response } = await send(h, api)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("a")
      expect(response.headers.get("x-tollgate-attempts")).toBe("2")
    })

    it("the last attempt failing without a response gives a 502 with the failed and skipped targets", async () => {
      h = await begin({ a: "hang-before-headers", targets: 1 })
      const { response, text } = await send(h, api)
      expect(response.status).toBe(502)
      expect(response.headers.get("retry-after")).toBeNull()
      const body = JSON.parse(text) as Record<string, { targets?: unknown }>
      const error = (api === "anthropic" ? body["error"] : body["error"]) as { targets: unknown }
      expect(error.targets).toEqual([
        {
          provider: "a",
          model: modelOf(kind),
          outcome: "failed",
          reason: "first_token",
          cause: expect.stringMatching(/^first_token timeout after \d+ ms$/),
        },
      ])
    })

    it("an error body that stalls forever does not delay the next target", async () => {
      h = await begin({ a: "error-body-stall:529", timeouts: { first_token: "30s", idle: "30s" } })
      const { response, ms } = await send(h, api)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(ms).toBeLessThan(2_000)
    })
  })
}
