import { Effect, Layer, Tracer } from "effect"
import { OtlpSerialization } from "effect/observability"
import { afterEach, describe, expect, it } from "vitest"
import type { TelemetryConfig } from "../../src/config/model.js"
import * as Tracing from "../../src/ops/Tracing.js"
import { VERSION } from "../../src/version.js"
import { withEnv } from "../support/env.js"
import { readTraces, startCollector, type Received } from "../support/collector.js"

const servers: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()))
})

/** A local collector, closed after the test. */
const collector = async (mode: "ok" | "hang" | "stall" = "ok") => {
  const c = await startCollector(mode)
  servers.push(c.close)
  return c
}

const telemetry = (endpoint: string | undefined, more: Partial<TelemetryConfig> = {}): TelemetryConfig => ({
  otlpEndpoint: endpoint,
  otlpProtocol: "http/json",
  serviceName: "tollgate-test",
  sampleRatio: 1,
  ...more,
})

/** Runs `effect` inside the Tracing layer; the layer's scope closes (and flushes) before it resolves. */
const traced = <A>(effect: Effect.Effect<A>, layer: Layer.Layer<never>) =>
  Effect.runPromise(Effect.provide(effect, layer))

/** One span made with the request tracer, as the gateway makes them; "done" when tracing is on. */
const span = (name: string, parent?: Tracer.AnySpan) =>
  Effect.gen(function* () {
    const { tracer } = yield* Tracing.Tracing
    if (tracer === undefined) return "off"
    const made = tracer.span(name, "internal", parent)
    made.attribute("tollgate.test", 1)
    made.end(tracer.now(), { code: "ok" })
    return "done"
  })

const probe = span("probe")

/** The names of the spans in the JSON bodies received. */
const spanNames = (received: ReadonlyArray<Received>): Array<string> =>
  received.flatMap((r) => readTraces(r.body).spans.map((s) => s.name))

