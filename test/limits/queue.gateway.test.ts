import Anthropic from "@anthropic-ai/sdk"
import { afterEach, describe, expect, it } from "vitest"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * The waiting queue (ADR 0057) through the gateway with the official SDK:
 * a request over `concurrent_requests` waits for a place instead of a 429,
 * up to `max_wait`; the queue shows in `/metrics`.
 */

let h: Harness | undefined

const start = (limits: Record<string, unknown>, server: Record<string, unknown> = {}) =>
  startHarness({
    fakes: [{ name: "A" }],
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0", ...server },
      usage: { file: `${dir}/usage.jsonl` },
      providers: { a: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
      routes: { claude: { api: "anthropic", targets: [{ provider: "a", model: "claude-sonnet-5-5" }] } },
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*", limits } },
    }),
  }).then((harness) => (h = harness))

afterEach(async () => {
  await h?.close()
  h = undefined
})

const client = (harness: Harness) =>
  new Anthropic({ baseURL: harness.url, apiKey: harness.key, maxRetries: 0 })

/** A request the fake answers after `delayMs`. */
const slow = (harness: Harness, delayMs: number) =>
  client(harness).messages.create(
    { model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hello" }] },
    { headers: { "x-fake-scenario": `delay:${delayMs}` } },
  )

const metric = async (harness: Harness, line: string): Promise<number | undefined> => {
  const text = await (await fetch(`${harness.url}/metrics`)).text()
  const found = text.split("\n").find((l) => l.startsWith(`${line} `))
  return found === undefined ? undefined : Number(found.slice(line.length + 1))
}

describe("the waiting queue through the gateway", () => {
  it("a request over concurrent_requests waits for the place and is served; the wait shows in /metrics", async () => {
    const harness = await start({ concurrent_requests: 1, queue: { max_wait: "10s" } })
    const started = Date.now()
    const [first, second] = await Promise.all([slow(harness, 400), slow(harness, 400)])
    expect(first.type).toBe("message")
    expect(second.type).toBe("message")
    // One after the other: the second waited for the first's place.
    expect(Date.now() - started).toBeGreaterThanOrEqual(750)
    expect(harness.fakes[0]!.requests().count).toBe(2)
    expect(harness.records().map((r) => r.status)).toEqual([200, 200])
    expect(await metric(harness, 'tollgate_queue_wait_seconds_count{tenant="acme"}')).toBe(1)
    expect(await metric(harness, 'tollgate_queue_timeouts_total{tenant="acme"}')).toBe(0)
    expect(await metric(harness, 'tollgate_queue_length{tenant="acme"}')).toBe(0)
  })

  it("a request that waits max_wait without a place gets 429 naming max_wait, and a record", async () => {
    const harness = await start({ concurrent_requests: 1, queue: { max_wait: "300ms" } })
    const first = slow(harness, 1_500)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const started = Date.now()
    const refused = await slow(harness, 0).catch((error: unknown) => error)
    const waited = Date.now() - started
    expect(refused).toBeInstanceOf(Anthropic.RateLimitError)
    expect((refused as InstanceType<typeof Anthropic.RateLimitError>).message).toContain("max_wait")
    expect(waited).toBeGreaterThanOrEqual(250)
    expect(waited).toBeLessThan(1_400)
    expect((await first).type).toBe("message")
    expect(harness.fakes[0]!.requests().count).toBe(1)
    expect(harness.records().find((r) => r.status === 429)).toMatchObject({
      error: "rate_limited",
      provider: null,
    })
    expect(await metric(harness, 'tollgate_queue_timeouts_total{tenant="acme"}')).toBe(1)
  })

  it("a client that leaves while queued gets a record, and its place is not held", async () => {
    const harness = await start({ concurrent_requests: 1, queue: { max_wait: "30s" } })
    const first = slow(harness, 800)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const abort = new AbortController()
    const gone = client(harness)
      .messages.create(
        { model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hello" }] },
        { signal: abort.signal },
      )
      .catch((error: unknown) => error)
    await new Promise((resolve) => setTimeout(resolve, 100))
    abort.abort()
    expect(await gone).toBeInstanceOf(Error)
    expect((await first).type).toBe("message")
    // The place the first gave back is free: a new request is served at once.
    expect((await slow(harness, 0)).type).toBe("message")
    expect(harness.fakes[0]!.requests().count).toBe(2)
    const statuses = harness.records().map((r) => r.status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(2)
    expect(harness.records().filter((r) => r.error === "client_disconnected")).toMatchObject([
      { status: 499, provider: null, attempts: 0 },
    ])
  })

  it("a shutdown refuses the waiting requests at once (503) and lets the one in flight finish", async () => {
    const harness = await start({ concurrent_requests: 1, queue: { max_wait: "30s" } })
    const first = slow(harness, 800)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const waiting = slow(harness, 0).catch((error: unknown) => error)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const closing = harness.close()
    h = undefined
    const refused = await waiting
    expect(refused).toBeInstanceOf(Anthropic.APIError)
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(503)
    expect((await first).type).toBe("message")
    await closing
    expect(
      harness
        .records()
        .map((r) => r.status)
        .sort(),
    ).toEqual([200, 503])
  })

  it("without a queue, a request over concurrent_requests gets 429 at once, as before", async () => {
    const harness = await start({ concurrent_requests: 1 })
    const first = slow(harness, 600)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const started = Date.now()
    const refused = await slow(harness, 0).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Anthropic.RateLimitError)
    expect(Date.now() - started).toBeLessThan(400)
    expect((await first).type).toBe("message")
  })

  it("server.max_concurrent_requests caps all tenants together; a tenant with a queue waits for the place", async () => {
    const harness = await start({ queue: { max_wait: "10s" } }, { max_concurrent_requests: 1 })
    const results = await Promise.all([slow(harness, 300), slow(harness, 300), slow(harness, 300)])
    expect(results.map((r) => r.type)).toEqual(["message", "message", "message"])
    expect(await metric(harness, 'tollgate_queue_wait_seconds_count{tenant="acme"}')).toBe(2)
  })
})
