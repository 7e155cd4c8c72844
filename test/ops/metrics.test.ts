import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { TenantConfig } from "../../src/config/model.js"
import {
  makeProgress,
  overheadMs,
  usageRecord,
  type Committed,
  type Ending,
  type RequestInfo,
} from "../../src/gateway/stages.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { make as makeMetrics } from "../../src/ops/Metrics.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { ROOT } from "../support/processes.js"

/** One sample of the exposition text. */
interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

const parseExposition = (text: string): Array<Sample> => {
  const samples: Array<Sample> = []
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) throw new Error(`not an exposition line: ${line}`)
    const labels: Record<string, string> = {}
    for (const pair of (match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!
    samples.push({ name: match[1]!, labels, value: Number(match[3]) })
  }
  return samples
}

const MODEL = "claude-sonnet-5-5"
const limitedKey = generateKey()
const brokeKey = generateKey()

/** Four fakes: 0 answers 529, 1 answers normally, 2 answers 500, 3 answers 429 with retry-after: 30. */
const metricsConfig = (fakes: ReadonlyArray<string>, keyHash: string, dir: string) => {
  const provider = (url: string | undefined) => ({
    kind: "anthropic",
    base_url: url,
    api_key_env: UPSTREAM_KEY_ENV,
  })
  const route = (...providers: Array<string>) => ({
    api: "anthropic",
    targets: providers.map((name) => ({ provider: name, model: MODEL })),
  })
  return {
    server: { listen: "127.0.0.1:0" },
    usage: { file: join(dir, "usage.jsonl") },
    reservation: { output_tokens: 4 },
    breaker: { min_requests: 2, failure_ratio: 0.5, open_for: "10m" },
    providers: {
      overloaded: provider(fakes[0]),
      backup: provider(fakes[1]),
      flaky: provider(fakes[2]),
      tired: provider(fakes[3]),
    },
    routes: {
      fallback: route("overloaded", "backup"),
      flaky: route("flaky"),
      cool: route("tired", "backup"),
      plain: route("backup"),
      // No price for this model (PRICES has claude-sonnet-5-5 and gpt-5-mini): served at cost 0.
      unpriced: { api: "anthropic", targets: [{ provider: "backup", model: "claude-free-9" }] },
    },
    tenants: {
      acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" },
      limited: {
        keys: [{ id: "l", sha256: hashKey(limitedKey) }],
        routes: "*",
        limits: { requests_per_minute: 1 },
      },
      broke: {
        keys: [{ id: "b", sha256: hashKey(brokeKey) }],
        // A budget tenant must not reach an unpriced target (config validate refuses it).
        routes: ["fallback", "flaky", "cool", "plain"],
        budgets: { month: { limit_usd: 0.000001, mode: "hard" } },
      },
    },
  }
}

