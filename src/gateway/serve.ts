import { Effect } from "effect"
import type { IncomingHttpHeaders, ServerResponse } from "node:http"
import { streamErrorEvent } from "../domain/errors.js"
import { includesUsage, releaseBody } from "../domain/request.js"
import type { Admission, Limits } from "../limits/Limits.js"
import { costMicroUsd } from "../meter/cost.js"
import type { StreamMeter } from "../meter/stream.js"
import { makeUsageAcc } from "../meter/usage.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import type { Outcome } from "../reliability/Breakers.js"
import type { Deadlines } from "../reliability/Deadlines.js"
import type { PriceEntry } from "../config/model.js"
import { targetEstimate } from "./admission.js"
import { closeResponse } from "./attempt.js"
import type { Chosen } from "./attempts.js"
import type { JsonCollector } from "../meter/json.js"
import type { Meter } from "../meter/Meter.js"
import { PAUSE, relay, type ChunkTransform, type Observer, type RelayEnd } from "./relay.js"
import { relayHeaders } from "./respond.js"
import { responseTransform, type WholeBodyTransform } from "./translation.js"
import { makeUsageChunkFilter } from "./usageChunk.js"
import type { Committed, Progress, RequestInfo } from "./stages.js"

const noObserver: Observer = () => undefined

/** An upstream call's headers once they were relayed (none are read after the commit). */
const NO_HEADERS: IncomingHttpHeaders = Object.freeze({})

/** The relay was stopped by the budget cutoff (or a store that could not confirm the budget). */
interface Cutoff {
  readonly _tag: "Cutoff"
}

/** How a committed response ended: its record's part and what ends it once the record is written. */
export interface Relayed {
  /** What the relay means for the target's breaker. */
  readonly outcome: Outcome
  readonly incomplete: boolean
  readonly error: string | null
  readonly usageEstimated: boolean
  /** How the client response ends after the usage record is in the file (ADR 0037): cut, or ended. */
  readonly end: "destroy" | "end"
  /** With "end": the body's last chunk, held back to go out with the end (a JSON body, `relay`'s holdLast). */
  readonly last?: Buffer | undefined
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
const streamCutoff = (
  progress: Progress,
  admission: Admission,
  price: PriceEntry | undefined,
  meter: StreamMeter,
) => {
  const plan = progress.plan!
  if (admission.via !== "store" || price === undefined || !admission.hard) return undefined
  const estimate = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }
  const maxTokens = progress.request?.maxTokens
  return {
    needed: (): number => {
      const u = meter.usage
      estimate.inputTokens = u.reported ? u.inputTokens : plan.inputEstimate
      estimate.cacheReadTokens = u.cacheReadTokens
      estimate.cacheWriteTokens = u.cacheWriteTokens
      estimate.outputTokens = Math.max(u.outputTokens, streamedOutput(meter, maxTokens))
      return costMicroUsd(estimate, price) - admission.reserved
    },
  }
}

/** The relay's result, reported to the attempt's breaker (its permit is held until now). */
const reported = (chosen: Chosen, relayed: Relayed): Relayed => {
  chosen.hold.report(relayed.outcome)
  return relayed
}

export interface ServeDeps {
  readonly deadlines: Deadlines["Service"]
  readonly meters: Meter["Service"]
  readonly limits: Limits["Service"]
  readonly telemetry: TelemetryService
  readonly price: (target: Chosen["target"]) => PriceEntry | undefined
}

/**
 * Commits the chosen response to the client (status, headers, held chunks)
 * and relays the rest; after the commit nothing is retried. The commit is
 * handed to `onCommit` (so an interrupted relay's record still has what
 * arrived), and the result says how the response ends: a failure after the
 * first byte ends an event stream with an error event; a JSON body is cut
 * off (the client sees a truncated response, never a well-formed wrong one).
 * The outcome is reported to the chosen attempt's breaker before it returns.
 */
