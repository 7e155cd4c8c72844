import { Effect } from "effect"
import type { ServerResponse } from "node:http"
import type { PriceEntry, RouteConfig, TargetConfig } from "../config/model.js"
import type { ProviderAdapter } from "../providers/adapter.js"
import type { Providers } from "../providers/Providers.js"
import type { Breakers, Outcome, Permit } from "../reliability/Breakers.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import type { RetryBudget } from "../reliability/RetryBudget.js"
import { parseRetryAfter, ruleForInbandError, ruleForStatus, type Rule } from "../reliability/rules.js"
import { AttemptFailed, closeResponse, sendAttempt, type AttemptResponse } from "./attempt.js"
import { targetEstimate } from "./admission.js"
import type { RequestContext } from "./context.js"
import type { Deadlines } from "./Deadlines.js"
import { NoUpstreamResponse, type TargetOutcome } from "../domain/errors.js"
import type { ParsedRequest } from "../domain/request.js"

/** A failed attempt's response, kept unread until Tollgate knows whether another attempt follows. */
interface Held {
  readonly response: AttemptResponse
  readonly target: TargetConfig
  readonly adapter: ProviderAdapter
}

/** What must be released if the loop ends early (interruption, defect): kept on the request context. */
export interface LoopState {
  held: Held | undefined
  permit: Permit | undefined
}

/** The rule for an attempt's response: an in-band error or a broken stream before any content stands for a status. */
const ruleFor = (response: AttemptResponse): { rule: Rule; reason: string } => {
  const meter = response.meter
  if (meter !== undefined && !meter.contentStarted) {
    if (meter.inbandError !== undefined) {
      return { rule: ruleForInbandError(meter.inbandError.type), reason: `in-band ${meter.inbandError.type}` }
    }
    if (meter.failure !== undefined)
      return { rule: ruleForStatus(502), reason: `${meter.failure} event stream` }
  }
  const status = response.call.status
  return { rule: ruleForStatus(status), reason: `status ${status}` }
}

export interface RouteDeps {
  readonly price: (target: TargetConfig) => PriceEntry | undefined
  readonly providers: Providers["Service"]
  readonly deadlines: Deadlines["Service"]
  readonly breakers: Breakers["Service"]
  readonly retryBudget: RetryBudget["Service"]
  readonly telemetry: TelemetryService
  readonly serveResponse: (
    ctx: RequestContext,
    adapter: ProviderAdapter,
    response: AttemptResponse,
    res: ServerResponse,
  ) => Effect.Effect<Outcome>
}

/**
 * The attempt loop of reliability.md "Retry rules": targets in order,
 * `retry.max_attempts` attempts in all, extra attempts paid from the retry
 * budget, blocked targets skipped for free, discarded error responses
 * closed unread. When nothing more can be tried, the last upstream
 * response goes to the client unchanged, or a 502 names the targets.
 */