describe("GET /metrics after scripted traffic", () => {
  let h: Harness

  const send = (route: string, key = h.key, extra: Record<string, unknown> = {}, headers = {}) =>
    fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", ...headers },
      body: JSON.stringify({
        model: route,
        max_tokens: 8,
        messages: [{ role: "user", content: "count these words please" }],
        ...extra,
      }),
    })

  const statusOf = async (response: Promise<Response>) => {
    const r = await response
    await r.text()
    return r.status
  }

  const scrape = async () => {
    const response = await fetch(`${h.url}/metrics`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    const samples = parseExposition(await response.text())
    return (name: string, labels: Record<string, string> = {}): number | undefined => {
      const wanted = Object.entries(labels)
      const found = samples.filter(
        (s) =>
          s.name === name &&
          Object.keys(s.labels).length === wanted.length &&
          wanted.every(([k, v]) => s.labels[k] === v),
      )
      if (found.length > 1)
        throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`)
      return found[0]?.value
    }
  }

  /** The sum of the samples of `name` whose labels include `labels` (other labels summed over). */
  const scrapeTotals = async () => {
    const samples = parseExposition(await (await fetch(`${h.url}/metrics`)).text())
    return (name: string, labels: Record<string, string> = {}): number =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((total, s) => total + s.value, 0)
  }

  beforeAll(async () => {
    h = await startHarness({
      fakes: [{ scenario: "status:529" }, {}, { scenario: "status:500" }, { scenario: "status:429:30" }],
      config: metricsConfig,
    })
  })
  afterAll(() => h?.close())

  it("every counter and gauge moved by exactly what happened", async () => {
    expect(await statusOf(send("fallback"))).toBe(200) // 529 on overloaded, fallback to backup
    expect(await statusOf(send("flaky"))).toBe(500) // 500, the same target once more, acme's own breaker opens
    expect(await statusOf(send("flaky"))).toBe(502) // acme's breaker open: no attempt
    expect(await statusOf(send("cool"))).toBe(200) // 429 retry-after 30 on tired, fallback to backup
    expect(await statusOf(send("plain", limitedKey))).toBe(200)
    expect(await statusOf(send("plain", limitedKey))).toBe(429) // requests_per_minute: 1
    expect(await statusOf(send("plain", brokeKey))).toBe(402) // a 1 micro-USD hard budget

    // A stream held open (100 ms between events) while the gauges are read.
    const stream = await send(
      "plain",
      h.key,
      { stream: true, max_tokens: 16 },
      { "x-fake-scenario": "delay:100" },
    )
    expect(stream.status).toBe(200)
    const reader = stream.body!.getReader()
    await reader.read()
    const during = await scrape()
    expect(during("tollgate_open_streams")).toBe(1)
    expect(during("tollgate_open_requests", { tenant: "acme" })).toBe(1)
    // (max_tokens 16 − reserved 4) × 10 USD per million output tokens = 120 micro-USD
    expect(during("tollgate_overspend_bound_micro_usd", { tenant: "acme" })).toBe(120)
    expect(during("tollgate_open_requests_unbounded", { tenant: "acme" })).toBe(0)
    while (!(await reader.read()).done) {
      // read the stream to its end
    }

    await eventually(async () => (await scrape())("tollgate_open_streams") === 0)
    const m = await scrape()

    const requests = (tenant: string, route: string, provider: string, status: string) =>
      m("tollgate_requests_total", { tenant, route, provider, status })
    expect(requests("acme", "fallback", "backup", "200")).toBe(1)
    expect(requests("acme", "flaky", "flaky", "500")).toBe(1)
    expect(requests("acme", "flaky", "", "502")).toBe(1)
    expect(requests("acme", "cool", "backup", "200")).toBe(1)
    expect(requests("acme", "plain", "backup", "200")).toBe(1) // the stream
    expect(requests("limited", "plain", "backup", "200")).toBe(1)
    expect(requests("limited", "plain", "", "429")).toBe(1)
    expect(requests("broke", "plain", "", "402")).toBe(1)
    expect(requests("broke", "plain", "backup", "200")).toBeUndefined()

    const attempts = (provider: string, result: string) =>
      m("tollgate_upstream_attempts_total", { provider, model: MODEL, result })
    expect(attempts("overloaded", "failure")).toBe(1)
    expect(attempts("flaky", "failure")).toBe(2)
    expect(attempts("tired", "neutral")).toBe(1)
    expect(attempts("backup", "success")).toBe(4)
    expect(attempts("backup", "failure")).toBeUndefined()

    const latencyCount = (provider: string) =>
      m("tollgate_upstream_latency_seconds_count", { provider, model: MODEL })
    expect([
      latencyCount("overloaded"),
      latencyCount("backup"),
      latencyCount("flaky"),
      latencyCount("tired"),
    ]).toEqual([1, 4, 2, 1])
    expect(
      m("tollgate_upstream_latency_seconds_bucket", { provider: "backup", model: MODEL, le: "+Inf" }),
    ).toBe(4)
    expect(m("tollgate_overhead_seconds_count")).toBe(8)
    expect(m("tollgate_overhead_seconds_bucket", { le: "+Inf" })).toBe(8)

    expect(m("tollgate_extra_attempts_total", { kind: "fallback" })).toBe(2)
    expect(m("tollgate_extra_attempts_total", { kind: "retry" })).toBe(1)
    expect(m("tollgate_retry_budget_refusals_total")).toBe(0)
    expect(m("tollgate_store_errors_total")).toBe(0)

    // Three tenants configured and only acme failed: the shared breaker stays closed, acme's own is open (ADR 0048).
    expect(m("tollgate_breaker_state", { provider: "flaky", model: MODEL })).toBe(0)
    expect(m("tollgate_breaker_failure_ratio", { provider: "flaky", model: MODEL })).toBe(1)
    expect(m("tollgate_tenant_breakers_open")).toBe(1)
    expect(m("tollgate_breaker_state", { provider: "overloaded", model: MODEL })).toBe(0)
    expect(m("tollgate_breaker_state", { provider: "backup", model: MODEL })).toBe(0)
    expect(m("tollgate_breaker_state", { provider: "tired", model: MODEL })).toBe(0)
    expect(m("tollgate_breaker_failure_ratio", { provider: "overloaded", model: MODEL })).toBe(1)
    expect(m("tollgate_cooldowns_active")).toBe(1)

    expect(m("tollgate_rate_limit_refusals_total", { tenant: "limited" })).toBe(1)
    expect(m("tollgate_rate_limit_refusals_total", { tenant: "acme" })).toBe(0)
    expect(m("tollgate_budget_refusals_total", { tenant: "broke" })).toBe(1)
    expect(m("tollgate_budget_refusals_total", { tenant: "acme" })).toBe(0)
    expect(m("tollgate_budget_cutoffs_total", { tenant: "broke" })).toBe(0)

    const records = h.records()
    expect(records).toHaveLength(8)
    // Spend and tokens by tenant, route and upstream model ("" when no target served): as the records say.
    const total = await scrapeTotals()
    const sum = (field: keyof UsageRecord, tenant: string, route?: string, model?: string | null) =>
      records
        .filter(
          (r) =>
            r.tenant === tenant &&
            (route === undefined || r.route === route) &&
            (model === undefined || r.model === model),
        )
        .reduce((total, r) => total + Number(r[field]), 0)
    for (const tenant of ["acme", "limited", "broke"]) {
      expect(total("tollgate_spend_micro_usd_total", { tenant })).toBe(sum("cost_micro_usd", tenant))
      expect(total("tollgate_tokens_total", { tenant, kind: "input" })).toBe(sum("input_tokens", tenant))
      expect(total("tollgate_tokens_total", { tenant, kind: "output" })).toBe(sum("output_tokens", tenant))
      expect(total("tollgate_tokens_total", { tenant, kind: "cache_read" })).toBe(0)
      expect(total("tollgate_tokens_total", { tenant, kind: "cache_write" })).toBe(0)
      for (const route of ["fallback", "flaky", "cool", "plain"]) {
        for (const model of [MODEL, null]) {
          const labels = { tenant, route, model: model ?? "" }
          const spent = m("tollgate_spend_micro_usd_total", labels)
          const served = records.some((r) => r.tenant === tenant && r.route === route && r.model === model)
          expect(spent, JSON.stringify(labels)).toBe(
            served ? sum("cost_micro_usd", tenant, route, model) : undefined,
          )
          if (served) {
            expect(m("tollgate_tokens_total", { ...labels, kind: "output" })).toBe(
              sum("output_tokens", tenant, route, model),
            )
          }
        }
      }
    }
    expect(sum("cost_micro_usd", "acme", "fallback", MODEL)).toBeGreaterThan(0)
    expect(m("tollgate_spend_micro_usd_total", { tenant: "broke", route: "plain", model: "" })).toBe(0)

    // End-to-end duration by route and status: one observation per record, its duration_ms.
    for (const record of records) {
      const labels = { route: record.route, status: String(record.status) }
      const same = records.filter((r) => r.route === record.route && r.status === record.status)
      expect(m("tollgate_request_duration_seconds_count", labels)).toBe(same.length)
      expect(m("tollgate_request_duration_seconds_sum", labels)).toBeCloseTo(
        same.reduce((t, r) => t + r.duration_ms / 1000, 0),
        6,
      )
      expect(m("tollgate_request_duration_seconds_bucket", { ...labels, le: "600" })).toBe(same.length)
    }
    // The stream took ≥ 100 ms between its events: not in the 5 ms bucket (quick JSON answers may be).
    const fast = m("tollgate_request_duration_seconds_bucket", { route: "plain", status: "200", le: "0.005" })
    const all = m("tollgate_request_duration_seconds_count", { route: "plain", status: "200" })
    expect(fast).toBeLessThan(all!)
    expect(
      m("tollgate_unpriced_requests_total", { route: "plain", provider: "backup", model: MODEL }),
    ).toBeUndefined()
    expect(m("tollgate_config_reloads_total", { result: "ok" })).toBe(0)
    expect(m("tollgate_config_reloads_total", { result: "error" })).toBe(0)

    expect(m("tollgate_open_streams")).toBe(0)
    expect(m("tollgate_open_requests", { tenant: "acme" })).toBe(0)
    expect(m("tollgate_overspend_bound_micro_usd", { tenant: "acme" })).toBe(0)
    expect(m("tollgate_process_resident_memory_bytes")).toBeGreaterThan(0)
  })

  it("a request refused after its route was resolved counts under that route; an unknown route under none", async () => {
    const before = await scrape()
    const count = (m: typeof before, route: string, status: string) =>
      m("tollgate_requests_total", { tenant: "acme", route, provider: "", status }) ?? 0
    // An invalid x-tollgate-session is refused (400) after the route is known.
    expect(await statusOf(send("plain", h.key, {}, { "x-tollgate-session": "has spaces" }))).toBe(400)
    // A route this gateway does not have is never a label (a client's string).
    expect(await statusOf(send("no-such-route-from-a-client"))).toBe(404)
    const after = await scrape()
    expect(count(after, "plain", "400") - count(before, "plain", "400")).toBe(1)
    expect(count(after, "", "404") - count(before, "", "404")).toBe(1)
    expect(
      after("tollgate_requests_total", {
        tenant: "acme",
        route: "no-such-route-from-a-client",
        provider: "",
        status: "404",
      }),
    ).toBeUndefined()
    // Nor in any other metric: the 404 is counted under route "" everywhere.
    const text = await (await fetch(`${h.url}/metrics`)).text()
    expect(text).not.toContain("no-such-route-from-a-client")
    expect(after("tollgate_request_duration_seconds_count", { route: "", status: "404" })).toBeGreaterThan(0)
  })

  it("a 2xx from a target without a price is counted by route, provider and model (its cost is 0)", async () => {
    const before = await scrape()
    const labels = { route: "unpriced", provider: "backup", model: "claude-free-9" }
    expect(before("tollgate_unpriced_requests_total", labels)).toBeUndefined()
    expect(await statusOf(send("unpriced"))).toBe(200)
    expect(await statusOf(send("unpriced", h.key, { stream: true }))).toBe(200)
    const after = await scrape()
    expect(after("tollgate_unpriced_requests_total", labels)).toBe(2)
    expect(
      h
        .records()
        .filter((r) => r.route === "unpriced")
        .map((r) => r.cost_micro_usd),
    ).toEqual([0, 0])
    expect(
      after("tollgate_spend_micro_usd_total", { tenant: "acme", route: "unpriced", model: "claude-free-9" }),
    ).toBe(0)
    expect(
      after("tollgate_tokens_total", {
        tenant: "acme",
        route: "unpriced",
        model: "claude-free-9",
        kind: "output",
      }),
    ).toBeGreaterThan(0)
  })

  it("the documented metrics are exactly the exported ones, with their types", async () => {
    const text = await (await fetch(`${h.url}/metrics`)).text()
    const exported = [...text.matchAll(/^# TYPE (tollgate_\w+) (\w+)$/gm)]
      .map(([, name, type]) => `${name} ${type}`)
      .filter((entry) => !/^tollgate_(process|nodejs)_/.test(entry))
    const docs = readFileSync(join(ROOT, "docs/operations.md"), "utf8")
    const documented = [...docs.matchAll(/^\|\s*`(tollgate_\w+)`\s*\|\s*(\w+)\s*\|/gm)].map(
      ([, name, type]) => `${name} ${type}`,
    )
    expect(exported).toHaveLength(43)
    expect([...new Set(documented)].sort()).toEqual(exported.sort())
  })
})

describe("metrics of two gateways in one process", () => {
  it("each gateway has its own registry", async () => {
    const [a, b] = await Promise.all([startHarness(), startHarness()])
    try {
      const response = await fetch(`${a.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": a.key, "content-type": "application/json" },
        body: JSON.stringify({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] }),
      })
      expect(response.status).toBe(200)
      await response.text()
      const count = async (h: Harness) =>
        parseExposition(await (await fetch(`${h.url}/metrics`)).text())
          .filter((s) => s.name === "tollgate_requests_total")
          .reduce((total, s) => total + s.value, 0)
      expect(await count(a)).toBe(1)
      expect(await count(b)).toBe(0)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })
})

