/**
 * OpenTelemetry traces over OTLP/HTTP (SPEC "Tracing", ADR 0054).
 *
 * With `telemetry.otlp_endpoint` set, {@link layer} offers the request path a
 * {@link RequestTracer} (src/gateway/trace.ts opens a SERVER span per request
 * and a CLIENT span per upstream attempt with it), whose spans are posted to
 * `{otlp_endpoint}/v1/traces` with the `service.name` and `service.version`
 * resources. Without it the tracer is undefined and the request path does
 * nothing. Effect's own spans (`Effect.fn` names, the router of the non-proxy
 * endpoints) are never exported.
 *
 * A span is encoded once, when it ends, straight to its OTLP/JSON text (no
 * object per attribute): Effect's OTLP tracer, measured first, cost ~90 µs of
 * CPU per traced request, most of it in its per-attribute objects, their
 * `JSON.stringify` and the garbage (bench/README.md). With `http/protobuf`
 * the batch's text is encoded with Effect's protobuf serialization when it is
 * posted.
 *
 * Export never blocks or slows a request, and its memory is bounded: ended
 * spans wait in a buffer that is posted every {@link exportIntervalMs} or at
 * {@link maxBatchSize} spans; at most {@link maxExportsInFlight} posts are on
 * their way (a batch beyond that is dropped at once), each within
 * {@link exportTimeoutMs} (its answer read in full); a batch that is not
 * delivered is dropped and counted, never retried — so at most
 * `(maxExportsInFlight + 1) × maxBatchSize` spans are held, whatever the
 * collector does.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { OtlpSerialization } from "effect/observability"
import { readEnv } from "../config/checks.js"
import type { TelemetryConfig } from "../config/model.js"
import { VERSION } from "../version.js"
import { randomFillSync } from "node:crypto"
import { Agent, request } from "undici"
import { jsonString } from "./jsonText.js"

/** Spans are posted at least this often, ms. */
export const exportIntervalMs = 5_000
/** A batch is posted as soon as it holds this many spans. */
export const maxBatchSize = 512
/** Posts to the collector at once; a batch that would exceed it is dropped. */
export const maxExportsInFlight = 2
/** A post that takes longer (its answer read in full) is abandoned and its batch dropped, ms. */
export const exportTimeoutMs = 10_000
/** At shutdown, the last batch may take this long, ms. */
export const shutdownTimeoutMs = 2_000

/** How one batch ended: received by the collector (2xx), or dropped (collector down, slow, refusing, or too many posts in flight). */
export type ExportResult = "exported" | "dropped"

export interface TracingOptions {
  /** Called once per batch, with its span count, besides the counts kept in {@link Tracing}. Must not throw. */
  readonly onExport?: (result: ExportResult, spans: number) => void
  /** Tests: instead of {@link exportIntervalMs}. */
  readonly exportIntervalMs?: number
  /** Tests: instead of {@link exportTimeoutMs}. */
  readonly exportTimeoutMs?: number
}

/** An attribute's value: a string, a number or a boolean (no arrays). */
export type AttributeValue = string | number | boolean

/** How a span ended: OK, an error (its type and message), or interrupted (status unset). */
export type SpanEnd =
  | { readonly code: "ok" }
  | { readonly code: "error"; readonly type: string; readonly message: string }
  | { readonly code: "interrupted" }