export const makeServe = (deps: ServeDeps) => {
  const { deadlines, limits, telemetry } = deps
  /** Which provider made a Responses response, for a later `previous_response_id` (ADR 0045). */
  const remember = (info: RequestInfo, target: Chosen["target"], id: string) =>
    info.endpoint === "/v1/responses"
      ? limits.rememberResponse(id, { tenant: info.principal.tenant.name, provider: target.provider })
      : Effect.void
  return Effect.fnUntraced(function* (
    info: RequestInfo,
    progress: Progress,
    chosen: Chosen,
    res: ServerResponse,
  ) {
    const { response, target } = chosen
    const status = response.call.status
    const ok = status >= 200 && status < 300
    const price = deps.price(target)
    const meter = response.meter
    const admission = progress.admission!
    let json: JsonCollector | undefined
    let observe = noObserver
    const cutoff = ok && meter !== undefined ? streamCutoff(progress, admission, price, meter) : undefined
    if (meter !== undefined) {
      observe = (chunk) => {
        meter.push(chunk)
        if (meter.failure !== undefined) return meter.failure
        return cutoff !== undefined && cutoff.needed() > 0 ? PAUSE : undefined
      }
    } else if (ok) {
      const collector = (json = deps.meters.json())
      for (const chunk of response.pending) collector.push(chunk)
      observe = (chunk) => {
        collector.push(chunk)
        return undefined
      }
    }
    const committedMs = deadlines.now()
    const committed: Committed = {
      status,
      error: ok ? null : `upstream_status_${status}`,
      target,
      endpoint: response.endpoint,
      price,
      targetEstimate: targetEstimate(progress.plan!, price),
      eventStream: meter !== undefined,
      committedMs,
      // The meter's accumulator is the request's usage, so an interrupted relay still records what arrived.
      usage: meter !== undefined ? meter.usage : makeUsageAcc(),
      meter,
    }
    // From here an interrupted request is recorded as this response (a held one may be an earlier attempt's).
    progress.committed = committed
    const request = progress.request!
    // No attempt follows the commit: the request's bytes and their translations are not needed any more.
    releaseBody(request)
    progress.translations = undefined
    const translated = response.endpoint !== info.endpoint
    const call = response.call
    res.writeHead(
      status,
      relayHeaders(info, progress, call.headers, committedMs, meter !== undefined, translated),
    )
    // The upstream's head is in the client's now; a stream open for minutes need not keep it.
    call.headers = NO_HEADERS
    info.trace?.committed(status)
    if (meter !== undefined) telemetry.streamOpened()
    // A translated response is rewritten into the client's format; a Chat Completions usage chunk the client
    // did not ask for is metered, not relayed.
    const transform: ChunkTransform | WholeBodyTransform | undefined = translated
      ? responseTransform(response.endpoint, info.endpoint, status, meter !== undefined, {
          model: request.model,
          includeUsage: includesUsage(request),
        })
      : ok && meter !== undefined && response.endpoint === "/v1/chat/completions" && !includesUsage(request)
        ? makeUsageChunkFilter(meter.usage)
        : undefined
    // A stream's response id is known from its first event: remembered before the client can ask about it.
    let responseId = meter?.responseId
    if (ok && responseId !== undefined) yield* remember(info, target, responseId)
    let end: RelayEnd | Cutoff = yield* relay(
      deadlines,
      response,
      res,
      observe,
      meter === undefined,
      transform,
    )
    let error = committed.error
    while (end._tag === "Paused" && cutoff !== undefined) {
      const extended = yield* limits.extend(admission, Math.max(cutoff.needed(), committed.targetEstimate, 1))
      if (extended !== "extended") {
        // The approximate cutoff (ADR 0029): stop reading upstream and end the stream.
        closeResponse(deadlines, response)
        if (extended === "unavailable") error = "store_unavailable"
        else {
          error = "budget_exceeded"
          progress.budget = extended.refused
        }
        info.trace?.cutoff(error)
        end = { _tag: "Cutoff" }
        break
      }
      end = yield* relay(deadlines, response, res, observe, false, transform)
    }
    if (meter !== undefined) {
      meter.end()
      if (meter.inbandError !== undefined) error = `upstream_error: ${meter.inbandError.type}`
    } else if (json !== undefined && end._tag === "Complete") {
      const id = json.foldInto(response.endpoint, committed.usage)
      if (responseId === undefined && id !== undefined && info.endpoint === "/v1/responses") {
        responseId = id
        yield* remember(info, target, id)
      }
    }
    if (transform !== undefined && "failed" in transform && transform.failed && end._tag === "Complete") {
      // A body that could not be translated (not a valid answer of its format, or too large): cut off.
      return reported(chosen, {
        outcome: "failure",
        incomplete: true,
        error: "untranslatable_response",
        usageEstimated: false,
        end: "destroy",
      })
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
      error ??=
        end._tag === "UpstreamFailed"
          ? end.reason
          : end._tag === "ClientStalled"
            ? "client_stalled"
            : "stream_ended_early"
      if (meter === undefined || end._tag === "ClientStalled") {
        // A stream the client stopped reading: what streamed may still be charged by the provider (ADR 0029).
        if (meter !== undefined) floorStreamedOutput(meter, progress.request?.maxTokens)
        return reported(chosen, { outcome, incomplete: true, error, usageEstimated: false, end: "destroy" })
      }
      floorStreamedOutput(meter, progress.request?.maxTokens)
      if (error === "budget_exceeded") {
        res.write(
          streamErrorEvent(
            info.endpoint,
            "budget_exceeded",
            "the budget has no money left to continue this stream",
          ),
        )
      } else if (error === "store_unavailable") {
        res.write(
          streamErrorEvent(
            info.endpoint,
            "overloaded_error",
            "the limit store is unavailable; the stream was stopped to protect a hard budget",
          ),
        )
      } else if (meter.inbandError === undefined) {
        res.write(streamErrorEvent(info.endpoint, "api_error", `upstream stream failed: ${error}`))
      }
      return reported(chosen, { outcome, incomplete: true, error, usageEstimated: false, end: "end" })
    }
    let usageEstimated = false
    if (ok && !committed.usage.reported && info.endpoint !== "/v1/messages/count_tokens") {
      usageEstimated = true
      committed.usage.inputTokens = progress.plan!.inputEstimate
    }
    return reported(chosen, {
      outcome,
      incomplete: false,
      error,
      usageEstimated,
      end: "end",
      last: end._tag === "Complete" ? end.last : undefined,
    })
  })
}