export const makeRunRoute = (deps: RouteDeps) => {
  const { price, providers, deadlines, breakers, retryBudget, telemetry } = deps

  /**
   * Closes a held response and returns an unused breaker permit. The request's
   * finalizer calls it (one finalizer per request instead of one per loop).
   */
  const release = (state: LoopState): void => {
    if (state.held !== undefined) closeResponse(deadlines, state.held.response)
    if (state.permit !== undefined) breakers.record(state.permit, "neutral")
    state.held = undefined
    state.permit = undefined
  }

  const serve = (ctx: RequestContext, held: Held, res: ServerResponse) => {
    // Owned by the request's finalizer until the relay takes the response over (a failure before it closes it).
    ctx.cancel = () => closeResponse(deadlines, held.response)
    ctx.target = held.target
    ctx.price = price(held.target)
    ctx.targetEstimate = targetEstimate(ctx, ctx.price)
    return deps.serveResponse(ctx, held.adapter, held.response, res)
  }

  const loop = Effect.fnUntraced(function* (
    ctx: RequestContext,
    request: ParsedRequest,
    route: RouteConfig,
    res: ServerResponse,
  ) {
    // The context is the loop's state (`LoopState`): what it holds, the request's finalizer releases.
    const state: LoopState = ctx
    retryBudget.recordRequest()
    const outcomes: Array<TargetOutcome> = []
    let blocked = 0
    let blockedUntil = Number.POSITIVE_INFINITY
    targets: for (const target of route.targets) {
      const adapter = providers.get(target.provider)
      if (!adapter.serves(request.endpoint)) {
        outcomes.push({ ...target, outcome: "skipped", reason: `does not serve ${request.endpoint}` })
        continue
      }
      let triesHere = 0
      while (ctx.attempts < route.retry.maxAttempts) {
        const permit = breakers.acquire(target.provider, target.model, adapter.region)
        if (permit._tag === "Blocked") {
          outcomes.push({ ...target, outcome: "skipped", reason: permit.reason })
          blocked++
          blockedUntil = Math.min(blockedUntil, permit.until)
          continue targets
        }
        if (ctx.attempts > 0 && !retryBudget.tryConsume()) {
          telemetry.retryBudgetRefused()
          breakers.record(permit, "neutral")
          outcomes.push({ ...target, outcome: "skipped", reason: "retry_budget_exhausted" })
          break targets
        }
        state.permit = permit
        if (state.held !== undefined) closeResponse(deadlines, state.held.response)
        state.held = undefined
        if (ctx.attempts > 0) telemetry.nextAttempt(triesHere > 0 ? "retry" : "fallback")
        ctx.attempts++
        triesHere++
        // The final attempt is named in the headers and the record even when it produced no response.
        ctx.target = target
        const sentAt = deadlines.now()
        const result = yield* sendAttempt(
          deadlines,
          adapter.dispatcher(route.timeouts.connectMs),
          adapter.build(request, target.model),
          route.timeouts,
          adapter.api,
          ctx,
        )
        const waited = deadlines.now() - sentAt
        ctx.upstreamMs += waited
        if (result instanceof AttemptFailed) {
          telemetry.attempt(target.provider, target.model, "failure", waited)
          state.permit = undefined
          breakers.record(permit, "failure")
          outcomes.push({ ...target, outcome: "failed", reason: result.reason })
          continue targets
        }
        const response = result
        const { rule, reason } = ruleFor(response)
        telemetry.attempt(target.provider, target.model, rule.outcome, waited)
        if (rule.decision === "serve" || rule.decision === "return") {
          const outcome = yield* serve(ctx, { response, target, adapter }, res)
          state.permit = undefined
          breakers.record(permit, rule.decision === "serve" ? outcome : "neutral")
          return
        }
        state.permit = undefined
        breakers.record(permit, rule.outcome)
        if (rule.cooldown) {
          const now = deadlines.now()
          const ms = parseRetryAfter(response.call.headers["retry-after"], now)
          if (ms !== undefined && ms > 0)
            breakers.cooldown(target.provider, target.model, adapter.region, now + ms)
        }
        outcomes.push({ ...target, outcome: "failed", reason })
        state.held = { response, target, adapter }
        if (rule.decision === "retry_same" && triesHere < 2) continue
        continue targets
      }
      break
    }
    const held = state.held
    if (held !== undefined) {
      state.held = undefined
      yield* serve(ctx, held, res)
      return
    }
    if (ctx.attempts === 0 && blocked > 0) {
      return yield* new NoUpstreamResponse({
        message: "every target of the route is blocked by an open breaker or a cooldown",
        targets: outcomes,
        retryAfterSeconds: Math.max(1, Math.ceil((blockedUntil - deadlines.now()) / 1000)),
      })
    }
    return yield* new NoUpstreamResponse({
      message: "no target of the route produced a response",
      targets: outcomes,
    })
  })

  return {
    /** Runs the loop; the request's finalizer must `release(ctx)` (a held response, an unused permit). */
    run: loop,
    release,
  }
}