/** A span's parent: a span of this gateway, or the caller's (its `traceparent`). */
export interface SpanParent {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

/** Attributes encoded once ({@link RequestTracer.encode}) for spans that all carry them. */
export type EncodedAttributes = string & { readonly EncodedAttributes: unique symbol }

/** A started span. Once ended, or when not sampled, its methods do nothing. */
export interface RequestSpan extends SpanParent {
  attribute(key: string, value: AttributeValue): void
  /** Adds attributes encoded beforehand (those a route's or a target's spans all have). */
  attributes(encoded: EncodedAttributes): void
  event(name: string, atNs: bigint, attributes: Readonly<Record<string, AttributeValue>>): void
  end(atNs: bigint, how: SpanEnd): void
}

export type SpanKind = "internal" | "server" | "client"

/** What the request path creates spans with (src/gateway/trace.ts). */
export interface RequestTracer {
  /**
   * A started span. Without a `parent` it starts a trace, kept with
   * probability `sample_ratio`; with one (the caller's `traceparent`, or the
   * request's SERVER span) it follows the parent's sampled flag, so a trace
   * is kept or dropped whole and a caller's decision is honoured. An
   * unsampled span has ids (they go upstream) but is never exported.
   */
  readonly span: (name: string, kind: SpanKind, parent: SpanParent | undefined) => RequestSpan
  /** Now, epoch ns (the layer's `Clock`). */
  readonly now: () => bigint
  /** `attributes` encoded for {@link RequestSpan.attributes}: encode once, add to many spans. */
  readonly encode: (attributes: Readonly<Record<string, AttributeValue>>) => EncodedAttributes
}

/** Spans handed to the collector so far, by how their batch ended (`/metrics`). */
export interface SpanCounts {
  exported: number
  dropped: number
}

/**
 * Tracing for the request path: the `tracer` (undefined when tracing is off:
 * the request path then creates nothing) and the export counts. A
 * `Context.Reference`: without the layer, tracing is off.
 */
export const Tracing = Context.Reference<{
  readonly tracer: RequestTracer | undefined
  readonly counts: Readonly<SpanCounts>
}>("tollgate/Tracing", { defaultValue: () => ({ tracer: undefined, counts: { exported: 0, dropped: 0 } }) })

/** Random bytes for ids, drawn in blocks (one `randomFillSync` per 512 span ids). */
const idPool = Buffer.alloc(4_096)
let idOffset = idPool.length

/** `n` random lower-case hex digits (`n` even, at most 64), never all zeros. */
const randomHex = (n: number): string => {
  const bytes = n >> 1
  if (idOffset + bytes > idPool.length) {
    randomFillSync(idPool)
    idOffset = 0
  }
  const hex = idPool.toString("hex", idOffset, (idOffset += bytes))
  return hex.charCodeAt(0) === 0x30 && /^0+$/.test(hex) ? randomHex(n) : hex
}

const KIND = { internal: 1, server: 2, client: 3 } as const

/** `{"key":KEY,"value":` of each attribute name (the names are the code's constants: a small, fixed set). */
const keyPrefixes = new Map<string, string>()

/** One attribute as OTLP/JSON writes it. */
const encodeAttribute = (key: string, value: AttributeValue): string => {
  let prefix = keyPrefixes.get(key)
  if (prefix === undefined) keyPrefixes.set(key, (prefix = `{"key":${jsonString(key)},"value":`))
  if (typeof value === "string") return `${prefix}{"stringValue":${jsonString(value)}}}`
  if (typeof value === "boolean") return `${prefix}{"boolValue":${value}}}`
  if (Number.isSafeInteger(value)) return `${prefix}{"intValue":${value}}}`
  if (Number.isFinite(value)) return `${prefix}{"doubleValue":${value}}}`
  return `${prefix}{"stringValue":"${value}"}}`
}

const encodeAttributes = (attributes: Readonly<Record<string, AttributeValue>>): string => {
  let out = ""
  for (const key in attributes) out += (out === "" ? "" : ",") + encodeAttribute(key, attributes[key]!)
  return out
}

/** A span that is not exported: it only has ids. */
class IdSpan implements RequestSpan {
  private ownId: string | undefined = undefined
  private trace: string | undefined
  constructor(
    parent: SpanParent | undefined,
    readonly sampled: boolean,
  ) {
    this.trace = parent?.traceId
  }
  get traceId(): string {
    return (this.trace ??= randomHex(32))
  }
  get spanId(): string {
    return (this.ownId ??= randomHex(16))
  }
  attribute(_key: string, _value: AttributeValue): void {}
  attributes(_encoded: EncodedAttributes): void {}
  event(_name: string, _atNs: bigint, _attributes: Readonly<Record<string, AttributeValue>>): void {}
  end(_atNs: bigint, _how: SpanEnd): void {}
}

/** A sampled span: its attributes and events kept as OTLP/JSON text, the whole span encoded when it ends. */
class JsonSpan extends IdSpan {
  private attributes_ = ""
  private events = ""
  private ended = false
  constructor(
    private readonly name: string,
    private readonly kind: SpanKind,
    private readonly parent: SpanParent | undefined,
    private readonly start: bigint,
    private readonly sink: (json: string) => void,
  ) {
    super(parent, true)
  }
  override attribute(key: string, value: AttributeValue): void {
    if (this.ended) return
    this.attributes_ += (this.attributes_ === "" ? "" : ",") + encodeAttribute(key, value)
  }
  override attributes(encoded: EncodedAttributes): void {
    if (this.ended || encoded === "") return
    this.attributes_ += (this.attributes_ === "" ? "" : ",") + encoded
  }
  override event(name: string, atNs: bigint, attributes: Readonly<Record<string, AttributeValue>>): void {
    if (this.ended) return
    this.events +=
      (this.events === "" ? "" : ",") +
      `{"timeUnixNano":"${atNs}","name":${jsonString(name)},"attributes":[${encodeAttributes(attributes)}],"droppedAttributesCount":0}`
  }
  override end(atNs: bigint, how: SpanEnd): void {
    if (this.ended) return
    if (how.code === "interrupted") this.attribute("effect.fiber.interrupted", true)
    this.ended = true
    const status =
      how.code === "ok"
        ? `{"code":1}`
        : how.code === "error"
          ? `{"code":2,"message":${jsonString(how.message)}}`
          : `{"code":0}`
    const parent = this.parent === undefined ? "" : `,"parentSpanId":"${this.parent.spanId}"`
    this.sink(
      `{"traceId":"${this.traceId}","spanId":"${this.spanId}"${parent},"name":${jsonString(this.name)}` +
        `,"kind":${KIND[this.kind]},"startTimeUnixNano":"${this.start}","endTimeUnixNano":"${atNs}"` +
        `,"attributes":[${this.attributes_}],"droppedAttributesCount":0,"events":[${this.events}]` +
        `,"droppedEventsCount":0,"status":${status},"links":[],"droppedLinksCount":0}`,
    )
  }
}

/** The tracer: sampling decided when a trace starts, sampled spans encoded into `sink`. */
const requestTracer = (ratio: number, clock: Clock.Clock, sink: (json: string) => void): RequestTracer => {
  const now = () => clock.currentTimeNanosUnsafe()
  return {
    now,
    encode: (attributes) => encodeAttributes(attributes) as EncodedAttributes,
    span: (name, kind, parent) => {
      const sampled = parent === undefined ? ratio >= 1 || Math.random() < ratio : parent.sampled
      return sampled ? new JsonSpan(name, kind, parent, now(), sink) : new IdSpan(parent, false)
    },
  }
}

const positiveInteger = (text: string | undefined): number | undefined => {
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined
  const n = Number(text.trim())
  return n > 0 ? n : undefined
}

/**
 * A list as the OpenTelemetry SDKs read `OTEL_EXPORTER_OTLP_HEADERS` and
 * `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs separated by commas, values
 * URL-encoded; a malformed pair (no key, a bad escape, a line break) is
 * skipped.
 */
const keyValues = (text: string | undefined): Array<readonly [string, string]> => {
  const pairs: Array<readonly [string, string]> = []
  if (text === undefined) return pairs
  for (const pair of text.split(",")) {
    const eq = pair.indexOf("=")
    if (eq <= 0) continue
    const key = pair.slice(0, eq).trim()
    try {
      const value = decodeURIComponent(pair.slice(eq + 1).trim())
      if (key !== "" && !/[\r\n]/.test(key + value)) pairs.push([key, value])
    } catch {
      // A malformed escape: the pair is skipped.
    }
  }
  return pairs
}

/**
 * `OTEL_EXPORTER_OTLP_HEADERS`: headers for every post (a hosted collector's
 * credentials belong in the environment, not in the config file; they are
 * never logged). Names are lower-cased; one that is not an HTTP token is skipped.
 */
export const otlpHeaders = (text: string | undefined): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const [key, value] of keyValues(text)) {
    const name = key.toLowerCase()
    if (/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) headers[name] = value
  }
  return headers
}

