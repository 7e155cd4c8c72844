/**
 * Issue #18 against the built binary: a streamed SDK request that continues
 * the caller's trace is exported over OTLP/HTTP when the process stops on
 * SIGTERM (the last batch is flushed, well before the 5 s batch interval),
 * its attempt's `traceparent` reached the upstream, and the trace id is in
 * the usage record and the request's log line.
 */
import Anthropic from "@anthropic-ai/sdk"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { startCollector, type Collector } from "../support/collector.js"
import { startFakeAndGateway, type Running } from "../support/processes.js"

const CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
const CALLER_SPAN = "b7ad6b7169203331"

describe("tracing in the built binary", () => {
  const started: Array<Running> = []
  let collector: Collector | undefined
  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop("SIGKILL")))
    await collector?.close()
  })

  it("exports a continued trace at shutdown; the upstream, the record and the log line carry its ids", async () => {
    collector = await startCollector()
    const { dir, key, fake, gateway } = await startFakeAndGateway("tracing", started, {
      sections: { telemetry: { otlp_endpoint: collector.url, service_name: "tollgate-e2e" } },
    })

    const client = new Anthropic({ baseURL: gateway.url, apiKey: key, maxRetries: 0 })
    const stream = client.messages.stream(
      { model: "claude", max_tokens: 16, messages: [{ role: "user", content: "trace me" }] },
      { headers: { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` } },
    )
    const message = await stream.finalMessage()
    expect(gateway.output()).toContain(`; tracing to ${collector.url}/ (sample 1)`)
    expect(message.usage.output_tokens).toBeGreaterThan(0)

    // Nothing is posted before the 5 s interval; SIGTERM flushes the batch.
    const stopping = performance.now()
    expect(await gateway.stop("SIGTERM")).toBe(0)
    expect(performance.now() - stopping).toBeLessThan(5_000)
    const spans = collector.spans().filter((s) => s.traceId === CALLER_TRACE)
    const server = spans.find((s) => s.kind === 2)!
    const attempt = spans.find((s) => s.kind === 3)!
    expect(server).toMatchObject({ name: "POST /v1/messages", parentSpanId: CALLER_SPAN })
    expect(attempt).toMatchObject({ name: "chat claude-sonnet-5-5", parentSpanId: server.spanId })
    expect(attempt.attributes).toMatchObject({
      "gen_ai.usage.output_tokens": message.usage.output_tokens,
      "gen_ai.response.model": message.model,
      "tollgate.attempt": 1,
    })
    expect(server.attributes).toMatchObject({ "tollgate.stream": true, "http.response.status_code": 200 })

    const upstream = (await (await fetch(`${fake.url}/_fake/requests`)).json()) as {
      recent: Array<{ headers: Record<string, string> }>
    }
    expect(upstream.recent.at(-1)!.headers["traceparent"]).toBe(`00-${CALLER_TRACE}-${attempt.spanId}-01`)

    const record = JSON.parse(readFileSync(join(dir, "usage.jsonl"), "utf8").trim()) as Record<
      string,
      unknown
    >
    expect(record["trace_id"]).toBe(CALLER_TRACE)
    const line = gateway
      .output()
      .split("\n")
      .find((l) => l.includes('"message":"request"'))
    expect(line).toContain(`"trace_id":"${CALLER_TRACE}"`)
  })
})