const ENDING: Ending = { status: 200, error: null, incomplete: false, usageEstimated: false }

describe("the Tollgate-added latency", () => {
  const tenant: TenantConfig = {
    name: "acme",
    keys: [],
    routes: "*",
    limits: { requestsPerMinute: undefined, tokensPerMinute: undefined, concurrentRequests: undefined },
    budgets: { day: undefined, week: undefined, month: undefined, session: undefined },
  }
  /** The telemetry of a request that arrived at `startMs`, waited `upstreamMs` upstream, and committed at `committedMs`. */
  const done = (startMs: number, upstreamMs: number, nowMs: number, committedMs?: number) => {
    const info: RequestInfo = {
      id: "r",
      startMs,
      endpoint: "/v1/messages",
      api: "anthropic",
      principal: { tenant, keyId: "ci", keyBudgets: { day: undefined, week: undefined, month: undefined } },
      trace: undefined,
      caller: undefined,
    }
    const progress = makeProgress()
    progress.tally.upstreamMs = upstreamMs
    if (committedMs !== undefined) progress.committed = { committedMs } as Committed
    const record = usageRecord(info, progress, ENDING, 0, nowMs)
    return {
      record,
      route: "",
      committed: committedMs !== undefined,
      overheadMs: overheadMs(info, progress, nowMs),
      unpriced: false,
    }
  }

  it("is the time to the commit minus upstream waiting, or the whole time for a response Tollgate made", async () => {
    const metrics = makeMetrics({
      tenants: () => ["acme"],
      breakers: () => [],
      overspend: () => ({ open: 0, microUsd: 0, unbounded: 0 }),
      now: () => 10_007,
      relayBuffered: () => 0,
      bodyBuffered: () => 0,
    })
    // Relayed: committed 43 ms after arrival, 40 of them upstream; the 900 ms of streaming after it do not count.
    metrics.telemetry.requestDone(done(1_000, 40, 1_943, 1_043))
    // Refused: no upstream, answered at now() = 7 ms after arrival.
    metrics.telemetry.requestDone(done(10_000, 0, 10_007))
    const samples = parseExposition(await Effect.runPromise(metrics.scrape))
    const bucket = (le: string) =>
      samples.find((s) => s.name === "tollgate_overhead_seconds_bucket" && s.labels.le === le)?.value
    expect([bucket("0.002"), bucket("0.005"), bucket("0.01"), bucket("+Inf")]).toEqual([0, 1, 2, 2])
    expect(samples.find((s) => s.name === "tollgate_overhead_seconds_sum")?.value).toBeCloseTo(0.01, 9)
  })
})

