import { Clock, Context, Effect, Layer } from "effect"
import { Config } from "../config/Config.js"
import type { BreakerConfig } from "../config/model.js"
import { MAX_RETRY_AFTER_MS } from "./rules.js"
import { Window } from "./Window.js"

/** What an attempt's result means for its target's breaker (reliability.md "Circuit breakers"). */
export type Outcome = "success" | "failure" | "neutral"

export type BreakerState = "closed" | "open" | "half_open"

/** Permission to send one attempt, tied to the breaker generation it was given under. */
export interface Permit {
  readonly _tag: "Permit"
  readonly key: string
  readonly generation: number
  /** This attempt is the half-open test. */
  readonly probe: boolean
}

/** The target may not be tried before `until` (epoch ms). */
export interface Blocked {
  readonly _tag: "Blocked"
  readonly until: number
  readonly reason: "breaker_open" | "breaker_testing" | "cooldown"
}

/** A breaker as the admin API and metrics show it. */
export interface BreakerView {
  readonly provider: string
  readonly model: string
  readonly region: string
  readonly state: BreakerState
  readonly failureRatio: number
  readonly attempts: number
  /** Epoch ms when an open breaker may be tested (0 when not open). */
  readonly testableAt: number
  /** Epoch ms until which a retry-after cooldown skips the target (0 when none). */
  readonly cooldownUntil: number
}

/** How long a half-open breaker's waiting callers are told to wait for its test, ms. */
const TESTING_RETRY_MS = 1_000

const SUCCESSES = 0
const FAILURES = 1

class Breaker {
  state: BreakerState = "closed"
  generation = 0
  openUntil = 0
  testing = false
  cooldownUntil = 0
  readonly window = new Window(2)
  constructor(
    readonly provider: string,
    readonly model: string,
    readonly region: string,
  ) {}

  transition(state: BreakerState, now: number, openForMs: number): void {
    this.state = state
    this.generation++
    this.testing = false
    if (state === "open") this.openUntil = now + openForMs
    if (state === "closed") this.window.clear()
  }
}

export const breakerKey = (provider: string, model: string): string => `${provider}\u0000${model}`

/**
 * One breaker per provider + model (+ the provider's region) in this
 * process, plus the target's retry-after cooldown. Plain synchronous
 * methods over state kept in memory; time from the layer's `Clock`.
 */
export const makeBreakers = (config: BreakerConfig, now: () => number) => {
  const breakers = new Map<string, Breaker>()
  const get = (provider: string, model: string, region: string): Breaker => {
    const key = breakerKey(provider, model)
    let breaker = breakers.get(key)
    if (breaker === undefined) {
      breaker = new Breaker(provider, model, region)
      breakers.set(key, breaker)
    }
    return breaker
  }

  const acquire = (provider: string, model: string, region: string): Permit | Blocked => {
    const breaker = get(provider, model, region)
    const t = now()
    const key = breakerKey(provider, model)
    if (t < breaker.cooldownUntil)
      return { _tag: "Blocked", until: breaker.cooldownUntil, reason: "cooldown" }
    if (breaker.state === "open") {
      if (t < breaker.openUntil) return { _tag: "Blocked", until: breaker.openUntil, reason: "breaker_open" }
      breaker.transition("half_open", t, config.openForMs)
    }
    if (breaker.state === "half_open") {
      if (breaker.testing) return { _tag: "Blocked", until: t + TESTING_RETRY_MS, reason: "breaker_testing" }
      breaker.testing = true
      return { _tag: "Permit", key, generation: breaker.generation, probe: true }
    }
    return { _tag: "Permit", key, generation: breaker.generation, probe: false }
  }

  const record = (permit: Permit, outcome: Outcome): void => {
    const breaker = breakers.get(permit.key)
    // A result from an attempt permitted under an older generation changes nothing.
    if (breaker === undefined || breaker.generation !== permit.generation) return
    const t = now()
    if (breaker.state === "half_open") {
      if (outcome === "success") breaker.transition("closed", t, config.openForMs)
      else if (outcome === "failure") breaker.transition("open", t, config.openForMs)
      else breaker.testing = false
      return
    }
    if (breaker.state !== "closed" || outcome === "neutral") return
    breaker.window.add(t, outcome === "success" ? SUCCESSES : FAILURES)
    const failures = breaker.window.sum(t, FAILURES)
    const total = failures + breaker.window.sum(t, SUCCESSES)
    // failures / total, not ratio × total: 0.28 × 25 is 7.000000000000001, so 7 of 25 would not open.
    if (total >= config.minRequests && failures / total >= config.failureRatio) {
      breaker.transition("open", t, config.openForMs)
    }
  }

  /** Skips the target until `untilMs` (capped at 10 minutes from now); a shorter cooldown never shortens a longer one. */
  const cooldown = (provider: string, model: string, region: string, untilMs: number): void => {
    const breaker = get(provider, model, region)
    const capped = Math.min(untilMs, now() + MAX_RETRY_AFTER_MS)
    if (capped > breaker.cooldownUntil) breaker.cooldownUntil = capped
  }

  const view = (): Array<BreakerView> => {
    const t = now()
    return [...breakers.values()].map((b) => {
      const failures = b.window.sum(t, FAILURES)
      const attempts = failures + b.window.sum(t, SUCCESSES)
      return {
        provider: b.provider,
        model: b.model,
        region: b.region,
        state: b.state === "open" && t >= b.openUntil ? "half_open" : b.state,
        failureRatio: attempts === 0 ? 0 : failures / attempts,
        attempts,
        testableAt: b.state === "open" ? b.openUntil : 0,
        cooldownUntil: b.cooldownUntil > t ? b.cooldownUntil : 0,
      }
    })
  }

  return { acquire, record, cooldown, view }
}

export class Breakers extends Context.Service<Breakers, ReturnType<typeof makeBreakers>>()(
  "tollgate/reliability/Breakers",
) {}

export const layer = Layer.effect(
  Breakers,
  Effect.gen(function* () {
    const config = yield* Config
    const clock = yield* Clock.Clock
    return makeBreakers(config.breaker, () => clock.currentTimeMillisUnsafe())
  }),
)
