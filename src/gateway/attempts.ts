import { Effect, Exit, Scope } from "effect"
import type { RouteConfig, TargetConfig } from "../config/model.js"
import { NoUpstreamResponse, type TargetOutcome } from "../domain/errors.js"
import type { ParsedRequest } from "../domain/request.js"
import type { Meter } from "../meter/Meter.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import { targetClient, type ProviderView } from "../providers/Providers.js"
import type { Breakers } from "../reliability/Breakers.js"
import type { Deadlines } from "../reliability/Deadlines.js"
import type { RetryBudget } from "../reliability/RetryBudget.js"
import { parseRetryAfter, ruleForInbandError, ruleForStatus, type Rule } from "../reliability/rules.js"
import { AttemptFailed, AttemptHold, sendAttempt, type AttemptEnv, type AttemptResponse } from "./attempt.js"
import type { AttemptTally, RequestInfo } from "./stages.js"
import { carryContext } from "./trace.js"
import { requestFor, type Translations } from "./translation.js"

/**
 * The response the attempt loop chose for the client: a 2xx to serve, or
 * the last upstream error to send on unchanged. It stays open in its
 * attempt's scope (a child of the request's) until the request ends.
 */
export interface Chosen {
  readonly response: AttemptResponse
  readonly target: TargetConfig
  /** What the attempt holds: `hold.report(outcome)` reports its result to the breaker (once). */
  readonly hold: AttemptHold
  /** A response the rules serve (a 2xx with content), not an error sent on unchanged. */
  readonly served: boolean
}

/**
 * The rule for an attempt's response: an in-band error or a broken stream before any content stands for a
 * status. `errorType`: the status code, or the in-band error's type or the stream's failure (traces).
 */
const ruleFor = (response: AttemptResponse): { rule: Rule; reason: string; errorType: string } => {
  const meter = response.meter
  if (meter !== undefined && !meter.contentStarted) {
    const inband = meter.inbandError
    if (inband !== undefined) {
      return {
        rule: ruleForInbandError(inband.type),
        reason: `in-band ${inband.type}`,
        errorType: inband.type,
      }
    }
    if (meter.failure !== undefined)
      return { rule: ruleForStatus(502), reason: `${meter.failure} event stream`, errorType: meter.failure }
  }
  const status = response.call.status
  return { rule: ruleForStatus(status), reason: `status ${status}`, errorType: String(status) }
}

/** Adds a target's outcome; the first target's is the tally's `firstReason` (why a sticky session moved). */
const pushOutcome = (
  outcomes: Array<TargetOutcome>,
  tally: AttemptTally,
  first: boolean,
  outcome: TargetOutcome,
): void => {
  outcomes.push(outcome)
  if (first && tally.firstReason === undefined) tally.firstReason = outcome.reason
}

export interface AttemptDeps {
  readonly providers: ProviderView
  readonly deadlines: Deadlines["Service"]
  readonly meters: Meter["Service"]
  readonly breakers: Breakers["Service"]
  readonly retryBudget: RetryBudget["Service"]
  readonly telemetry: TelemetryService
}

/**
 * The attempt loop of reliability.md "Retry rules": targets in order,
 * `retry.max_attempts` attempts in all, extra attempts paid from the retry
 * budget, blocked targets skipped for free. Each attempt runs in a child
 * scope of the request's: its response and its breaker permit are that
 * scope's resources, so discarding an error response is closing its scope
 * (the body unread), and an interrupted request closes whatever is open.
 * When nothing more can be tried, the last upstream response goes to the
 * client unchanged, or a 502 names the targets.
 */
