import { Effect } from "effect"
import type { ServerResponse } from "node:http"
import { streamErrorEvent } from "../domain/errors.js"
import type { ProviderAdapter } from "../providers/adapter.js"
import type { Limits } from "../limits/Limits.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import { costMicroUsd } from "../meter/cost.js"
import type { StreamMeter } from "../meter/stream.js"
import type { Outcome } from "../reliability/Breakers.js"
import { cancelPending, type AttemptResponse } from "./attempt.js"
import type { RequestContext } from "./context.js"
import type { Deadlines } from "./Deadlines.js"
import { JsonCollector } from "./jsonCollector.js"
import { PAUSE, relay, type Observer, type RelayEnd } from "./relay.js"
import { relayHeaders } from "./respond.js"

const noObserver: Observer = () => undefined

/** The relay was stopped by the budget cutoff (or a store that could not confirm the budget). */
interface Cutoff {
  readonly _tag: "Cutoff"
}

/** What streamed past the last usage report may still be charged by the provider (ADR 0029). */
export const floorStreamedOutput = (meter: StreamMeter, maxTokens: number | undefined): void => {
  meter.usage.outputTokens = Math.max(meter.usage.outputTokens, streamedOutput(meter, maxTokens))
}

/** Output tokens estimated from the streamed text (ceil(bytes / 4)), never more than `max_tokens` allows. */
const streamedOutput = (meter: StreamMeter, maxTokens: number | undefined): number => {
  const estimate = Math.ceil(meter.outputChars / 4)
  return maxTokens === undefined ? estimate : Math.min(estimate, maxTokens)
}

/**
 * The approximate cutoff for hard-budget streams (SPEC "Sessions", ADR 0029):
 * the reported input usage plus an output estimate (ceil(output bytes / 4)),
 * priced at the serving target; `needed()` is how far that passes the
 * request's reservation (≤ 0: nothing to do).
 */
const streamCutoff = (ctx: RequestContext, meter: StreamMeter) => {
  const admission = ctx.admission
  const price = ctx.price
  const tenant = ctx.principal.tenant
  const hard =
    tenant.budgets.month?.mode === "hard" || (ctx.session !== null && tenant.budgets.session?.mode === "hard")
  if (admission === undefined || admission.via !== "store" || price === undefined || !hard) return undefined
  const estimate = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }
  const maxTokens = ctx.request?.maxTokens
  return {
    needed: (): number => {
      const u = meter.usage
      estimate.inputTokens = u.reported ? u.inputTokens : ctx.inputEstimate
      estimate.cacheReadTokens = u.cacheReadTokens
      estimate.cacheWriteTokens = u.cacheWriteTokens
      estimate.outputTokens = Math.max(u.outputTokens, streamedOutput(meter, maxTokens))
      return costMicroUsd(estimate, price) - admission.reserved
    },
  }
}

/**
 * Commits `response` to the client (status, headers, held chunks) and
 * relays the rest; after the commit nothing is retried. Folds the usage
 * into the request context, writes the usage record (through `record`)
 * before it ends the response, and returns what the relay means for the
 * target's breaker. A failure after the first byte ends an event stream
 * with an error event and closes it; a JSON body is cut off (the client
 * sees a truncated response, never a well-formed wrong one).
 */
