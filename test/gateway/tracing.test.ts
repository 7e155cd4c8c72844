/**
 * Issue #18: one trace per request, received over OTLP/HTTP by a local
 * collector — a SERVER span per request, a CLIENT span per upstream attempt
 * with the GenAI attributes, the caller's `traceparent` continued, each
 * attempt's own `traceparent` sent upstream, the trace id in the record.
 */
import Anthropic from "@anthropic-ai/sdk"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { callerContext } from "../../src/gateway/trace.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { startCollector, type Collector, type ReceivedSpan } from "../support/collector.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

const SERVER = 2
const CLIENT = 3
const STATUS_UNSET = 0
const STATUS_OK = 1
const STATUS_ERROR = 2

const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
const CALLER_SPAN = "00f067aa0ba902b7"

/** The gateway's config: fake 0 answers, fake 1 is overloaded (529), fake 2 says 429 with a 30 s retry-after. */
const tracedConfig =
  (telemetry: Record<string, unknown> | undefined) =>
  (fakes: ReadonlyArray<string>, keyHash: string, dir: string) => {
    const anthropic = (base_url: string) => ({ kind: "anthropic", base_url, api_key_env: UPSTREAM_KEY_ENV })
    return {
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      ...(telemetry === undefined ? {} : { telemetry }),
      providers: {
        anthropic: anthropic(fakes[0]!),
        overloaded: anthropic(fakes[1]!),
        limited: anthropic(fakes[2]!),
        openai: { kind: "openai", base_url: fakes[0], api_key_env: UPSTREAM_KEY_ENV },
      },
      routes: {
        claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        fallback: {
          api: "anthropic",
          targets: [
            { provider: "overloaded", model: "claude-sonnet-5-5" },
            { provider: "anthropic", model: "claude-sonnet-5-5" },
          ],
        },
        limited: { api: "anthropic", targets: [{ provider: "limited", model: "claude-sonnet-5-5" }] },
        smart: { api: "anthropic", translate: true, targets: [{ provider: "openai", model: "gpt-5-mini" }] },
      },
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
    }
  }

const FAKES = [{ name: "ok" }, { name: "overloaded", scenario: "status:529" }, { scenario: "status:429:30" }]

/** A plain POST to /v1/messages; the request id and status. */
const post = async (
  h: Harness,
  model: string,
  headers: Record<string, string> = {},
  extra: Record<string, unknown> = {},
) => {
  const res = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": h.key, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: "user", content: "hi" }], ...extra }),
  })
  await res.arrayBuffer()
  return { status: res.status, id: res.headers.get("x-request-id")! }
}

/** The record of request `id`, once written. */
const recordOf = async (h: Harness, id: string): Promise<UsageRecord> => {
  let found: UsageRecord | undefined
  await eventually(() => (found = h.records().find((r) => r.request_id === id)) !== undefined)
  return found!
}

/** The spans of trace `traceId`, once its SERVER span (ended last) has arrived. */
const traceOf = async (c: Collector, traceId: string) => {
  let spans: Array<ReceivedSpan> = []
  await eventually(() => {
    spans = c.spans().filter((s) => s.traceId === traceId)
    return spans.some((s) => s.kind === SERVER)
  })
  const server = spans.filter((s) => s.kind === SERVER)
  expect(server).toHaveLength(1)
  const attempts = spans
    .filter((s) => s.kind === CLIENT)
    .sort((a, b) => Number(a.attributes["tollgate.attempt"]) - Number(b.attributes["tollgate.attempt"]))
  // Every span of the trace is the SERVER span or one of its attempts: a tree of depth one.
  expect(spans).toHaveLength(1 + attempts.length)
  for (const attempt of attempts) expect(attempt.parentSpanId).toBe(server[0]!.spanId)
  return { server: server[0]!, attempts }
}

/** The recorded upstream requests of a fake that carried trace `traceId`. */
const upstreamTraceparents = (h: Harness, fake: number, traceId: string): Array<string> =>
  h.fakes[fake]!.requests()
    .recent.map((r) => r.headers["traceparent"])
    .filter((value): value is string => typeof value === "string" && value.includes(traceId))

/**
 * A collector and a gateway tracing to it (batches every 50 ms) for the tests
 * of the enclosing `describe`; `patch` changes the raw config.
 */