describe("Tracing", () => {
  it("is nothing when telemetry.otlp_endpoint is absent: the request path gets no tracer", async () => {
    expect(Tracing.layer(telemetry(undefined))).toBe(Layer.empty)
    expect(await traced(probe, Tracing.layer(telemetry(undefined)))).toBe("off")
  })

  it("does not export Effect's own spans (Effect.withSpan), only the request tracer's", async () => {
    const c = await collector()
    const own = Effect.succeed(1).pipe(Effect.withSpan("effect-own"))
    await traced(Effect.andThen(own, probe), Tracing.layer(telemetry(c.url)))
    expect(spanNames(c.received)).toEqual(["probe"])
  })

  it("a span under a caller's parent follows the parent's sampled flag, whatever sample_ratio says", async () => {
    const c = await collector()
    const sampled = Tracer.externalSpan({ traceId: "a".repeat(32), spanId: "b".repeat(16), sampled: true })
    const unsampled = Tracer.externalSpan({ traceId: "c".repeat(32), spanId: "d".repeat(16), sampled: false })
    await traced(
      Effect.andThen(span("kept", sampled), span("dropped", unsampled)),
      Tracing.layer(telemetry(c.url, { sampleRatio: 0 })),
    )
    expect(spanNames(c.received)).toEqual(["kept"])
    const d = await collector()
    await traced(span("dropped", unsampled), Tracing.layer(telemetry(d.url, { sampleRatio: 1 })))
    expect(d.received).toEqual([])
  })

  it("sample_ratio 0.5 keeps about half of the traces it starts", async () => {
    const c = await collector()
    const program = Effect.gen(function* () {
      for (let i = 0; i < 2000; i++) yield* span("root")
    })
    await traced(program, Tracing.layer(telemetry(c.url, { sampleRatio: 0.5 })))
    const kept = spanNames(c.received).length
    // Binomial(2000, 0.5): 5 standard deviations are ±112.
    expect(kept).toBeGreaterThan(1000 - 112)
    expect(kept).toBeLessThan(1000 + 112)
  })

  it("exports a span over OTLP/HTTP JSON with the service.name and service.version resources", async () => {
    const c = await collector()
    const exports: Array<[Tracing.ExportResult, number]> = []
    const layer = Tracing.layer(telemetry(c.url), {
      onExport: (result, spans) => exports.push([result, spans]),
    })
    expect(await traced(probe, layer)).toBe("done")
    expect(c.received.length).toBeGreaterThan(0)
    const first = c.received[0]!
    expect(first.path).toBe("/v1/traces")
    expect(first.contentType).toContain("application/json")
    const resource = readTraces(first.body).resources[0]!
    expect(resource["service.name"]).toBe("tollgate-test")
    expect(resource["service.version"]).toBe(VERSION)
    expect(spanNames([first])).toEqual(["probe"])
    expect(exports).toEqual([["exported", 1]])
  })

  it("sends OTEL_EXPORTER_OTLP_HEADERS with each post and batches every OTEL_BSP_SCHEDULE_DELAY ms", async () => {
    const c = await collector()
    const program = Effect.gen(function* () {
      yield* probe
      // Well before the default 5 s interval and before shutdown: the 100 ms delay posted the batch.
      yield* Effect.sleep(600)
      return c.received.length
    })
    const env = {
      OTEL_EXPORTER_OTLP_HEADERS: "Authorization=Bearer%20collector-secret,x-team=llm,broken,=x",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    }
    const postedBeforeShutdown = await Effect.runPromise(
      withEnv(env)(Effect.provide(program, Tracing.layer(telemetry(c.url)))),
    )
    expect(postedBeforeShutdown).toBe(1)
    expect(c.received[0]!.headers["authorization"]).toBe("Bearer collector-secret")
    expect(c.received[0]!.headers["x-team"]).toBe("llm")
  })

  it("adds OTEL_RESOURCE_ATTRIBUTES to the resource; service.name stays the config's", async () => {
    const c = await collector()
    const env = {
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,team=llm%20gateway,service.name=other,bad",
    }
    await Effect.runPromise(withEnv(env)(Effect.provide(probe, Tracing.layer(telemetry(c.url)))))
    const resource = readTraces(c.received[0]!.body).resources[0]!
    expect(resource).toMatchObject({
      "deployment.environment": "prod",
      team: "llm gateway",
      "service.name": "tollgate-test",
      "service.version": VERSION,
    })
  })

  it("reads OTEL_EXPORTER_OTLP_HEADERS as the OpenTelemetry SDKs do", () => {
    expect(Tracing.otlpHeaders("A=1, b = x%2Cy ,bad,=v,c=%E0%A4%A,d=ok\r\nx")).toEqual({ a: "1", b: "x,y" })
    expect(Tracing.otlpHeaders(undefined)).toEqual({})
  })

  it("sends protobuf with otlp_protocol: http/protobuf", async () => {
    const c = await collector()
    await traced(probe, Tracing.layer(telemetry(c.url, { otlpProtocol: "http/protobuf" })))
    expect(c.received.length).toBeGreaterThan(0)
    expect(c.received[0]!.contentType).toBe("application/x-protobuf")
    // Protobuf keeps strings as their UTF-8 bytes.
    expect(c.received[0]!.body.includes(Buffer.from("probe"))).toBe(true)
    expect(c.received[0]!.body.includes(Buffer.from("tollgate-test"))).toBe(true)
  })

  it("protobuf is Effect's OTLP encoding of the same spans the JSON export carries", async () => {
    const made = Effect.gen(function* () {
      const { tracer } = yield* Tracing.Tracing
      const parent = { traceId: "a".repeat(32), spanId: "b".repeat(16), sampled: true }
      const child = tracer!.span("child", "client", parent)
      child.attribute("n", -7)
      child.attribute("x", 0.5)
      child.attribute("flag", true)
      child.event("happened", tracer!.now(), { why: "test" })
      child.end(tracer!.now(), { code: "error", type: "t", message: "m" })
    })
    const j = await collector()
    const p = await collector()
    // The same span ids in both: the clock and the random ids differ, so compare by re-encoding the JSON.
    await traced(made, Tracing.layer(telemetry(j.url)))
    await traced(made, Tracing.layer(telemetry(p.url, { otlpProtocol: "http/protobuf" })))
    const json = JSON.parse(j.received[0]!.body.toString("utf8")) as unknown
    const encode = await Effect.runPromise(
      Effect.gen(function* () {
        return (yield* OtlpSerialization.OtlpSerialization).traces
      }).pipe(Effect.provide(OtlpSerialization.layerProtobuf)),
    )
    const body = encode(json as Parameters<typeof encode>[0])
    expect(body._tag).toBe("Uint8Array")
    // Same structure, same length: only the ids and times differ between the two exports.
    expect(p.received[0]!.body.length).toBe((body as { body: Uint8Array }).body.length)
    expect(p.received[0]!.body.includes(Buffer.from("happened"))).toBe(true)
  })

  it("escapes every string it writes: the JSON parses back to the same text", async () => {
    const c = await collector()
    const nasty = 'quote " backslash \\ newline \n tab \t control \u0001 lone \ud800 end'
    const made = Effect.gen(function* () {
      const { tracer } = yield* Tracing.Tracing
      const s = tracer!.span(nasty, "server", undefined)
      s.attribute(nasty, nasty)
      s.event(nasty, tracer!.now(), { [nasty]: nasty })
      s.end(tracer!.now(), { code: "error", type: nasty, message: nasty })
    })
    await traced(made, Tracing.layer(telemetry(c.url)))
    const [received] = c.spans()
    const expected = JSON.parse(JSON.stringify(nasty)) as string
    expect(received!.name).toBe(expected)
    expect(received!.attributes[expected]).toBe(expected)
    expect(received!.events[0]).toEqual({ name: expected, attributes: { [expected]: expected } })
    expect(received!.status).toEqual({ code: 2, message: expected })
  })

  it("shutdown waits at most 2 s for a collector that never answers, and counts what it abandons", async () => {
    const c = await collector("hang")
    const exports: Array<[Tracing.ExportResult, number]> = []
    // The default 10 s post timeout: only the shutdown bound can end the wait.
    const layer = Tracing.layer(telemetry(c.url), {
      onExport: (result, spans) => exports.push([result, spans]),
    })
    const started = performance.now()
    await traced(
      Effect.gen(function* () {
        for (let i = 0; i < 10; i++) yield* probe
      }),
      layer,
    )
    const took = performance.now() - started
    expect(took).toBeGreaterThanOrEqual(Tracing.shutdownTimeoutMs - 100)
    expect(took).toBeLessThan(Tracing.shutdownTimeoutMs + 1_500)
    expect(exports).toEqual([["dropped", 10]])
  })

  it("sample_ratio 0 exports no span", async () => {
    const c = await collector()
    await traced(probe, Tracing.layer(telemetry(c.url, { sampleRatio: 0 })))
    expect(c.received).toEqual([])
  })

  it("a collector that is down neither fails nor delays the traced effect; the batch is counted as dropped", async () => {
    const c = await collector()
    await c.close()
    const exports: Array<[Tracing.ExportResult, number]> = []
    const layer = Tracing.layer(telemetry(c.url), {
      exportIntervalMs: 50,
      onExport: (result, spans) => exports.push([result, spans]),
    })
    const started = performance.now()
    const program = Effect.gen(function* () {
      const t0 = performance.now()
      for (let i = 0; i < 1000; i++) yield* probe
      const spent = performance.now() - t0
      // Let the exporter try (and fail) while the program still runs.
      yield* Effect.sleep(200)
      return { spent, counts: { ...(yield* Tracing.Tracing).counts } }
    })
    const { spent, counts } = await traced(program, layer)
    // What /metrics reads: every span counted once, as dropped.
    expect(counts).toEqual({ exported: 0, dropped: 1000 })
    expect(spent).toBeLessThan(1_000)
    expect(performance.now() - started).toBeLessThan(5_000)
    const dropped = exports.filter(([result]) => result === "dropped").reduce((n, [, spans]) => n + spans, 0)
    expect(exports.every(([result]) => result === "dropped")).toBe(true)
    expect(dropped).toBe(1000)
  })

  for (const mode of ["hang", "stall"] as const)
    it(`a collector that ${mode === "hang" ? "never answers" : "sends 200 and stalls the body"} neither fails nor delays the traced effect; its batches are dropped after the export timeout`, async () => {
      const c = await collector(mode)
      const exports: Array<[Tracing.ExportResult, number]> = []
      const layer = Tracing.layer(telemetry(c.url), {
        exportIntervalMs: 50,
        exportTimeoutMs: 300,
        onExport: (result, spans) => exports.push([result, spans]),
      })
      const started = performance.now()
      const program = Effect.gen(function* () {
        const t0 = performance.now()
        for (let round = 0; round < 5; round++) {
          for (let i = 0; i < 1000; i++) yield* probe
          yield* Effect.sleep(60)
        }
        return performance.now() - t0
      })
      const spent = await traced(program, layer)
      expect(spent).toBeLessThan(2_000)
      // Shutdown waits at most for the export timeout / shutdown timeout, not for the collector.
      expect(performance.now() - started).toBeLessThan(5_000)
      expect(c.received.length).toBeGreaterThan(0)
      // Never more posts in flight than the cap: the other batches were dropped at once.
      expect(c.inFlight.max).toBeLessThanOrEqual(Tracing.maxExportsInFlight)
      expect(exports.length).toBeGreaterThan(c.received.length)
      expect(exports.every(([result]) => result === "dropped")).toBe(true)
      // Every span counted once: what was made, all dropped.
      expect(exports.reduce((n, [, spans]) => n + spans, 0)).toBe(5000)
    })
})