export const makeServeResponse = (
  deadlines: Deadlines["Service"],
  limits: Limits["Service"],
  telemetry: TelemetryService,
  record: (ctx: RequestContext, then?: () => void) => Effect.Effect<void>,
) => {
  const serve = Effect.fnUntraced(function* (
    ctx: RequestContext,
    adapter: ProviderAdapter,
    response: AttemptResponse,
    res: ServerResponse,
  ) {
    const { status, headers } = response.call
    ctx.status = status
    const ok = status >= 200 && status < 300
    // An upstream error sent on unchanged: the record says so.
    if (!ok) ctx.error ??= `upstream_status_${status}`
    const meter = response.meter
    let json: JsonCollector | undefined
    let observe = noObserver
    const cutoff = ok && meter !== undefined ? streamCutoff(ctx, meter) : undefined
    if (meter !== undefined) {
      // The meter's accumulator is the request's usage, so an interrupted relay still records what arrived.
      ctx.usage = meter.usage
      observe = (chunk) => {
        meter.push(chunk)
        if (meter.failure !== undefined) return meter.failure
        return cutoff !== undefined && cutoff.needed() > 0 ? PAUSE : undefined
      }
    } else if (ok) {
      const collector = (json = new JsonCollector())
      for (const chunk of response.pending) collector.push(chunk)
      observe = (chunk) => {
        collector.push(chunk)
        return undefined
      }
    }
    res.writeHead(status, relayHeaders(ctx, headers, deadlines.now(), meter !== undefined))
    ctx.committed = true
    ctx.eventStream = meter !== undefined
    ctx.committedMs = deadlines.now()
    if (meter !== undefined) {
      telemetry.streamOpened()
      // Closed by the request's finalizer (telemetry, and the floor of a stream cut short).
      ctx.openStream = meter
    }
    let end: RelayEnd | Cutoff = yield* relay(deadlines, response, res, observe, ctx, meter === undefined)
    while (end._tag === "Paused" && cutoff !== undefined) {
      const extended = yield* limits.extend(ctx.admission!, Math.max(cutoff.needed(), ctx.targetEstimate, 1))
      if (extended !== "extended") {
        // The approximate cutoff (ADR 0029): stop reading upstream (the paused relay's canceler) and end the stream.
        cancelPending(ctx)
        ctx.error = extended === "refused" ? "budget_exceeded" : "store_unavailable"
        end = { _tag: "Cutoff" }
        break
      }
      end = yield* relay(deadlines, response, res, observe, ctx)
    }
    if (meter !== undefined) {
      meter.end()
      if (meter.inbandError !== undefined) ctx.error = `upstream_error: ${meter.inbandError.type}`
    } else if (json !== undefined && end._tag === "Complete") {
      json.foldInto(adapter.api, ctx.usage)
    }
    let outcome: Outcome = "success"
    // A slow client or a budget cutoff is nobody's failure upstream.
    if (end._tag === "ClientStalled" || end._tag === "Cutoff") outcome = "neutral"
    else if (
      end._tag === "UpstreamFailed" ||
      (meter !== undefined && (!meter.finished || meter.inbandError))
    ) {
      outcome = "failure"
    }
    if (outcome !== "success") {
      ctx.incomplete = true
      ctx.error ??=
        end._tag === "UpstreamFailed"
          ? end.reason
          : end._tag === "ClientStalled"
            ? "client_stalled"
            : "stream_ended_early"
      if (meter === undefined || end._tag === "ClientStalled") {
        // A stream the client stopped reading: what streamed may still be charged by the provider (ADR 0029).
        if (meter !== undefined) floorStreamedOutput(meter, ctx.request?.maxTokens)
        yield* record(ctx, () => res.destroy())
        return outcome
      }
      floorStreamedOutput(meter, ctx.request?.maxTokens)
      if (ctx.error === "budget_exceeded") {
        res.write(
          streamErrorEvent(
            adapter.api,
            "budget_exceeded",
            "the budget has no money left to continue this stream",
          ),
        )
      } else if (ctx.error === "store_unavailable") {
        res.write(
          streamErrorEvent(
            adapter.api,
            "overloaded_error",
            "the limit store is unavailable; the stream was stopped to protect a hard budget",
          ),
        )
      } else if (meter.inbandError === undefined) {
        res.write(streamErrorEvent(adapter.api, "api_error", `upstream stream failed: ${ctx.error}`))
      }
    } else if (ok && !ctx.usage.reported && ctx.endpoint !== "/v1/messages/count_tokens") {
      ctx.usageEstimated = true
      ctx.usage.inputTokens = ctx.inputEstimate
    }
    const last = end._tag === "Complete" ? end.last : undefined
    yield* record(ctx, () => (last !== undefined ? res.end(last) : res.end()))
    return outcome
  })
  return serve
}