/**
 * `OTEL_RESOURCE_ATTRIBUTES` (`deployment.environment=prod,…`): more resource
 * attributes; `service.name` and `service.version` stay the config's and Tollgate's.
 */
export const resourceAttributes = (text: string | undefined): Record<string, string> =>
  Object.fromEntries(keyValues(text))

/** How a batch's OTLP/JSON bytes are posted: as they are, or as protobuf (Effect's encoder). */
type Encode = (json: Uint8Array) => { readonly body: Uint8Array; readonly contentType: string }

const encodeJson: Encode = (json) => ({ body: json, contentType: "application/json" })

/** The protobuf encoding of a batch, through Effect's OTLP protobuf serialization of the same structure. */
const protobufEncoder = Effect.gen(function* () {
  const serialization = yield* OtlpSerialization.OtlpSerialization
  const encode: Encode = (json) => {
    const body = serialization.traces(
      JSON.parse(Buffer.from(json.buffer, json.byteOffset, json.byteLength).toString("utf8")),
    )
    if (body._tag !== "Uint8Array") throw new Error("the protobuf serialization gave no bytes")
    return { body: body.body, contentType: body.contentType }
  }
  return encode
}).pipe(Effect.provide(OtlpSerialization.layerProtobuf))

/** Bytes the batch buffer starts with (it grows when a batch needs more, and is reused). */
const BATCH_BYTES = 1 << 20

