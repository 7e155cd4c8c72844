import { Effect } from "effect"
import type { ServerResponse } from "node:http"
import { streamErrorEvent } from "../http/errorBody.js"
import type { ProviderAdapter } from "../providers/adapter.js"
import type { Outcome } from "../reliability/Breakers.js"
import type { AttemptResponse } from "./attempt.js"
import type { RequestContext } from "./context.js"
import type { Deadlines } from "./Deadlines.js"
import { JsonCollector } from "./jsonCollector.js"
import { relay, type Observer } from "./relay.js"
import { relayHeaders } from "./respond.js"

const noObserver: Observer = () => undefined

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
  deadlines: Deadlines["Type"],
  record: (ctx: RequestContext) => Effect.Effect<void>,
) =>
  Effect.fnUntraced(function* (
    ctx: RequestContext,
    adapter: ProviderAdapter,
    response: AttemptResponse,
    res: ServerResponse,
  ) {
    ctx.status = response.status
    const ok = response.status >= 200 && response.status < 300
    const meter = response.meter
    let json: JsonCollector | undefined
    let observe = noObserver
    if (meter !== undefined) {
      // The meter's accumulator is the request's usage, so an interrupted relay still records what arrived.
      ctx.usage = meter.usage
      observe = (chunk) => {
        meter.push(chunk)
        return meter.failure
      }
    } else if (ok) {
      const collector = (json = new JsonCollector())
      for (const chunk of response.pending) collector.push(chunk)
      observe = (chunk) => {
        collector.push(chunk)
        return undefined
      }
    }
    res.writeHead(response.status, relayHeaders(ctx, response.headers))
    ctx.committed = true
    const end = yield* relay(deadlines, response, res, observe)
    if (meter !== undefined) {
      meter.end()
      if (meter.inbandError !== undefined) ctx.error = `upstream_error: ${meter.inbandError.type}`
    } else if (json !== undefined && end._tag === "Complete") {
      json.foldInto(adapter.api, ctx.usage)
    }
    let outcome: Outcome = "success"
    if (end._tag === "ClientStalled") outcome = "neutral"
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
        yield* record(ctx)
        res.destroy()
        return outcome
      }
      if (meter.inbandError === undefined) {
        res.write(streamErrorEvent(adapter.api, "api_error", `upstream stream failed: ${ctx.error}`))
      }
    } else if (ok && !ctx.usage.reported) {
      ctx.usageEstimated = true
      ctx.usage.inputTokens = ctx.inputEstimate
    }
    yield* record(ctx)
    res.end()
    return outcome
  })
