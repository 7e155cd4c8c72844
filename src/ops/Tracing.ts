/**
 * OpenTelemetry traces over OTLP/HTTP (SPEC "Tracing", ADR 0054).
 *
 * With `telemetry.otlp_endpoint` set, {@link layer} builds Effect's own OTLP
 * tracer (`effect/observability`) and offers it to the request path as
 * {@link Tracing}'s `tracer`: the gateway opens a SERVER span per request and
 * a CLIENT span per upstream attempt with it (src/gateway/trace.ts), exported
 * to `{otlp_endpoint}/v1/traces` with the `service.name` and
 * `service.version` resources. It is not installed as Effect's `Tracer`, so
 * Effect's own spans (`Effect.fn` names, the router of the non-proxy
 * endpoints: scrapes, probes, admin calls) are never exported. Without
 * `otlp_endpoint` the tracer is undefined and the request path does nothing.
 *
 * Export never blocks or slows the traced code, and its memory is bounded:
 * Effect's exporter only appends ended spans to a buffer that it posts every
 * {@link exportIntervalMs} or at {@link maxBatchSize} spans, and the HTTP client
 * given to it here caps the posts in flight ({@link maxExportsInFlight}) and
 * their time ({@link exportTimeoutMs}), and turns every failure into a dropped
 * batch that is counted, not retried — so at most
 * `(maxExportsInFlight + 1) × maxBatchSize` spans are held, whatever the collector does.
 */
import { Clock, Context, Effect, Layer, Option, Tracer } from "effect"
import { FetchHttpClient, HttpBody, HttpClient, HttpClientResponse } from "effect/http"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
import { readEnv } from "../config/checks.js"
import type { TelemetryConfig } from "../config/model.js"
import { VERSION } from "../version.js"

/** Spans are posted at least this often, ms. */
export const exportIntervalMs = 5_000
/** A batch is posted as soon as it holds this many spans. */
export const maxBatchSize = 512
/** Posts to the collector at once; a batch that would exceed it is dropped. */
export const maxExportsInFlight = 2
/** A post that takes longer is abandoned and its batch dropped, ms. */
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

/** What the request path creates spans with (src/gateway/trace.ts). */
export interface RequestTracer {
  /**
   * A started span. Without a `parent` it starts a trace, kept with
   * probability `sample_ratio`; with one (the caller's `traceparent`, or the
   * request's SERVER span) it follows the parent's sampled flag, so a trace
   * is kept or dropped whole and a caller's decision is honoured. An
   * unsampled span has ids (they go upstream) but is never exported.
   */
  readonly span: (name: string, kind: Tracer.SpanKind, parent: Tracer.AnySpan | undefined) => Tracer.Span
  /** Now, epoch ns (the layer's `Clock`). */
  readonly now: () => bigint
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

const NO_LINKS: Array<Tracer.SpanLink> = []

const requestTracer = (tracer: Tracer.Tracer, ratio: number, clock: Clock.Clock): RequestTracer => {
  const now = () => clock.currentTimeNanosUnsafe()
  return {
    now,
    span: (name, kind, parent) =>
      tracer.span({
        name,
        parent: parent === undefined ? Option.none() : Option.some(parent),
        annotations: Context.empty(),
        links: NO_LINKS,
        startTime: now(),
        kind,
        root: parent === undefined,
        sampled: parent === undefined ? ratio >= 1 || Math.random() < ratio : parent.sampled,
      }),
  }
}

/** Span counts of the bodies being posted, so that a batch's outcome can be counted. */
const spansOf = new WeakMap<HttpBody.HttpBody, number>()

const countSpans = (data: OtlpTracer.TraceData): number => {
  let count = 0
  for (const resource of data.resourceSpans)
    for (const scope of resource.scopeSpans) count += scope.spans.length
  return count
}

/** The chosen OTLP encoding, remembering each traces body's span count. */
const serialization = (protocol: TelemetryConfig["otlpProtocol"]) =>
  Layer.effect(
    OtlpSerialization.OtlpSerialization,
    Effect.gen(function* () {
      const inner = yield* OtlpSerialization.OtlpSerialization
      return {
        ...inner,
        traces: (data: OtlpTracer.TraceData) => {
          const body = inner.traces(data)
          spansOf.set(body, countSpans(data))
          return body
        },
      }
    }),
  ).pipe(
    Layer.provide(
      protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson,
    ),
  )

/**
 * The exporter's HTTP client: fetch, at most {@link maxExportsInFlight} posts at once,
 * each within {@link exportTimeoutMs} (`OTEL_EXPORTER_OTLP_TIMEOUT` ms when set). It never fails: a batch that cannot be
 * delivered is reported dropped and answered with a local 204, so Effect's exporter
 * neither retries it nor switches itself off for a minute (what it does after a failure).
 */
const exportClient = (report: (result: ExportResult, spans: number) => void, timeoutOverride?: number) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.gen(function* () {
      const fetchClient = yield* HttpClient.HttpClient
      const timeoutMs =
        timeoutOverride ?? positiveInteger(yield* readEnv("OTEL_EXPORTER_OTLP_TIMEOUT")) ?? exportTimeoutMs
      let inFlight = 0
      return fetchClient.pipe(
        HttpClient.transform((effect, request) => {
          const spans = spansOf.get(request.body) ?? 0
          const dropped = Effect.sync(() => {
            report("dropped", spans)
            return HttpClientResponse.fromWeb(request, new Response(null, { status: 204 }))
          })
          // The count goes up and its decrement is in place with no interruption point between; the post
          // itself stays interruptible, so a shutdown does not wait for a collector that never answers.
          // A batch is counted once: `settled` guards against an interruption racing the count.
          let settled = false
          const count = (result: ExportResult) =>
            Effect.sync(() => {
              if (settled) return
              settled = true
              report(result, spans)
            })
          const answered = Effect.sync(() =>
            HttpClientResponse.fromWeb(request, new Response(null, { status: 204 })),
          )
          // The body is read inside the timed post: a collector that sends its headers and stalls the body
          // holds a slot until the timeout, never past it. The exporter then gets a local, empty answer.
          return Effect.uninterruptibleMask((restore) =>
            Effect.suspend(() => {
              if (inFlight >= maxExportsInFlight) return dropped
              inFlight++
              return restore(
                effect.pipe(
                  Effect.flatMap((response) =>
                    Effect.andThen(
                      response.arrayBuffer,
                      count(response.status >= 200 && response.status < 300 ? "exported" : "dropped"),
                    ),
                  ),
                  Effect.timeout(timeoutMs),
                  Effect.catchCause(() => count("dropped")),
                  Effect.andThen(answered),
                ),
              ).pipe(
                Effect.onInterrupt(() => count("dropped")),
                Effect.ensuring(Effect.sync(() => inFlight--)),
              )
            }),
          )
        }),
      )
    }),
  ).pipe(Layer.provide(FetchHttpClient.layer))

