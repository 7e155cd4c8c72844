import { Effect, Layer } from "effect"
import { request } from "node:http"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { Store, type StoreService } from "../../src/limits/Store.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * A store that answers slowly, as Redis does under load: what happens to
 * money, records and timeouts when a client leaves or an upstream stalls
 * while a store call is on its way.
 */

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

const slow = (inner: StoreService, delays: { admit?: number; settle?: number; extend?: number }) =>
  Layer.succeed(
    Store,
    Store.of({
      ...inner,
      // The store call completes (a Redis script runs even when its caller stops waiting), then the answer is late.
      admit: (r) =>
        Effect.flatMap(inner.admit(r), (x) => Effect.as(Effect.sleep(`${delays.admit ?? 0} millis`), x)),
      settle: (r) => Effect.andThen(Effect.sleep(`${delays.settle ?? 0} millis`), inner.settle(r)),
      extend: (r) => Effect.andThen(Effect.sleep(`${delays.extend ?? 0} millis`), inner.extend(r)),
    }),
  )

const start = (store: Layer.Layer<Store>, extra: Record<string, unknown> = {}) =>
  startHarness({
    store,
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      providers: {
        anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        openai: { kind: "openai", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
      },
      routes: {
        claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        gpt: { api: "openai", targets: [{ provider: "openai", model: "gpt-5-mini" }] },
      },
      tenants: {
        acme: {
          keys: [{ id: "ci", sha256: keyHash }],
          routes: "*",
          budgets: { month: { limit_usd: 100, mode: "hard" } },
        },
      },
      ...extra,
    }),
  })

/** Sends a request and destroys it `afterMs` after it was sent (or after the first response byte). */
const sendAndLeave = (
  harness: Harness,
  path: string,
  body: unknown,
  afterMs: number,
  onFirstByte = false,
  headers: Record<string, string> = {},
) =>
  new Promise<void>((resolve) => {
    const req = request(`${harness.url}${path}`, {
      method: "POST",
      headers: {
        "x-api-key": harness.key,
        authorization: `Bearer ${harness.key}`,
        "content-type": "application/json",
        ...headers,
      },
    })
    req.on("response", (res) => {
      res.on("error", () => resolve())
      res.on("close", () => resolve())
      if (onFirstByte) res.once("data", () => setTimeout(() => req.destroy(), afterMs))
    })
    req.on("error", () => resolve())
    req.on("close", () => resolve())
    req.end(JSON.stringify(body))
    if (!onFirstByte) setTimeout(() => req.destroy(), afterMs)
  })

/** A stream of `max_tokens` from a fake that sends 8 tokens and then holds the stream open. */
const streamThatHangs = (harness: Harness, maxTokens: number) =>
  fetch(`${harness.url}/v1/messages`, {
    method: "POST",
    headers: {
      "x-api-key": harness.key,
      "content-type": "application/json",
      "x-fake-scenario": "hang-after:8-tokens",
    },
    body: JSON.stringify({
      model: "claude",
      max_tokens: maxTokens,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    }),
  })

const state = (store: StoreService) => Effect.runPromise(store.tenantState("acme", Date.now()))