const tracedSuite = (
  patch: (raw: Record<string, unknown>, keyHash: string) => Record<string, unknown> = (raw) => raw,
) => {
  const suite = { c: undefined as unknown as Collector, h: undefined as unknown as Harness }
  beforeAll(async () => {
    suite.c = await startCollector()
    suite.h = await startHarness({
      fakes: FAKES,
      config: (fakes, keyHash, dir) =>
        patch(
          tracedConfig({ otlp_endpoint: suite.c.url, service_name: "tollgate-ci" })(fakes, keyHash, dir),
          keyHash,
        ),
      env: { OTEL_BSP_SCHEDULE_DELAY: "50" },
    })
  })
  afterAll(async () => {
    await suite.h?.close()
    await suite.c?.close()
  })
  return suite
}

describe("traces of proxied requests", () => {
  let c: Collector
  let h: Harness
  const suite = tracedSuite()
  beforeAll(() => {
    ;({ c, h } = suite)
  })

  it("a plain success through the SDK: a SERVER span and one CLIENT span with the GenAI attributes", async () => {
    const client = new Anthropic({ baseURL: h.url, apiKey: h.key, maxRetries: 0 })
    const { data, response } = await client.messages
      .create({ model: "claude", max_tokens: 16, messages: [{ role: "user", content: "hello there" }] })
      .withResponse()
    const record = await recordOf(h, response.headers.get("x-request-id")!)
    expect(record.trace_id).toMatch(/^[0-9a-f]{32}$/)
    const { server, attempts } = await traceOf(c, record.trace_id!)
    expect(server.name).toBe("POST /v1/messages")
    expect(server.parentSpanId).toBeUndefined()
    expect(server.status.code).toBe(STATUS_OK)
    expect(server.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.response.status_code": 200,
      "tollgate.tenant": "acme",
      "tollgate.route": "claude",
      "tollgate.attempts": 1,
      "tollgate.cost_micro_usd": record.cost_micro_usd,
      "tollgate.request_id": record.request_id,
    })
    expect(record.cost_micro_usd).toBeGreaterThan(0)
    expect(server.events.map((e) => e.name)).toEqual(["tollgate.commit"])
    expect(attempts).toHaveLength(1)
    const [attempt] = attempts
    expect(attempt!.name).toBe("chat claude-sonnet-5-5")
    expect(attempt!.status.code).toBe(STATUS_OK)
    expect(attempt!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "anthropic",
      "gen_ai.request.model": "claude-sonnet-5-5",
      "gen_ai.response.model": data.model,
      "gen_ai.usage.input_tokens": data.usage.input_tokens,
      "gen_ai.usage.output_tokens": data.usage.output_tokens,
      "tollgate.attempt": 1,
      "tollgate.provider": "anthropic",
      "http.response.status_code": 200,
      "server.address": "127.0.0.1",
    })
    // The attempt lies within the request.
    expect(attempt!.startNs).toBeGreaterThanOrEqual(server.startNs)
    expect(attempt!.endNs).toBeLessThanOrEqual(server.endNs)
    // The upstream got the attempt's own traceparent.
    expect(upstreamTraceparents(h, 0, record.trace_id!)).toEqual([
      `00-${record.trace_id}-${attempt!.spanId}-01`,
    ])
    // No prompt or completion text in any span.
    const text = JSON.stringify([server, attempts], (_k, v: unknown) =>
      typeof v === "bigint" ? String(v) : v,
    )
    expect(text).not.toContain("hello there")
    expect(text).not.toContain(data.content[0]!.type === "text" ? data.content[0]!.text : "-")
  })

  it("529 then fallback: two sibling CLIENT spans, the first failed with status 529", async () => {
    const { status, id } = await post(h, "fallback")
    expect(status).toBe(200)
    const record = await recordOf(h, id)
    const { server, attempts } = await traceOf(c, record.trace_id!)
    expect(server.attributes["tollgate.attempts"]).toBe(2)
    expect(server.status.code).toBe(STATUS_OK)
    expect(
      attempts.map((a) => [a.attributes["tollgate.provider"], a.attributes["http.response.status_code"]]),
    ).toEqual([
      ["overloaded", 529],
      ["anthropic", 200],
    ])
    expect(attempts[0]!.status.code).toBe(STATUS_ERROR)
    expect(attempts[0]!.attributes["error.type"]).toBe("529")
    expect(attempts[1]!.status.code).toBe(STATUS_OK)
    // Each attempt carried its own span upstream.
    expect(upstreamTraceparents(h, 1, record.trace_id!)).toEqual([
      `00-${record.trace_id}-${attempts[0]!.spanId}-01`,
    ])
    expect(upstreamTraceparents(h, 0, record.trace_id!)).toEqual([
      `00-${record.trace_id}-${attempts[1]!.spanId}-01`,
    ])
  })

  it("every target blocked: a 502 SERVER span with a breaker-skip event and no attempt", async () => {
    // The 429's retry-after cools the only target down for 30 s.
    expect((await post(h, "limited")).status).toBe(429)
    const { status, id } = await post(h, "limited")
    expect(status).toBe(502)
    const record = await recordOf(h, id)
    const { server, attempts } = await traceOf(c, record.trace_id!)
    expect(attempts).toEqual([])
    expect(server.status.code).toBe(STATUS_ERROR)
    expect(server.attributes["http.response.status_code"]).toBe(502)
    expect(server.attributes["error.type"]).toBe("all_targets_blocked")
    expect(server.status.message).toBe("all_targets_blocked")
    expect(server.events.filter((e) => e.name !== "exception")).toEqual([
      {
        name: "tollgate.breaker_skip",
        attributes: {
          "tollgate.provider": "limited",
          "gen_ai.request.model": "claude-sonnet-5-5",
          "tollgate.reason": "cooldown",
        },
      },
    ])
  })

  it("a stream the client cuts: both spans end, interrupted, with what streamed", async () => {
    const controller = new AbortController()
    const res = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      signal: controller.signal,
      headers: {
        "x-api-key": h.key,
        "content-type": "application/json",
        "x-fake-scenario": "tokens:400,delay:20",
      },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 400,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    })
    const id = res.headers.get("x-request-id")!
    const reader = res.body!.getReader()
    await reader.read()
    controller.abort()
    await reader.closed.catch(() => {})
    const record = await recordOf(h, id)
    expect(record.error).toBe("client_disconnected")
    const { server, attempts } = await traceOf(c, record.trace_id!)
    expect(server.status.code).toBe(STATUS_UNSET)
    expect(server.attributes).toMatchObject({
      "error.type": "client_disconnected",
      "tollgate.incomplete": true,
      "tollgate.stream": true,
      "http.response.status_code": 200,
    })
    expect(attempts).toHaveLength(1)
    expect(attempts[0]!.status.code).toBe(STATUS_UNSET)
    expect(attempts[0]!.attributes["gen_ai.usage.output_tokens"]).toBe(record.output_tokens)
    expect(attempts[0]!.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0)
  })

  it("a translated request: the CLIENT span names the upstream's operation, provider and endpoint", async () => {
    const { status, id } = await post(h, "smart")
    expect(status).toBe(200)
    const record = await recordOf(h, id)
    const { server, attempts } = await traceOf(c, record.trace_id!)
    expect(server.name).toBe("POST /v1/messages")
    expect(attempts).toHaveLength(1)
    expect(attempts[0]!.name).toBe("chat gpt-5-mini")
    expect(attempts[0]!.attributes).toMatchObject({
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-5-mini",
      "gen_ai.response.model": "gpt-5-mini",
      "tollgate.upstream_endpoint": "/v1/chat/completions",
      "gen_ai.usage.input_tokens": record.input_tokens,
      "gen_ai.usage.output_tokens": record.output_tokens,
    })
  })

  it("continues the caller's traceparent: same trace, the caller's span as parent, tracestate passed on", async () => {
    const { id } = await post(h, "claude", {
      traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      tracestate: "vendor=abc",
    })
    const record = await recordOf(h, id)
    expect(record.trace_id).toBe(CALLER_TRACE)
    const { server, attempts } = await traceOf(c, CALLER_TRACE)
    expect(server.parentSpanId).toBe(CALLER_SPAN)
    const upstream = h.fakes[0]!.requests().recent.find((r) =>
      r.headers["traceparent"]?.includes(CALLER_TRACE),
    )
    expect(upstream?.headers["traceparent"]).toBe(`00-${CALLER_TRACE}-${attempts[0]!.spanId}-01`)
    expect(upstream?.headers["tracestate"]).toBe("vendor=abc")
  })

  it("a caller that does not sample: nothing exported, the unsampled flag and the trace id still go upstream", async () => {
    const trace = "a".repeat(32)
    const { id } = await post(h, "claude", { traceparent: `00-${trace}-${"b".repeat(16)}-00` })
    const record = await recordOf(h, id)
    expect(record.trace_id).toBe(trace)
    const sent = upstreamTraceparents(h, 0, trace)
    expect(sent).toHaveLength(1)
    expect(sent[0]).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-00$`))
    // A later traced request's spans arrive, this one's never do.
    const later = await recordOf(h, (await post(h, "claude")).id)
    await traceOf(c, later.trace_id!)
    expect(c.spans().filter((s) => s.traceId === trace)).toEqual([])
  })

  it("a malformed traceparent starts a new trace", async () => {
    const { id } = await post(h, "claude", { traceparent: `00-${"0".repeat(32)}-${CALLER_SPAN}-01` })
    const record = await recordOf(h, id)
    expect(record.trace_id).toMatch(/^[0-9a-f]{32}$/)
    expect(record.trace_id).not.toBe("0".repeat(32))
    const { server } = await traceOf(c, record.trace_id!)
    expect(server.parentSpanId).toBeUndefined()
  })

  it("/metrics counts the exported spans", async () => {
    const text = await (await fetch(`${h.url}/metrics`)).text()
    const exported = Number(/tollgate_trace_spans_total\{result="exported"\} (\d+)/.exec(text)?.[1])
    expect(exported).toBeGreaterThan(0)
    expect(text).toContain('tollgate_trace_spans_total{result="dropped"} 0')
  })
})

describe("without tracing", () => {
  let h: Harness
  beforeAll(async () => {
    h = await startHarness({ fakes: FAKES, config: tracedConfig(undefined) })
  })
  afterAll(async () => {
    await h?.close()
  })

  it("passes the caller's traceparent and tracestate on unchanged and records its trace id", async () => {
    const traceparent = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`
    const { id } = await post(h, "claude", { traceparent, tracestate: "vendor=abc" })
    const record = await recordOf(h, id)
    expect(record.trace_id).toBe(CALLER_TRACE)
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.headers["traceparent"]).toBe(traceparent)
    expect(upstream.headers["tracestate"]).toBe("vendor=abc")
  })

  it("sends no trace context upstream and records no trace id when the caller sent none", async () => {
    const { id } = await post(h, "claude")
    const record = await recordOf(h, id)
    expect(record.trace_id).toBeNull()
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.headers["traceparent"]).toBeUndefined()
  })
})