describe("telemetry hooks without a gateway", () => {
  const make = () =>
    makeMetrics({
      tenants: () => ["acme"],
      breakers: () => [],
      overspend: () => ({ open: 0, microUsd: 0, unbounded: 0 }),
      now: () => 0,
      relayBuffered: () => 0,
      bodyBuffered: () => 0,
    })
  const samplesOf = async (metrics: ReturnType<typeof make>) =>
    parseExposition(await Effect.runPromise(metrics.scrape))
  const value = (samples: Array<Sample>, name: string, labels: Record<string, string>) =>
    samples.find(
      (s) =>
        s.name === name &&
        Object.keys(s.labels).length === Object.keys(labels).length &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    )?.value

  it("config reloads are counted by result, both shown at 0 before the first", async () => {
    const metrics = make()
    const reloads = (samples: Array<Sample>) =>
      ["ok", "error"].map((result) => value(samples, "tollgate_config_reloads_total", { result }))
    expect(reloads(await samplesOf(metrics))).toEqual([0, 0])
    metrics.telemetry.configReloaded("ok")
    metrics.telemetry.configReloaded("error")
    metrics.telemetry.configReloaded("ok")
    expect(reloads(await samplesOf(metrics))).toEqual([2, 1])
  })

  it("unpriced requests are counted through the hook and through requestDone", async () => {
    const metrics = make()
    metrics.telemetry.unpriced("r", "p", "m")
    const record: UsageRecord = {
      ts: "2026-12-02T10:04:05.123Z",
      request_id: "x",
      tenant: "acme",
      key_id: "ci",
      route: "r",
      endpoint: "/v1/messages",
      stream: false,
      provider: "p",
      model: "m",
      attempts: 1,
      status: 200,
      input_tokens: 3,
      output_tokens: 4,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      reserved_micro_usd: 0,
      cost_micro_usd: 0,
      usage_estimated: false,
      incomplete: false,
      session: null,
      duration_ms: 7,
      error: null,
      upstream_endpoint: "/v1/messages",
      trace_id: null,
      budget: null,
      cache_saved_micro_usd: 0,
      moved_from: null,
      moved_reason: null,
    }
    metrics.telemetry.requestDone({ record, route: "r", committed: true, overheadMs: 1, unpriced: true })
    metrics.telemetry.requestDone({ record, route: "r", committed: true, overheadMs: 1, unpriced: false })
    const samples = await samplesOf(metrics)
    expect(
      value(samples, "tollgate_unpriced_requests_total", { route: "r", provider: "p", model: "m" }),
    ).toBe(2)
    expect(
      value(samples, "tollgate_tokens_total", { tenant: "acme", route: "r", model: "m", kind: "input" }),
    ).toBe(6)
    expect(
      value(samples, "tollgate_requests_total", { tenant: "acme", route: "r", provider: "p", status: "200" }),
    ).toBe(2)
    const bucket = (le: string) =>
      value(samples, "tollgate_request_duration_seconds_bucket", { route: "r", status: "200", le })
    expect([bucket("0.005"), bucket("0.01"), bucket("600"), bucket("+Inf")]).toEqual([0, 2, 2, 2])
  })
})