/**
 * The exporter: the batch's spans written as UTF-8 into one reused buffer the
 * moment they end (outside the JavaScript heap: a span waiting for its batch
 * is not copied by the garbage collector, nor kept as string pieces), posted
 * every `intervalMs` or at {@link maxBatchSize}, at most
 * {@link maxExportsInFlight} posts at once, each within `timeoutMs`; `close`
 * posts the rest and waits at most {@link shutdownTimeoutMs}, then abandons
 * what is still on its way.
 */
const makeExporter = (options: {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly prefix: string
  readonly suffix: string
  readonly encode: Encode
  readonly timeoutMs: number
  readonly intervalMs: number
  readonly report: (result: ExportResult, spans: number) => void
}) => {
  const prefix = Buffer.from(options.prefix)
  const suffix = Buffer.from(options.suffix)
  let batch = Buffer.allocUnsafe(BATCH_BYTES)
  let used = 0
  let count = 0
  let scheduled = false
  /** After `close`, a span that ends is counted dropped. */
  let closed = false
  /** The collector's connections, kept alive across the batch interval (the global agent's 4 s would not). */
  const agent = new Agent({ connections: maxExportsInFlight, keepAliveTimeout: options.intervalMs + 1_000 })
  const inFlight = new Set<{ readonly controller: AbortController; readonly done: Promise<void> }>()

  const post = (): void => {
    if (count === 0) return
    const spans = count
    count = 0
    const length = used
    used = 0
    if (inFlight.size >= maxExportsInFlight) return options.report("dropped", spans)
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), options.timeoutMs)
    let encoded: ReturnType<Encode>
    try {
      // One copy out of the reused buffer: the post owns its bytes.
      encoded = options.encode(Buffer.concat([prefix, batch.subarray(0, length), suffix]))
    } catch {
      clearTimeout(timer)
      return options.report("dropped", spans)
    }
    const entry = {
      controller,
      // undici's request (not fetch: no web streams around a body that is already all here).
      done: request(options.url, {
        method: "POST",
        headers: { ...options.headers, "content-type": encoded.contentType },
        body: encoded.body,
        signal: controller.signal,
        dispatcher: agent,
      })
        // The answer is read inside the timeout (a collector that stalls its body holds a slot no longer), and
        // no more of it than 64 KiB.
        .then(async (response) => {
          await response.body.dump({ limit: 64 * 1024, signal: controller.signal })
          return response.statusCode >= 200 && response.statusCode < 300
        })
        .then(
          (ok) => options.report(ok ? "exported" : "dropped", spans),
          () => options.report("dropped", spans),
        )
        .finally(() => {
          clearTimeout(timer)
          inFlight.delete(entry)
        }),
    }
    inFlight.add(entry)
  }

  return {
    push: (json: string): void => {
      // At most 3 bytes per UTF-16 unit, and the comma.
      const room = json.length * 3 + 1
      if (used + room > batch.length) {
        const grown = Buffer.allocUnsafe(Math.max(batch.length * 2, used + room))
        batch.copy(grown, 0, 0, used)
        batch = grown
      }
      if (closed) return options.report("dropped", 1)
      if (count > 0) batch[used++] = 0x2c
      used += batch.write(json, used)
      // A full batch is posted on the next turn, not inside the request whose span filled it (encoding a
      // protobuf batch takes tens of milliseconds).
      if (++count >= maxBatchSize && !scheduled) {
        scheduled = true
        setImmediate(() => {
          scheduled = false
          post()
        })
      }
    },
    post,
    close: async (): Promise<void> => {
      closed = true
      post()
      const pending = [...inFlight]
      let timer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([
        Promise.all(pending.map((entry) => entry.done)),
        new Promise((resolve) => (timer = setTimeout(resolve, shutdownTimeoutMs))),
      ])
      clearTimeout(timer)
      for (const entry of inFlight) entry.controller.abort()
      await Promise.all([...inFlight].map((entry) => entry.done))
      await agent.close().catch(() => undefined)
    },
  }
}

