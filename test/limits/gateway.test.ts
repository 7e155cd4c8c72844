import Anthropic from "@anthropic-ai/sdk"
import { Effect, Layer } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { Store, type StoreService } from "../../src/limits/Store.js"
import { encodeRecord, type UsageRecord } from "../../src/meter/record.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { tempDir } from "../support/tempDirs.js"

/** Limits and budgets through the gateway, on a memory store the test can read. */

interface TenantSetup {
  readonly limits?: Record<string, number>
  readonly budgets?: Record<string, unknown>
  /** The `budgets` of key "ci" (the harness key). */
  readonly keyBudgets?: Record<string, unknown>
  readonly reservation?: number
  readonly targets?: ReadonlyArray<{ provider: "a" | "b"; model: string }>
  readonly scenarioA?: string
}

const PRICES = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10 },
    { model: "claude-opus-5", input: 15, output: 75 },
  ],
}

let store: StoreService
let h: Harness | undefined

const start = async (
  setup: TenantSetup = {},
  options: { usageFile?: string; memoryRestore?: boolean } = {},
) => {
  store = makeMemoryStore()
  h = await startHarness({
    fakes: [{ name: "A", scenario: setup.scenarioA ?? "ok" }, { name: "B" }],
    prices: PRICES,
    ...(options.memoryRestore ? {} : { store: Layer.succeed(Store, store) }),
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: options.usageFile ?? join(dir, "usage.jsonl") },
      ...(setup.reservation !== undefined ? { reservation: { output_tokens: setup.reservation } } : {}),
      providers: {
        a: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        b: { kind: "anthropic", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
      },
      routes: {
        claude: {
          api: "anthropic",
          targets: setup.targets ?? [{ provider: "a", model: "claude-sonnet-5-5" }],
        },
      },
      tenants: {
        acme: {
          keys: [{ id: "ci", sha256: keyHash, ...(setup.keyBudgets ? { budgets: setup.keyBudgets } : {}) }],
          routes: "*",
          ...(setup.limits ? { limits: setup.limits } : {}),
          ...(setup.budgets ? { budgets: setup.budgets } : {}),
        },
      },
    }),
  })
  return h
}

afterEach(async () => {
  await h?.close()
  h = undefined
})

/** Sends a request and reads the whole response (the usage record is written before the response ends). */
const post = async (
  harness: Harness,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  path = "/v1/messages",
) => {
  const response = await fetch(`${harness.url}${path}`, {
    method: "POST",
    headers: { "x-api-key": harness.key, "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: "claude",
      max_tokens: 8,
      messages: [{ role: "user", content: "hello" }],
      ...body,
    }),
  })
  // A stream cut by a reset ends the read with an error; what arrived is enough for these tests.
  const text = await response.text().catch(() => "")
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) as unknown }
}

const state = () => Effect.runPromise(store.tenantState("acme", Date.now()))
const last = (): UsageRecord => h!.records().at(-1)!

