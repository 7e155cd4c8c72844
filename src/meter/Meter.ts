import { Context, Layer } from "effect"
import type { Endpoint } from "../domain/endpoint.js"
import { JsonCollector } from "./json.js"
import { makeStreamMeter, type StreamMeter } from "./stream.js"

/**
 * The usage meter of responses relayed through the gateway: one bounded
 * meter per response, fed a copy of each chunk after it was written to the
 * client (plain functions per chunk; no Effect per byte). Event streams go
 * through the SSE meter (events up to 4 MiB; usage merged across events),
 * JSON bodies through a bounded copy read once at the end (16 MiB). The
 * usage record writer is `UsageLog`, beside it.
 */
export class Meter extends Context.Service<
  Meter,
  {
    /** A fresh meter for one event stream of `endpoint` (the upstream's). */
    readonly stream: (endpoint: Endpoint) => StreamMeter
    /** A fresh bounded collector of one JSON body, read for its usage at the end. */
    readonly json: () => JsonCollector
  }
>()("tollgate/meter/Meter") {
  static readonly layer: Layer.Layer<Meter> = Layer.succeed(
    Meter,
    Meter.of({ stream: makeStreamMeter, json: () => new JsonCollector() }),
  )
}