/** {@link Tracing} for `telemetry`: the OTLP exporter, or nothing when `otlp_endpoint` is absent (tracing off). */
export const layer = (telemetry: TelemetryConfig, options: TracingOptions = {}): Layer.Layer<never> => {
  const endpoint = telemetry.otlpEndpoint
  if (endpoint === undefined) return Layer.empty
  return Layer.effect(
    Tracing,
    Effect.gen(function* () {
      const counts: SpanCounts = { exported: 0, dropped: 0 }
      const intervalMs =
        options.exportIntervalMs ??
        positiveInteger(yield* readEnv("OTEL_BSP_SCHEDULE_DELAY")) ??
        exportIntervalMs
      // Node's timers take at most 2^31 - 1 ms (a longer one fires at once).
      const timeoutMs = Math.min(
        options.exportTimeoutMs ??
          positiveInteger(yield* readEnv("OTEL_EXPORTER_OTLP_TIMEOUT")) ??
          exportTimeoutMs,
        2_147_483_647,
      )
      const headers = otlpHeaders(yield* readEnv("OTEL_EXPORTER_OTLP_HEADERS"))
      const encode = telemetry.otlpProtocol === "http/protobuf" ? yield* protobufEncoder : encodeJson
      const resource = `{"attributes":[${encodeAttributes({
        ...resourceAttributes(yield* readEnv("OTEL_RESOURCE_ATTRIBUTES")),
        "service.name": telemetry.serviceName,
        "service.version": VERSION,
        "telemetry.sdk.name": "tollgate",
        "telemetry.sdk.language": "nodejs",
        "telemetry.sdk.version": VERSION,
      })}],"droppedAttributesCount":0}`
      const exporter = makeExporter({
        url: `${endpoint}/v1/traces`,
        headers,
        prefix: `{"resourceSpans":[{"resource":${resource},"scopeSpans":[{"scope":{"name":"tollgate","version":"${VERSION}"},"spans":[`,
        suffix: "]}]}]}",
        encode,
        timeoutMs,
        intervalMs,
        report: (result, spans) => {
          counts[result] += spans
          options.onExport?.(result, spans)
        },
      })
      yield* Effect.addFinalizer(() => Effect.promise(exporter.close))
      yield* Effect.forkScoped(
        Effect.forever(Effect.andThen(Effect.sleep(intervalMs), Effect.sync(exporter.post))),
      )
      const tracer = requestTracer(telemetry.sampleRatio, yield* Clock.Clock, exporter.push)
      return { tracer, counts }
    }),
  )
}