describe("rate limits through the gateway", () => {
  it("the ratelimit headers count down; the request over the limit gets 429 with retry-after and reaches no provider", async () => {
    const harness = await start({ limits: { requests_per_minute: 3, tokens_per_minute: 1_000_000 } })
    const remaining: Array<string | null> = []
    for (let i = 0; i < 3; i++) {
      const response = await post(harness, {})
      expect(response.status).toBe(200)
      expect(response.headers.get("ratelimit-limit")).toBe("3")
      expect(Number(response.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(1)
      remaining.push(response.headers.get("ratelimit-remaining"))
    }
    expect(remaining).toEqual(["2", "1", "0"])
    const refused = await post(harness, {})
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(refused.headers.get("ratelimit-remaining")).toBe("0")
    expect(refused.json()).toMatchObject({ type: "error", error: { type: "rate_limit_error" } })
    expect(harness.fakes[0]!.requests().count).toBe(3)
    expect(last()).toMatchObject({ status: 429, cost_micro_usd: 0, provider: null })
  })

  it("a request that needs more tokens than tokens_per_minute gets 429, retry-after 60, and says to make it smaller", async () => {
    const harness = await start({ limits: { tokens_per_minute: 100 } })
    const response = await post(harness, { max_tokens: 500 })
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("60")
    const body = response.json() as { error: { message: string } }
    expect(body.error.message).toContain("make the request smaller")
  })

  it("count_tokens counts only against the request limit and costs nothing", async () => {
    const harness = await start({ limits: { requests_per_minute: 2, tokens_per_minute: 1 } })
    const response = await post(harness, { max_tokens: undefined }, {}, "/v1/messages/count_tokens")
    expect(response.status).toBe(200)
    expect(response.json()).toEqual({ input_tokens: 1 })
    expect(response.headers.get("ratelimit-limit")).toBe("2")
    expect(last()).toMatchObject({ endpoint: "/v1/messages/count_tokens", cost_micro_usd: 0 })
    expect((await state()).monthSpend).toBe(0)
  })
})

describe("budgets through the gateway", () => {
  it("a hard month budget answers 402 budget_exceeded and the official SDK does not send it again", async () => {
    // The request reserves 86 micro-USD; the budget is 50.
    const harness = await start({ budgets: { month: { limit_usd: 0.00005, mode: "hard" } } })
    const client = new Anthropic({ apiKey: harness.key, baseURL: harness.url })
    const error = await client.messages
      .create({ model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hello" }] })
      .catch((e: unknown) => e)
    const apiError = error as { status?: number; error?: { error?: { type?: string } } }
    expect(apiError.status).toBe(402)
    expect(apiError.error?.error?.type).toBe("budget_exceeded")
    expect(harness.records()).toHaveLength(1)
    expect(harness.fakes[0]!.requests().count).toBe(0)
  })

  it("a soft budget admits requests past its limit", async () => {
    const harness = await start({ budgets: { month: { limit_usd: 0.0001, mode: "soft" } } })
    for (let i = 0; i < 3; i++) expect((await post(harness, {})).status).toBe(200)
    expect((await state()).monthSpend).toBe(harness.records().reduce((sum, r) => sum + r.cost_micro_usd, 0))
  })

  it("settle replaces the reservation with the real cost", async () => {
    const harness = await start()
    await post(harness, {})
    const record = last()
    expect(record.reserved_micro_usd).toBeGreaterThan(record.cost_micro_usd)
    // "hello" → 2 estimated input tokens; 8 reserved output tokens; 3 and 10 USD per million.
    expect(record.reserved_micro_usd).toBe(2 * 3 + 8 * 10)
    expect(record.cost_micro_usd).toBe(1 * 3 + 8 * 10)
    expect(await state()).toMatchObject({ monthSpend: record.cost_micro_usd, monthReserved: 0 })
  })

  it("an error status costs 0 and removes the reservation", async () => {
    const harness = await start({ scenarioA: "status:400" })
    expect((await post(harness, {})).status).toBe(400)
    expect(last()).toMatchObject({ status: 400, cost_micro_usd: 0 })
    expect(await state()).toMatchObject({ monthSpend: 0, monthReserved: 0 })
  })

  it("a success without usage costs the larger of the target's estimate and the input estimate", async () => {
    const harness = await start({ scenarioA: "no-usage" })
    await post(harness, {})
    expect(last()).toMatchObject({ usage_estimated: true, cost_micro_usd: 2 * 3 + 8 * 10 })
  })

  it("an incomplete stream costs at least the serving target's estimate", async () => {
    const harness = await start({ scenarioA: "reset-after:2-tokens" })
    await post(harness, { stream: true })
    expect(last()).toMatchObject({ incomplete: true, cost_micro_usd: 2 * 3 + 8 * 10 })
    expect((await state()).monthSpend).toBe(2 * 3 + 8 * 10)
  })

  it("reserves the highest estimate among the targets and settles at the serving target's price", async () => {
    const harness = await start({
      scenarioA: "status:529",
      targets: [
        { provider: "a", model: "claude-sonnet-5-5" },
        { provider: "b", model: "claude-opus-5" },
      ],
    })
    const response = await post(harness, {})
    expect(response.headers.get("x-tollgate-provider")).toBe("b")
    expect(last()).toMatchObject({
      reserved_micro_usd: 2 * 15 + 8 * 75,
      cost_micro_usd: 1 * 15 + 8 * 75,
      provider: "b",
    })
  })

  it("a hard session budget refuses that session and admits another", async () => {
    const harness = await start({ budgets: { session: { limit_usd: 0.0001, mode: "hard" } } })
    const first = await post(harness, {}, { "x-tollgate-session": "agent-1" })
    expect(first.status).toBe(200)
    expect(first.headers.get("x-tollgate-session")).toBe("agent-1")
    expect((await post(harness, {}, { "x-tollgate-session": "agent-1" })).status).toBe(402)
    expect((await post(harness, {}, { "x-tollgate-session": "agent-2" })).status).toBe(200)
  })

  it("the stream cutoff ends a hard-budget stream with a budget_exceeded event", async () => {
    const harness = await start({ budgets: { month: { limit_usd: 0.003, mode: "hard" } }, reservation: 10 })
    const response = await post(
      harness,
      { stream: true, max_tokens: 5000 },
      { "x-fake-scenario": "max-tokens" },
    )
    const text = response.text
    expect(response.status).toBe(200)
    expect(text).toContain('"type":"budget_exceeded"')
    expect(text).not.toContain("message_stop")
    const record = last()
    expect(record).toMatchObject({ incomplete: true, error: "budget_exceeded" })
    const { monthSpend, monthReserved } = await state()
    expect(monthReserved).toBe(0)
    // Approximate: the overshoot is bounded by one extension block and the tokens in flight.
    expect(monthSpend).toBeLessThan(3_000 + 1_000)
    expect(record.output_tokens).toBeLessThan(5000)
  })
})

describe("day, week and key budgets through the gateway (issue #19)", () => {
  it("a key's hard day budget answers 402 naming it; the record's budget is key.day", async () => {
    const harness = await start({
      budgets: { month: { limit_usd: 100, mode: "hard" } },
      keyBudgets: { day: { limit_usd: 0.0002, mode: "hard" } },
    })
    // "hello" with max_tokens 8 reserves 2 × 3 + 8 × 10 = 86 micro-USD; 200 fit two.
    expect((await post(harness, {})).status).toBe(200)
    expect((await post(harness, {})).status).toBe(200)
    const refused = await post(harness, {})
    expect(refused.status).toBe(402)
    expect(refused.json()).toEqual({
      type: "error",
      error: { type: "budget_exceeded", message: "the key's day budget has no money left for this request" },
    })
    expect(harness.fakes[0]!.requests().count).toBe(2)
    expect(last()).toMatchObject({
      status: 402,
      error: "budget_exceeded",
      budget: "key.day",
      cost_micro_usd: 0,
    })
    expect(
      harness
        .records()
        .slice(0, 2)
        .map((r) => r.budget),
    ).toEqual([null, null])
  })

  it("a hard tenant week budget refuses every key; the record's budget is tenant.week", async () => {
    const harness = await start({ budgets: { week: { limit_usd: 0.0001, mode: "hard" } } })
    expect((await post(harness, {})).status).toBe(200)
    const refused = await post(harness, {})
    expect(refused.status).toBe(402)
    expect(refused.json()).toMatchObject({
      error: { message: "the tenant's week budget has no money left for this request" },
    })
    expect(last()).toMatchObject({ status: 402, budget: "tenant.week" })
  })

  it("the stream cutoff by a key's month budget ends the stream and the record names key.month", async () => {
    const harness = await start({
      keyBudgets: { month: { limit_usd: 0.003, mode: "hard" } },
      reservation: 10,
    })
    const response = await post(
      harness,
      { stream: true, max_tokens: 5000 },
      { "x-fake-scenario": "max-tokens" },
    )
    expect(response.status).toBe(200)
    expect(response.text).toContain('"type":"budget_exceeded"')
    expect(response.text).not.toContain("message_stop")
    const record = last()
    expect(record).toMatchObject({ incomplete: true, error: "budget_exceeded", budget: "key.month" })
    const month = new Date().toISOString().slice(0, 7)
    const { budgets } = await Effect.runPromise(
      store.tenantState("acme", Date.now(), [{ name: "month", key: "ci", period: month }]),
    )
    expect(budgets[0]!.reserved).toBe(0)
    expect(budgets[0]!.spend).toBe(record.cost_micro_usd)
    expect(budgets[0]!.spend).toBeLessThan(3_000 + 1_000)
  })
})

describe("sessions", () => {
  it("an invalid x-tollgate-session is a 400 in the API's format", async () => {
    const harness = await start()
    for (const bad of ["has space", "x".repeat(129), "tab\tinside"]) {
      const response = await post(harness, {}, { "x-tollgate-session": bad })
      expect(response.status).toBe(400)
      expect(response.json()).toMatchObject({ error: { type: "invalid_request_error" } })
    }
    expect(harness.fakes[0]!.requests().count).toBe(0)
  })

  it("a derived session is stable across the turns of one conversation and differs between conversations", async () => {
    const harness = await start()
    const turn = (messages: Array<{ role: string; content: string }>, system?: string) =>
      post(harness, { messages, ...(system ? { system } : {}) }).then((r) =>
        r.headers.get("x-tollgate-session"),
      )
    const first = await turn([{ role: "user", content: "plan a trip" }], "be brief")
    const second = await turn(
      [
        { role: "user", content: "plan a trip" },
        { role: "assistant", content: "where to?" },
        { role: "user", content: "Lisbon" },
      ],
      "be brief",
    )
    expect(first).toMatch(/^d-[0-9a-f]{24}$/)
    expect(second).toBe(first)
    expect(await turn([{ role: "user", content: "plan a trip" }], "be verbose")).not.toBe(first)
    expect(await turn([{ role: "user", content: "something else" }], "be brief")).not.toBe(first)
    expect(last().session).toMatch(/^d-/)
  })
})

describe("restart", () => {
  it("the memory store rebuilds month and session spend from the usage file before it accepts requests", async () => {
    const dir = tempDir("tollgate-restore-")
    const usageFile = join(dir, "usage.jsonl")
    const now = new Date()
    const base: UsageRecord = {
      ts: now.toISOString(),
      request_id: "r",
      tenant: "acme",
      key_id: "ci",
      route: "claude",
      endpoint: "/v1/messages",
      stream: false,
      provider: "a",
      model: "claude-sonnet-5-5",
      attempts: 1,
      status: 200,
      input_tokens: 1,
      output_tokens: 1,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      reserved_micro_usd: 0,
      cost_micro_usd: 4_000,
      usage_estimated: false,
      incomplete: false,
      session: "agent-9",
      duration_ms: 1,
      error: null,
      upstream_endpoint: "/v1/messages",
      trace_id: null,
      budget: null,
      cache_saved_micro_usd: 0,
      moved_from: null,
      moved_reason: null,
    }
    const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 15)).toISOString()
    writeFileSync(
      usageFile,
      encodeRecord(base) +
        encodeRecord({ ...base, ts: lastMonth, cost_micro_usd: 999_999, session: null }) +
        encodeRecord({ ...base, cost_micro_usd: 1_000, session: null }) +
        '{"ts":"torn',
    )
    const harness = await start(
      { budgets: { month: { limit_usd: 0.005, mode: "hard" } } },
      { usageFile, memoryRestore: true },
    )
    // 5,000 micro-USD already spent this month: the next request's reservation does not fit.
    const response = await post(harness, {})
    expect(response.status).toBe(402)
  })
})