describe("a slow limit store", () => {
  it("a client that leaves while its admission is on its way still has the reservation released", async () => {
    const inner = makeMemoryStore()
    h = await start(slow(inner, { admit: 300 }))
    await sendAndLeave(
      h,
      "/v1/messages",
      { model: "claude", max_tokens: 16, messages: [{ role: "user", content: "hi" }] },
      100,
    )
    await eventually(() => h!.records().length === 1)
    expect(h.records()[0]).toMatchObject({ status: 499, error: "client_disconnected", cost_micro_usd: 0 })
    expect(await state(inner)).toMatchObject({ monthReserved: 0, monthSpend: 0 })
  })

  it("a client that leaves while the settle is on its way loses neither the record nor the settle", async () => {
    const inner = makeMemoryStore()
    h = await start(slow(inner, { settle: 300 }))
    const body = { model: "gpt", stream: true, max_tokens: 4, messages: [{ role: "user", content: "hi" }] }
    await sendAndLeave(h, "/v1/chat/completions", body, 30, true)
    await eventually(() => h!.records().length === 1, 3_000)
    await eventually(async () => (await state(inner)).monthReserved === 0)
    expect((await state(inner)).monthSpend).toBe(h.records()[0]!.cost_micro_usd)
  })

  it("an idle timeout that passes while the cutoff waits for the store still ends the stream", async () => {
    const inner = makeMemoryStore()
    h = await start(slow(inner, { extend: 500 }), {
      reservation: { output_tokens: 4 },
      timeouts: { idle: "300ms" },
    })
    const response = await streamThatHangs(h, 16)
    const text = await Promise.race([
      response.text(),
      new Promise<string>((resolve) => setTimeout(() => resolve("still open after 5 s"), 5_000)),
    ])
    expect(text).toMatch(/event: error/)
    await eventually(() => h!.records().length === 1)
    expect(h.records()[0]).toMatchObject({ incomplete: true, error: "idle_timeout" })
  })

  it("a client that leaves while the cutoff waits for the store has its upstream stream closed", async () => {
    const inner = makeMemoryStore()
    h = await start(slow(inner, { extend: 1_000 }), { reservation: { output_tokens: 4 } })
    const body = {
      model: "claude",
      max_tokens: 64,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    }
    // The fake sends 8 tokens and then holds the stream open; the relay pauses for an extension after ~4 of them,
    // and the client leaves while the store takes 1 s to answer.
    await sendAndLeave(h, "/v1/messages", body, 100, true, { "x-fake-scenario": "hang-after:8-tokens" })
    const leftAt = performance.now()
    await eventually(() => h!.fakes[0]!.requests().recent.at(-1)?.aborted === true, 1_000)
    expect(performance.now() - leftAt).toBeLessThan(1_000)
    await eventually(() => h!.records().length === 1, 3_000)
    expect(h.records()[0]).toMatchObject({ incomplete: true, error: "client_disconnected" })
  })

  it("a defect inside a committed stream ends it with an error event, closes the upstream and charges what streamed", async () => {
    const inner = makeMemoryStore()
    const broken = Layer.succeed(
      Store,
      Store.of({ ...inner, extend: () => Effect.die(new Error("a bug in the store")) }),
    )
    h = await start(broken, { reservation: { output_tokens: 4 } })
    const response = await streamThatHangs(h, 64)
    const text = await response.text()
    expect(text).toMatch(/event: error/)
    await eventually(() => h!.fakes[0]!.requests().recent.at(-1)?.aborted === true, 1_000)
    await eventually(() => h!.records().length === 1)
    const record = h.records()[0]!
    // What streamed before the cutoff's extension: the text deltas' bytes / 4, rounded up, at least.
    const streamed = [...text.matchAll(/"text":"([^"]*)"/g)].reduce((n, m) => n + Buffer.byteLength(m[1]!), 0)
    expect(streamed).toBeGreaterThan(0)
    expect(record).toMatchObject({ incomplete: true, error: "internal_error" })
    expect(record.output_tokens).toBeGreaterThanOrEqual(Math.ceil(streamed / 4))
  })

  it("a stream whose max_tokens is fully reserved is never cut by the budget cutoff", async () => {
    const inner = makeMemoryStore()
    // Just enough budget for the reservation of 16 output tokens; the fake's "tokN " text is ~1.4 estimated tokens each.
    h = await startHarness({
      store: Layer.succeed(Store, inner),
      config: (urls, keyHash, dir) => ({
        server: { listen: "127.0.0.1:0" },
        usage: { file: join(dir, "usage.jsonl") },
        providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
        routes: {
          claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        },
        tenants: {
          acme: {
            keys: [{ id: "ci", sha256: keyHash }],
            routes: "*",
            budgets: { month: { limit_usd: 0.0002, mode: "hard" } },
          },
        },
      }),
    })
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": h.key, "content-type": "application/json" },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 16,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    })
    const text = await response.text()
    expect(text).toContain("message_stop")
    expect(text).not.toContain("budget_exceeded")
    expect(h.records()[0]).toMatchObject({ incomplete: false, output_tokens: 16, error: null })
  })
})
