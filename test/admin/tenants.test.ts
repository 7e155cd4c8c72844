import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { dayPeriod, weekPeriod } from "../../src/limits/periods.js"
import { monthOf } from "../../src/limits/Store.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminGet, usageRecord, writeUsageFile } from "./fixtures.js"

/** `/admin/tenants` (spend, sessions, rate windows, overspend bound) and `/admin/breakers` after real traffic. */

const globexKey = generateKey()
const HOUR_MS = 3_600_000
let h: Harness
const seeded: Array<UsageRecord> = [
  usageRecord({ ts: new Date(Date.now() - HOUR_MS).toISOString(), session: "s-old", cost_micro_usd: 7000 }),
  usageRecord({ ts: new Date(Date.now() - 40 * 24 * HOUR_MS).toISOString(), cost_micro_usd: 99_000 }),
]

beforeAll(async () => {
  h = await startHarness({
    fakes: [
      { name: "A" },
      { name: "B", scenario: "status:500" },
      { name: "C", scenario: "status:429:7" },
      { name: "D", scenario: "hang-after:2-tokens" },
    ],
    env: { [ADMIN_ENV]: ADMIN_TOKEN },
    config: (urls, keyHash, dir) => {
      writeUsageFile(join(dir, "usage.jsonl"), seeded)
      const target = (provider: string) => ({
        api: "anthropic",
        targets: [{ provider, model: "claude-sonnet-5-5" }],
      })
      return {
        server: { listen: "127.0.0.1:0" },
        admin: { token_env: ADMIN_ENV },
        usage: { file: join(dir, "usage.jsonl") },
        retry: { max_attempts: 1 },
        breaker: { min_requests: 2, failure_ratio: 0.5, open_for: "30s" },
        reservation: { output_tokens: 100 },
        providers: {
          anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
          flaky: { kind: "anthropic", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
          limited: { kind: "anthropic", base_url: urls[2], api_key_env: UPSTREAM_KEY_ENV },
          hanging: { kind: "anthropic", base_url: urls[3], api_key_env: UPSTREAM_KEY_ENV },
        },
        routes: {
          claude: target("anthropic"),
          flaky: target("flaky"),
          limited: target("limited"),
          hang: target("hanging"),
        },
        tenants: {
          acme: {
            keys: [{ id: "ci", sha256: keyHash, budgets: { week: { limit_usd: 10, mode: "hard" } } }],
            routes: "*",
            limits: { requests_per_minute: 100, tokens_per_minute: 1_000_000 },
            budgets: {
              day: { limit_usd: 20, mode: "soft" },
              month: { limit_usd: 50, mode: "hard" },
              session: { limit_usd: 5, mode: "soft" },
            },
          },
          globex: { keys: [{ id: "web", sha256: hashKey(globexKey) }], routes: ["claude"] },
        },
      }
    },
  })
})

afterAll(() => h.close())

/** Sends a request and reads the whole response (its usage record is written before the response ends). */
const send = async (key: string, route: string, options: { session?: string } = {}) => {
  const response = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: {
      "x-api-key": key,
      "content-type": "application/json",
      ...(options.session === undefined ? {} : { "x-tollgate-session": options.session }),
    },
    body: JSON.stringify({ model: route, max_tokens: 12, messages: [{ role: "user", content: "hello" }] }),
  })
  await response.text()
  return response
}

interface TenantBody {
  readonly name: string
  readonly month: {
    month: string
    spend_micro_usd: number
    reserved_micro_usd: number
    remaining_micro_usd: number | null
  }
  readonly sessions: Array<{
    id: string
    spend_micro_usd: number
    reserved_micro_usd: number
    last_request_at: string
  }>
  readonly rate_limits: Record<
    "requests" | "tokens",
    { limit: number | null; current: number; previous: number; estimate: number }
  >
  readonly overspend_bound: { open_requests: number; micro_usd: number; unbounded_requests: number }
  readonly [key: string]: unknown
}

const spendOf = (records: ReadonlyArray<UsageRecord>, filter: (r: UsageRecord) => boolean) =>
  records.filter(filter).reduce((sum, r) => sum + r.cost_micro_usd, 0)

