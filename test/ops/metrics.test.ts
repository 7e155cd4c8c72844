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
        routes: "*",
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

    expect(m("tollgate_requests_total", { route: "fallback", provider: "backup", status: "200" })).toBe(1)
    expect(m("tollgate_requests_total", { route: "flaky", provider: "flaky", status: "500" })).toBe(1)
    expect(m("tollgate_requests_total", { route: "flaky", provider: "", status: "502" })).toBe(1)
    expect(m("tollgate_requests_total", { route: "cool", provider: "backup", status: "200" })).toBe(1)
    expect(m("tollgate_requests_total", { route: "plain", provider: "backup", status: "200" })).toBe(2)
    expect(m("tollgate_requests_total", { route: "plain", provider: "", status: "429" })).toBe(1)
    expect(m("tollgate_requests_total", { route: "plain", provider: "", status: "402" })).toBe(1)

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
    const sum = (tenant: string, field: keyof UsageRecord) =>
      records.filter((r) => r.tenant === tenant).reduce((total, r) => total + Number(r[field]), 0)
    for (const tenant of ["acme", "limited", "broke"]) {
      expect(m("tollgate_spend_micro_usd_total", { tenant })).toBe(sum(tenant, "cost_micro_usd"))
      expect(m("tollgate_tokens_total", { tenant, kind: "input" })).toBe(sum(tenant, "input_tokens"))
      expect(m("tollgate_tokens_total", { tenant, kind: "output" })).toBe(sum(tenant, "output_tokens"))
      expect(m("tollgate_tokens_total", { tenant, kind: "cache_read" })).toBe(0)
      expect(m("tollgate_tokens_total", { tenant, kind: "cache_write" })).toBe(0)
    }
    expect(sum("acme", "cost_micro_usd")).toBeGreaterThan(0)
    expect(m("tollgate_spend_micro_usd_total", { tenant: "broke" })).toBe(0)

    expect(m("tollgate_open_streams")).toBe(0)
    expect(m("tollgate_open_requests", { tenant: "acme" })).toBe(0)
    expect(m("tollgate_overspend_bound_micro_usd", { tenant: "acme" })).toBe(0)
    expect(m("tollgate_process_resident_memory_bytes")).toBeGreaterThan(0)
  })

  it("a request refused after its route was resolved counts under that route; an unknown route under none", async () => {
    const before = await scrape()
    const count = (m: typeof before, route: string, status: string) =>
      m("tollgate_requests_total", { route, provider: "", status }) ?? 0
    // An invalid x-tollgate-session is refused (400) after the route is known.
    expect(await statusOf(send("plain", h.key, {}, { "x-tollgate-session": "has spaces" }))).toBe(400)
    // A route this gateway does not have is never a label (a client's string).
    expect(await statusOf(send("no-such-route-from-a-client"))).toBe(404)
    const after = await scrape()
    expect(count(after, "plain", "400") - count(before, "plain", "400")).toBe(1)
    expect(count(after, "", "404") - count(before, "", "404")).toBe(1)
    expect(
      after("tollgate_requests_total", { route: "no-such-route-from-a-client", provider: "", status: "404" }),
    ).toBeUndefined()
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
    expect(exported).toHaveLength(26)
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
    budgets: { month: undefined, session: undefined },
  }
  /** The telemetry of a request that arrived at `startMs`, waited `upstreamMs` upstream, and committed at `committedMs`. */
  const done = (startMs: number, upstreamMs: number, nowMs: number, committedMs?: number) => {
    const info: RequestInfo = {
      id: "r",
      startMs,
      endpoint: "/v1/messages",
      api: "anthropic",
      principal: { tenant, keyId: "ci" },
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
    }
  }

  it("is the time to the commit minus upstream waiting, or the whole time for a response Tollgate made", async () => {
    const metrics = makeMetrics({
      tenants: ["acme"],
      breakers: () => [],
      overspend: () => ({ open: 0, microUsd: 0, unbounded: 0 }),
      now: () => 10_007,
      relayBuffered: () => 0,
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