const positiveInteger = (text: string | undefined): number | undefined => {
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined
  const n = Number(text.trim())
  return n > 0 ? n : undefined
}

/**
 * `OTEL_EXPORTER_OTLP_HEADERS` as the OpenTelemetry SDKs read it: `name=value`
 * pairs separated by commas, values URL-encoded; a malformed pair is skipped.
 * (A hosted collector's credentials belong in the environment, not in the
 * config file; they are never logged.)
 */
export const otlpHeaders = (text: string | undefined): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (text === undefined) return headers
  for (const pair of text.split(",")) {
    const eq = pair.indexOf("=")
    if (eq <= 0) continue
    const name = pair.slice(0, eq).trim().toLowerCase()
    try {
      const value = decodeURIComponent(pair.slice(eq + 1).trim())
      if (/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name) && !/[\r\n]/.test(value)) headers[name] = value
    } catch {
      // A malformed escape: the pair is skipped.
    }
  }
  return headers
}

/** {@link Tracing} for `telemetry`: the OTLP tracer, or nothing when `otlp_endpoint` is absent (tracing off). */
export const layer = (telemetry: TelemetryConfig, options: TracingOptions = {}): Layer.Layer<never> => {
  const endpoint = telemetry.otlpEndpoint
  if (endpoint === undefined) return Layer.empty
  const counts: SpanCounts = { exported: 0, dropped: 0 }
  const onExport = (result: ExportResult, spans: number) => {
    counts[result] += spans
    options.onExport?.(result, spans)
  }
  return Layer.effect(
    Tracing,
    Effect.gen(function* () {
      const delay = positiveInteger(yield* readEnv("OTEL_BSP_SCHEDULE_DELAY"))
      const headers = otlpHeaders(yield* readEnv("OTEL_EXPORTER_OTLP_HEADERS"))
      const tracer = yield* OtlpTracer.make({
        url: `${endpoint}/v1/traces`,
        resource: { serviceName: telemetry.serviceName, serviceVersion: VERSION },
        headers,
        exportInterval: options.exportIntervalMs ?? delay ?? exportIntervalMs,
        maxBatchSize,
        shutdownTimeout: shutdownTimeoutMs,
      })
      return { tracer: requestTracer(tracer, telemetry.sampleRatio, yield* Clock.Clock), counts }
    }),
  ).pipe(
    Layer.provide(
      Layer.mergeAll(serialization(telemetry.otlpProtocol), exportClient(onExport, options.exportTimeoutMs)),
    ),
    Layer.provide(OtlpExporter.layerFlusher),
  )
}
