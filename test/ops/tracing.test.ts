import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Layer } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import type { TelemetryConfig } from "../../src/config/model.js"
import * as Tracing from "../../src/ops/Tracing.js"
import { VERSION } from "../../src/version.js"

interface Received {
  readonly path: string
  readonly contentType: string
  readonly body: Buffer
}

/** A local OTLP/HTTP collector: records every request; `hang` never answers. */
const collector = async (mode: "ok" | "hang" = "ok") => {
  const received: Array<Received> = []
  const open = new Set<ServerResponse>()
  const inFlight = { now: 0, max: 0 }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    inFlight.now++
    inFlight.max = Math.max(inFlight.max, inFlight.now)
    res.on("close", () => inFlight.now--)
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      received.push({
        path: req.url ?? "",
        contentType: String(req.headers["content-type"]),
        body: Buffer.concat(chunks),
      })
      if (mode === "hang") open.add(res)
      else res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  servers.push(close)
  return { url: `http://127.0.0.1:${port}`, received, inFlight, close }
}

const servers: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()))
})

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

const probe = Effect.succeed("done").pipe(Effect.withSpan("probe", { attributes: { "tollgate.test": 1 } }))

interface OtlpJson {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: {
      readonly attributes: ReadonlyArray<{ key: string; value: { stringValue?: string } }>
    }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<{ readonly name: string }> }>
  }>
}

describe("Tracing", () => {
  it("is nothing when telemetry.otlp_endpoint is absent", () => {
    expect(Tracing.layer(telemetry(undefined))).toBe(Layer.empty)
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
    const data = JSON.parse(first.body.toString("utf8")) as OtlpJson
    const resource = data.resourceSpans[0]!.resource.attributes
    const attr = (key: string) => resource.find((a) => a.key === key)?.value.stringValue
    expect(attr("service.name")).toBe("tollgate-test")
    expect(attr("service.version")).toBe(VERSION)
    const names = data.resourceSpans.flatMap((r) =>
      r.scopeSpans.flatMap((s) => s.spans.map((span) => span.name)),
    )
    expect(names).toEqual(["probe"])
    expect(exports).toEqual([["exported", 1]])
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
      return spent
    })
    const spent = await traced(program, layer)
    expect(spent).toBeLessThan(1_000)
    expect(performance.now() - started).toBeLessThan(5_000)
    const dropped = exports.filter(([result]) => result === "dropped").reduce((n, [, spans]) => n + spans, 0)
    expect(exports.every(([result]) => result === "dropped")).toBe(true)
    expect(dropped).toBe(1000)
  })

  it("a collector that hangs neither fails nor delays the traced effect; its batches are dropped after the export timeout", async () => {
    const c = await collector("hang")
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
  })
})