describe("/admin/tenants", () => {
  it("shows limits, budgets, month spend, live sessions with their spend, rate windows and the overspend bound", async () => {
    for (const session of ["s-one", "s-one", "s-two"])
      expect((await send(h.key, "claude", { session })).status).toBe(200)
    expect((await send(globexKey, "claude")).status).toBe(200)
    const records = h.records()
    const month = monthOf(Date.now())
    const response = await adminGet(h.url, "/admin/tenants")
    expect(response.status).toBe(200)
    const tenants = (response.body as { tenants: Array<TenantBody> }).tenants
    expect(tenants.map((t) => t.name)).toEqual(["acme", "globex"])
    const [acme, globex] = tenants as [TenantBody, TenantBody]

    const day = dayPeriod(Date.now())
    const week = weekPeriod(Date.now())
    const within = (p: { from: number; until: number }) => (r: UsageRecord) =>
      r.tenant === "acme" && Date.parse(r.ts) >= p.from && Date.parse(r.ts) < p.until
    const acmeDay = spendOf(records, within(day))
    const ciWeek = spendOf(records, (r) => within(week)(r) && r.key_id === "ci")
    expect(acmeDay).toBeGreaterThan(0)
    expect(acme.budgets).toEqual({
      day: {
        limit_micro_usd: 20_000_000,
        limit_usd: 20,
        mode: "soft",
        period: day.id,
        spend_micro_usd: acmeDay,
        reserved_micro_usd: 0,
        remaining_micro_usd: 20_000_000 - acmeDay,
      },
      week: null,
      month: expect.objectContaining({ limit_micro_usd: 50_000_000, period: monthOf(Date.now()) }),
      session: { limit_micro_usd: 5_000_000, limit_usd: 5, mode: "soft" },
    })
    expect(acme.keys).toEqual([
      {
        id: "ci",
        source: "config",
        budgets: {
          day: null,
          week: {
            limit_micro_usd: 10_000_000,
            limit_usd: 10,
            mode: "hard",
            period: week.id,
            spend_micro_usd: ciWeek,
            reserved_micro_usd: 0,
            remaining_micro_usd: 10_000_000 - ciWeek,
          },
          month: null,
        },
      },
    ])
    expect(acme).toMatchObject({
      routes: "*",
      limits: { requests_per_minute: 100, tokens_per_minute: 1_000_000, concurrent_requests: null },
      budgets: {
        month: { limit_micro_usd: 50_000_000, limit_usd: 50, mode: "hard" },
        session: { limit_micro_usd: 5_000_000, limit_usd: 5, mode: "soft" },
      },
      overspend_bound: { open_requests: 0, micro_usd: 0, unbounded_requests: 0 },
    })
    const acmeMonth = spendOf(records, (r) => r.tenant === "acme" && monthOf(Date.parse(r.ts)) === month)
    expect(acmeMonth).toBeGreaterThan(0)
    expect(acme.month).toEqual({
      month,
      spend_micro_usd: acmeMonth,
      reserved_micro_usd: 0,
      remaining_micro_usd: 50_000_000 - acmeMonth,
    })
    const sessions = new Map(acme.sessions.map((s) => [s.id, s]))
    expect([...sessions.keys()].sort()).toEqual(["s-old", "s-one", "s-two"])
    for (const id of ["s-old", "s-one", "s-two"]) {
      expect(sessions.get(id)!.spend_micro_usd, id).toBe(spendOf(records, (r) => r.session === id))
      expect(sessions.get(id)!.reserved_micro_usd).toBe(0)
    }
    expect(sessions.get("s-old")!.last_request_at).toBe(seeded[0]!.ts)
    const requests = acme.rate_limits.requests
    expect(requests.limit).toBe(100)
    expect(requests.current + requests.previous).toBe(3)
    expect(requests.estimate).toBeGreaterThan(0)
    expect(requests.estimate).toBeLessThanOrEqual(3)
    expect(acme.rate_limits.tokens.current + acme.rate_limits.tokens.previous).toBeGreaterThan(0)

    expect(globex).toMatchObject({
      routes: ["claude"],
      limits: { requests_per_minute: null, tokens_per_minute: null, concurrent_requests: null, queue: null },
      budgets: { month: null, session: null },
      month: { spend_micro_usd: spendOf(records, (r) => r.tenant === "globex"), remaining_micro_usd: null },
      sessions: [{ id: expect.stringMatching(/^d-[0-9a-f]{24}$/) }],
    })
    expect(globex.rate_limits.requests.limit).toBeNull()
  })

  it("/admin/tenants/:name shows one tenant the same way, and 404 for a name not in the config", async () => {
    const one = await adminGet(h.url, "/admin/tenants/acme")
    const all = await adminGet(h.url, "/admin/tenants")
    const listed = (all.body as { tenants: Array<TenantBody> }).tenants[0]!
    const single = one.body as TenantBody
    expect(one.status).toBe(200)
    expect({ ...single, rate_limits: undefined }).toEqual({ ...listed, rate_limits: undefined })
    const unknown = await adminGet(h.url, "/admin/tenants/nobody")
    expect(unknown.status).toBe(404)
    expect(unknown.body).toEqual({
      error: { type: "not_found_error", message: 'no tenant "nobody" in the config' },
    })
  })

  it("counts an open stream in the overspend bound and its reservation in month and session", async () => {
    const controller = new AbortController()
    const stream = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      signal: controller.signal,
      headers: { "x-api-key": h.key, "content-type": "application/json", "x-tollgate-session": "s-open" },
      body: JSON.stringify({
        model: "hang",
        max_tokens: 1000,
        stream: true,
        messages: [{ role: "user", content: "hello" }],
      }),
    })
    // Fake D sends two tokens and then nothing: once the first bytes are here the request is admitted and stays open.
    const reader = stream.body!.getReader()
    await reader.read()
    try {
      const acme = (await adminGet(h.url, "/admin/tenants/acme")).body as TenantBody
      // (1000 max_tokens − 100 reserved) × 10 USD per million output tokens.
      expect(acme.overspend_bound).toEqual({ open_requests: 1, micro_usd: 9000, unbounded_requests: 0 })
      expect(acme.month.reserved_micro_usd).toBeGreaterThan(0)
      expect(acme.sessions.find((s) => s.id === "s-open")!.reserved_micro_usd).toBeGreaterThan(0)
    } finally {
      controller.abort()
    }
  })
})