describe("a collector that is down or hangs", () => {
  for (const mode of ["down", "hang"] as const) {
    it(`${mode}: clients are served as usual and the dropped spans are counted in /metrics`, async () => {
      const c = await startCollector(mode === "hang" ? "hang" : "ok")
      if (mode === "down") await c.close()
      const h = await startHarness({
        fakes: FAKES,
        config: tracedConfig({ otlp_endpoint: c.url }),
        // A hung post is given up after 300 ms instead of 10 s (the interval's post waits for it).
        env: { OTEL_BSP_SCHEDULE_DELAY: "20", OTEL_EXPORTER_OTLP_TIMEOUT: "300" },
      })
      try {
        const started = performance.now()
        for (let round = 0; round < 10; round++) {
          const statuses = await Promise.all(Array.from({ length: 10 }, () => post(h, "claude")))
          expect(statuses.every((r) => r.status === 200)).toBe(true)
          await new Promise((resolve) => setTimeout(resolve, 30))
        }
        // 100 requests against a fake on this machine: generous, but far below a collector's 10 s timeout.
        expect(performance.now() - started).toBeLessThan(8_000)
        expect(h.records()).toHaveLength(100)
        let dropped = 0
        await eventually(async () => {
          const text = await (await fetch(`${h.url}/metrics`)).text()
          dropped = Number(/tollgate_trace_spans_total\{result="dropped"\} (\d+)/.exec(text)?.[1])
          return dropped > 0
        })
        expect(dropped).toBeGreaterThan(0)
        expect(await (await fetch(`${h.url}/metrics`)).text()).toContain(
          'tollgate_trace_spans_total{result="exported"} 0',
        )
      } finally {
        const closing = performance.now()
        await h.close()
        // Shutdown does not wait for a collector that never answers beyond its short flush bound.
        expect(performance.now() - closing).toBeLessThan(5_000)
        if (mode === "hang") await c.close()
      }
    })
  }
})