export const makeAttempts = (deps: AttemptDeps) => {
  const { providers, deadlines, breakers, retryBudget, telemetry } = deps
  const env: AttemptEnv = { deadlines, meters: deps.meters }

  return Effect.fnUntraced(function* (
    tally: AttemptTally,
    request: ParsedRequest,
    route: RouteConfig,
    /** The request: its tenant's failures feed its own breakers (ADR 0048); its trace gets a span per attempt. */
    info: RequestInfo,
    translations?: Translations | undefined,
    /** The order to try the targets in (routing.ts); default the route's. */
    order: ReadonlyArray<TargetConfig> = route.targets,
  ) {
    const tenant = info.principal.tenant.name
    const trace = info.trace
    const requestScope = yield* Effect.scope
    retryBudget.recordRequest()
    const outcomes: Array<TargetOutcome> = []
    let blocked = 0
    let blockedUntil = Number.POSITIVE_INFINITY
    /** A failed attempt's response, kept unread until Tollgate knows whether another attempt follows. */
    let held: { readonly chosen: Chosen; readonly scope: Scope.Closeable } | undefined
    targets: for (const target of order) {
      const client = targetClient(providers, target)
      const upstream = requestFor(client, request, translations)
      if (typeof upstream === "string") {
        pushOutcome(outcomes, tally, target === order[0], {
          provider: target.provider,
          model: target.model,
          outcome: "skipped",
          reason: upstream,
        })
        continue
      }
      let triesHere = 0
      while (tally.attempts < route.retry.maxAttempts) {
        // The attempt's scope and its one finalizer are in place before the permit exists: the permit is held
        // the moment it is granted, with no interruption point between.
        const scope = yield* Scope.fork(requestScope, "sequential")
        const hold = new AttemptHold(deadlines, breakers)
        yield* Scope.addFinalizer(scope, hold.release)
        const acquired = breakers.acquire(target.provider, target.model, client.region, tenant)
        // The fleet's half-open test is claimed in Redis (ADR 0055): the permit is held as it is granted.
        const permit = Effect.isEffect(acquired)
          ? yield* Effect.uninterruptible(
              Effect.map(acquired, (granted) => {
                if (granted._tag === "Permit") hold.hold(granted)
                return granted
              }),
            )
          : acquired
        if (permit._tag === "Blocked") {
          yield* Scope.close(scope, Exit.void)
          pushOutcome(outcomes, tally, target === order[0], {
            provider: target.provider,
            model: target.model,
            outcome: "skipped",
            reason: permit.reason,
          })
          trace?.breakerSkip(target, permit.reason)
          blocked++
          blockedUntil = Math.min(blockedUntil, permit.until)
          continue targets
        }
        hold.hold(permit)
        if (tally.attempts > 0 && !retryBudget.tryConsume()) {
          telemetry.retryBudgetRefused()
          trace?.retryBudgetRefused(target)
          yield* Scope.close(scope, Exit.void)
          pushOutcome(outcomes, tally, target === order[0], {
            provider: target.provider,
            model: target.model,
            outcome: "skipped",
            reason: "retry_budget_exhausted",
          })
          break targets
        }
        if (held !== undefined) {
          yield* Scope.close(held.scope, Exit.void)
          held = undefined
        }
        if (tally.attempts > 0) telemetry.nextAttempt(triesHere > 0 ? "retry" : "fallback")
        tally.attempts++
        triesHere++
        // The final attempt is named in the headers and the record even when it produced no response.
        tally.target = target
        tally.endpoint = upstream.endpoint
        const built = client.build(upstream, target.model)
        // The trace context goes upstream: this attempt's span's, or without tracing the caller's as it came.
        if (trace !== undefined) {
          const span = trace.startAttempt(tally.attempts, client, target, upstream.endpoint, built.origin)
          carryContext(built.headers, span, info.caller)
        } else if (info.caller !== undefined) carryContext(built.headers, undefined, info.caller)
        const sentAt = deadlines.now()
        const result = yield* sendAttempt(env, client, built, route.timeouts, hold)
        const waited = deadlines.now() - sentAt
        tally.upstreamMs += waited
        if (result instanceof AttemptFailed) {
          telemetry.attempt(target.provider, target.model, "failure", waited)
          hold.report("failure")
          trace?.attemptFailed(result.reason, result.detail)
          yield* Scope.close(scope, Exit.void)
          pushOutcome(outcomes, tally, target === order[0], {
            provider: target.provider,
            model: target.model,
            outcome: "failed",
            reason: result.reason,
            cause: result.detail,
          })
          continue targets
        }
        const { rule, reason, errorType } = ruleFor(result)
        trace?.attemptResponded(result.call.status)
        telemetry.attempt(target.provider, target.model, rule.outcome, waited)
        if (rule.decision === "serve") return { response: result, target, hold, served: true }
        const chosen: Chosen = { response: result, target, hold, served: false }
        if (rule.decision === "return") {
          // Sent on unchanged, as an upstream error: its breaker learns nothing from how the relay goes.
          hold.report("neutral")
          return chosen
        }
        hold.report(rule.outcome)
        if (rule.cooldown) {
          const now = deadlines.now()
          const ms = parseRetryAfter(result.call.headers["retry-after"], now)
          if (ms !== undefined && ms > 0)
            breakers.cooldown(target.provider, target.model, client.region, now + ms)
        }
        pushOutcome(outcomes, tally, target === order[0], {
          provider: target.provider,
          model: target.model,
          outcome: "failed",
          reason,
        })
        trace?.attemptDiscarded(errorType, reason)
        held = { chosen, scope }
        if (rule.decision === "retry_same" && triesHere < 2) continue
        continue targets
      }
      break
    }
    if (held !== undefined) return held.chosen
    if (tally.attempts === 0 && blocked > 0) {
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
}
