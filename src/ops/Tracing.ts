/**
 * OpenTelemetry traces over OTLP/HTTP (SPEC "Tracing", ADR 0054).
 *
 * With `telemetry.otlp_endpoint` set, {@link layer} installs Effect's own OTLP
 * tracer (`effect/observability`) as the `Tracer`, so every `Effect.withSpan`
 * is exported to `{otlp_endpoint}/v1/traces` with the `service.name` and
 * `service.version` resources. Without it the layer is empty: Effect keeps its
 * default tracer and nothing is exported.
 *
 * Export never blocks or slows the traced code, and its memory is bounded:
 * Effect's exporter only appends ended spans to a buffer that it posts every
 * {@link exportIntervalMs} or at {@link maxBatchSize} spans, and the HTTP client
 * given to it here caps the posts in flight ({@link maxExportsInFlight}) and
 * their time ({@link exportTimeoutMs}), and turns every failure into a dropped
 * batch that is counted (`onExport`), not retried — so at most
 * `(maxExportsInFlight + 1) × maxBatchSize` spans are held, whatever the collector does.
 */
import { Effect, Layer, Tracer } from "effect"
import { FetchHttpClient, HttpBody, HttpClient, HttpClientResponse } from "effect/http"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
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
  /** Called once per batch, with its span count (the next increment counts these in `/metrics`). Must not throw. */
  readonly onExport?: (result: ExportResult, spans: number) => void
  /** Tests: instead of {@link exportIntervalMs}. */
  readonly exportIntervalMs?: number
  /** Tests: instead of {@link exportTimeoutMs}. */
  readonly exportTimeoutMs?: number
}

/**
 * Keeps a root span with probability `ratio`; a child inherits its parent's
 * decision (Effect marks it unsampled when its parent is), so a trace is kept
 * or dropped whole. An unsampled span is created but never exported.
 */
const sampling = (tracer: Tracer.Tracer, ratio: number): Tracer.Tracer =>
  ratio >= 1
    ? tracer
    : Tracer.make({
        span: (options) =>
          tracer.span(
            options.parent._tag === "None" && options.sampled
              ? { ...options, sampled: Math.random() < ratio }
              : options,
          ),
        ...(tracer.context === undefined ? {} : { context: tracer.context }),
      })

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
 * each within {@link exportTimeoutMs}. It never fails: a batch that cannot be
 * delivered is reported dropped and answered with a local 204, so Effect's exporter
 * neither retries it nor switches itself off for a minute (what it does after a failure).
 */
const exportClient = (options: TracingOptions) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.gen(function* () {
      const fetchClient = yield* HttpClient.HttpClient
      const report = options.onExport ?? (() => {})
      const timeoutMs = options.exportTimeoutMs ?? exportTimeoutMs
      let inFlight = 0
      return fetchClient.pipe(
        HttpClient.transform((effect, request) => {
          const spans = spansOf.get(request.body) ?? 0
          const dropped = Effect.sync(() => {
            report("dropped", spans)
            return HttpClientResponse.fromWeb(request, new Response(null, { status: 204 }))
          })
          return Effect.uninterruptibleMask((restore) =>
            Effect.suspend(() => {
              if (inFlight >= maxExportsInFlight) return dropped
              inFlight++
              return restore(effect).pipe(
                Effect.flatMap((response) =>
                  response.status >= 200 && response.status < 300
                    ? Effect.sync(() => {
                        report("exported", spans)
                        return response
                      })
                    : Effect.andThen(Effect.ignore(response.arrayBuffer), dropped),
                ),
                Effect.timeout(timeoutMs),
                Effect.catchCause(() => dropped),
                Effect.ensuring(Effect.sync(() => inFlight--)),
              )
            }),
          )
        }),
      )
    }),
  ).pipe(Layer.provide(FetchHttpClient.layer))

/** The OTLP tracer for `telemetry`, or nothing when `otlp_endpoint` is absent (tracing off). */
export const layer = (telemetry: TelemetryConfig, options: TracingOptions = {}): Layer.Layer<never> => {
  const endpoint = telemetry.otlpEndpoint
  if (endpoint === undefined) return Layer.empty
  return Layer.effect(
    Tracer.Tracer,
    OtlpTracer.make({
      url: `${endpoint}/v1/traces`,
      resource: { serviceName: telemetry.serviceName, serviceVersion: VERSION },
      exportInterval: options.exportIntervalMs ?? exportIntervalMs,
      maxBatchSize,
      shutdownTimeout: shutdownTimeoutMs,
    }).pipe(Effect.map((tracer) => sampling(tracer, telemetry.sampleRatio))),
  ).pipe(
    Layer.provide(Layer.mergeAll(serialization(telemetry.otlpProtocol), exportClient(options))),
    Layer.provide(OtlpExporter.layerFlusher),
  )
}