describe("callerContext (W3C traceparent)", () => {
  const context = (traceparent: string | undefined, tracestate?: string) =>
    callerContext({
      ...(traceparent === undefined ? {} : { traceparent }),
      ...(tracestate === undefined ? {} : { tracestate }),
    })

  it("reads version 00, and a later version by its first four fields; passes it on as version 00", () => {
    expect(context(`00-${CALLER_TRACE}-${CALLER_SPAN}-01`, "a=1")).toEqual({
      traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      traceId: CALLER_TRACE,
      spanId: CALLER_SPAN,
      sampled: true,
      tracestate: "a=1",
    })
    expect(context(`01-${CALLER_TRACE}-${CALLER_SPAN}-00-extra`)).toMatchObject({
      traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-00`,
      sampled: false,
    })
  })

  it("refuses what W3C refuses: version ff, upper case, zero ids, extra fields in version 00, two headers joined", () => {
    for (const bad of [
      `ff-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      `00-${CALLER_TRACE.toUpperCase()}-${CALLER_SPAN}-01`,
      `00-${"0".repeat(32)}-${CALLER_SPAN}-01`,
      `00-${CALLER_TRACE}-${"0".repeat(16)}-01`,
      `00-${CALLER_TRACE}-${CALLER_SPAN}-01-extra`,
      `00-${CALLER_TRACE}-${CALLER_SPAN}-01, 00-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      "garbage",
    ])
      expect(context(bad), bad).toBeUndefined()
    expect(context(undefined)).toBeUndefined()
  })

  it("drops a tracestate longer than 512 characters", () => {
    expect(
      context(`00-${CALLER_TRACE}-${CALLER_SPAN}-01`, `a=${"x".repeat(600)}`)?.tracestate,
    ).toBeUndefined()
  })
})

describe("the retry budget's refusal in a trace", () => {
  let c: Collector
  let h: Harness
  // The budget allows 10 extra attempts a minute plus 0.1 per request; the 529 target never opens.
  const suite = tracedSuite((raw) => ({ ...raw, breaker: { min_requests: 1_000_000 } }))
  beforeAll(() => {
    ;({ c, h } = suite)
  })

  it("a fallback the budget does not pay for is an event on the request's span, with one attempt", async () => {
    let refused: UsageRecord | undefined
    for (let i = 0; i < 20 && refused === undefined; i++) {
      const { id } = await post(h, "fallback")
      const record = await recordOf(h, id)
      if (record.attempts === 1) refused = record
    }
    expect(refused).toBeDefined()
    expect(refused!.status).toBe(529)
    const { server, attempts } = await traceOf(c, refused!.trace_id!)
    expect(attempts).toHaveLength(1)
    expect(server.events.find((e) => e.name === "tollgate.retry_budget_refused")?.attributes).toEqual({
      "tollgate.provider": "anthropic",
      "gen_ai.request.model": "claude-sonnet-5-5",
    })
  })
})

describe("a stream the hard budget cuts, in a trace", () => {
  let c: Collector
  let h: Harness
  const suite = tracedSuite((raw, keyHash) => ({
    ...raw,
    reservation: { output_tokens: 10 },
    tenants: {
      acme: {
        keys: [{ id: "ci", sha256: keyHash }],
        routes: "*",
        budgets: { month: { limit_usd: 0.003, mode: "hard" } },
      },
    },
  }))
  beforeAll(() => {
    ;({ c, h } = suite)
  })

  it("the cutoff is an event on the request's span; the attempt did not fail", async () => {
    const { status, id } = await post(
      h,
      "claude",
      { "x-fake-scenario": "max-tokens" },
      { stream: true, max_tokens: 5000 },
    )
    expect(status).toBe(200)
    const record = await recordOf(h, id)
    expect(record).toMatchObject({ error: "budget_exceeded", incomplete: true })
    const { server, attempts } = await traceOf(c, record.trace_id!)
    expect(server.events.map((e) => e.name)).toEqual(["tollgate.commit", "tollgate.stream_cutoff"])
    expect(server.events[1]!.attributes).toEqual({ "error.type": "budget_exceeded" })
    expect(server.status.code).toBe(STATUS_OK)
    expect(server.attributes).toMatchObject({ "error.type": "budget_exceeded", "tollgate.incomplete": true })
    expect(attempts).toHaveLength(1)
    expect(attempts[0]!.status.code).toBe(STATUS_OK)
    expect(attempts[0]!.attributes["gen_ai.usage.output_tokens"]).toBe(record.output_tokens)
  })
})