interface BreakerBody {
  readonly tenant: string | null
  readonly provider: string
  readonly model: string
  readonly state: string
  readonly failure_ratio: number
  readonly attempts: number
  readonly testable_at: string | null
  readonly cooldown_until: string | null
}

describe("/admin/breakers", () => {
  it("shows an opened breaker with when it may be tested, and a retry-after cooldown with when it ends", async () => {
    // Two tenants are configured and only acme sends: its failures open acme's own breaker of the target,
    // listed with `tenant`; the shared one (tenant null) counts them but stays closed (ADR 0048).
    const before = Date.now()
    for (let i = 0; i < 2; i++) expect((await send(h.key, "flaky")).status).toBe(500)
    expect((await send(h.key, "limited")).status).toBe(429)
    const after = Date.now()
    const response = await adminGet(h.url, "/admin/breakers")
    expect(response.status).toBe(200)
    const listed = (response.body as { breakers: Array<BreakerBody> }).breakers
    const breakers = new Map(listed.filter((b) => b.tenant === null).map((b) => [b.provider, b]))
    expect(breakers.get("flaky")).toMatchObject({
      model: "claude-sonnet-5-5",
      state: "closed",
      failure_ratio: 1,
      attempts: 2,
      testable_at: null,
    })
    const owned = listed.filter((b) => b.tenant !== null)
    expect(owned).toHaveLength(1)
    const flaky = owned[0]!
    expect(flaky).toMatchObject({
      tenant: "acme",
      provider: "flaky",
      model: "claude-sonnet-5-5",
      state: "open",
      failure_ratio: 1,
      attempts: 2,
      cooldown_until: null,
    })
    const testable = Date.parse(flaky.testable_at!)
    expect(testable).toBeGreaterThanOrEqual(before + 30_000)
    expect(testable).toBeLessThanOrEqual(after + 30_000)
    const limited = breakers.get("limited")!
    expect(limited).toMatchObject({ state: "closed", testable_at: null })
    const cooldown = Date.parse(limited.cooldown_until!)
    expect(cooldown).toBeGreaterThanOrEqual(before + 7_000)
    expect(cooldown).toBeLessThanOrEqual(after + 7_000)
    expect(breakers.get("anthropic")).toMatchObject({
      state: "closed",
      failure_ratio: 0,
      testable_at: null,
      cooldown_until: null,
    })
    expect((await send(h.key, "flaky")).status).toBe(502)
  })
})
