import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A local OTLP/HTTP collector for tests: records every POST it receives and
 * reads OTLP/JSON trace bodies back into plain spans. `hang` takes the body
 * and never answers; `stall` sends 200 and a first byte, never the rest.
 */

export interface Received {
  readonly path: string
  readonly contentType: string
  readonly headers: IncomingMessage["headers"]
  readonly body: Buffer
}

/** An attribute value as OTLP/JSON carries it, read back. */
export type AttributeValue = string | number | boolean

/** One received span, flattened. */
export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP span kind: 1 internal, 2 server, 3 client. */
  readonly kind: number
  readonly attributes: Readonly<Record<string, AttributeValue>>
  readonly events: ReadonlyArray<{
    readonly name: string
    readonly attributes: Record<string, AttributeValue>
  }>
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message?: string }
  readonly startNs: bigint
  readonly endNs: bigint
}

export interface Collector {
  readonly url: string
  readonly received: Array<Received>
  /** Posts being answered now, and the most at once. */
  readonly inFlight: { now: number; max: number }
  /** Every span received so far (OTLP/JSON bodies only). */
  readonly spans: () => Array<ReceivedSpan>
  readonly close: () => Promise<void>
}

interface OtlpKeyValue {
  readonly key: string
  readonly value: {
    readonly stringValue?: string
    readonly intValue?: string | number
    readonly doubleValue?: number
    readonly boolValue?: boolean
  }
}

interface OtlpJsonBody {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<OtlpKeyValue> }
    readonly scopeSpans: ReadonlyArray<{
      readonly spans: ReadonlyArray<{
        readonly traceId: string
        readonly spanId: string
        readonly parentSpanId?: string
        readonly name: string
        readonly kind: number
        readonly startTimeUnixNano: string
        readonly endTimeUnixNano: string
        readonly attributes: ReadonlyArray<OtlpKeyValue>
        readonly events: ReadonlyArray<{
          readonly name: string
          readonly attributes: ReadonlyArray<OtlpKeyValue>
        }>
        readonly status: { readonly code: number; readonly message?: string }
      }>
    }>
  }>
}

export const attributesOf = (list: ReadonlyArray<OtlpKeyValue>): Record<string, AttributeValue> => {
  const out: Record<string, AttributeValue> = {}
  for (const { key, value } of list) {
    if (value.stringValue !== undefined) out[key] = value.stringValue
    else if (value.intValue !== undefined) out[key] = Number(value.intValue)
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue
    else if (value.boolValue !== undefined) out[key] = value.boolValue
  }
  return out
}

/** The resource attributes and spans of one OTLP/JSON body. */
export const readTraces = (
  body: Buffer,
): { resources: Array<Record<string, AttributeValue>>; spans: Array<ReceivedSpan> } => {
  const data = JSON.parse(body.toString("utf8")) as OtlpJsonBody
  const resources: Array<Record<string, AttributeValue>> = []
  const spans: Array<ReceivedSpan> = []
  for (const resource of data.resourceSpans) {
    resources.push(attributesOf(resource.resource.attributes))
    for (const scope of resource.scopeSpans) {
      for (const span of scope.spans) {
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId === "" ? undefined : span.parentSpanId,
          name: span.name,
          kind: span.kind,
          attributes: attributesOf(span.attributes),
          events: span.events.map((e) => ({ name: e.name, attributes: attributesOf(e.attributes) })),
          status: span.status,
          startNs: BigInt(span.startTimeUnixNano),
          endNs: BigInt(span.endTimeUnixNano),
        })
      }
    }
  }
  return { resources, spans }
}

/** Starts a collector on a free local port. */
export const startCollector = async (mode: "ok" | "hang" | "stall" = "ok"): Promise<Collector> => {
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
        headers: req.headers,
        body: Buffer.concat(chunks),
      })
      if (mode === "hang") open.add(res)
      else if (mode === "stall") {
        open.add(res)
        res.writeHead(200, { "content-type": "application/json", "content-length": "2" }).write("{")
      } else res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  const spans = () =>
    received
      .filter((r) => r.contentType.includes("application/json"))
      .flatMap((r) => readTraces(r.body).spans)
  return { url: `http://127.0.0.1:${port}`, received, inFlight, spans, close }
}
