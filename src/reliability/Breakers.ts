import { Clock, Context, Effect, Layer } from "effect"
import { fleetPart } from "./fleet.js"
import { BREAKER_SCRIPTS, makeSharedBreakers, type BreakerRedis } from "./sharedBreakers.js"
import { LiveConfig } from "../config/LiveConfig.js"
import type { BreakerConfig } from "../config/model.js"
import { MAX_RETRY_AFTER_MS } from "./rules.js"
import { BUCKETS, BUCKET_MS, Window } from "./Window.js"

/** What an attempt's result means for its target's breaker (reliability.md "Circuit breakers"). */
export type Outcome = "success" | "failure" | "neutral"

export type BreakerState = "closed" | "open" | "half_open"

/** The tenant's own breaker's part of a permit (only when more than one tenant is configured). */
export interface TenantPermit {
  /** The key of the tenant's breaker. */
  readonly key: string
  readonly generation: number
  /** This attempt is the half-open test of the tenant's breaker. */
  readonly probe: boolean
}

/**
 * Permission to send one attempt, tied to the generation of each breaker it
 * was given under: the shared breaker of the target (`key`, `generation`,
 * `probe`) and, with more than one tenant configured, the tenant's own
 * breaker of that target (`own`).
 */
export interface Permit {
  readonly _tag: "Permit"
  readonly key: string
  readonly generation: number
  /** This attempt is the half-open test of the shared breaker. */
  readonly probe: boolean
  /** The tenant's breaker; undefined with a single tenant configured. */
  readonly own: TenantPermit | undefined
  /** The tenant the attempt is for: the shared breaker counts distinct failing tenants. */
  readonly tenant: string
  /** With `breaker.shared`: the fleet's breaker of the target it was given under (ADR 0055). */
  readonly fleet?: FleetPermit | undefined
}

/** The fleet breaker's part of a permit: its generation in Redis, and whether this attempt is its test. */
export interface FleetPermit {
  readonly generation: number
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
  /** null for the shared breaker of the target; the tenant's name for a tenant's own breaker. */
  readonly tenant: string | null
  readonly provider: string
  readonly model: string
  readonly region: string
  readonly state: BreakerState
  readonly failureRatio: number
  readonly attempts: number
  /** Epoch ms when an open breaker may be tested (0 when not open). */
  readonly testableAt: number
  /** Epoch ms until which a retry-after cooldown skips the target (0 when none; always 0 for a tenant's breaker). */
  readonly cooldownUntil: number
}

/** How long a half-open breaker's waiting callers are told to wait for its test, ms. */
const TESTING_RETRY_MS = 1_000

/**
 * Whether a failure at `at` is still in the window at `now`: the window's own
 * rule (`Window.sum`), so a tenant counts as failing exactly as long as its
 * failure counts — 50 to 60 seconds.
 */
const inWindow = (at: number, now: number): boolean =>
  Math.floor(now / BUCKET_MS) - Math.floor(at / BUCKET_MS) < BUCKETS

const SUCCESSES = 0
const FAILURES = 1

class Breaker {
  state: BreakerState = "closed"
  generation = 0
  openUntil = 0
  testing = false
  cooldownUntil = 0
  readonly window = new Window(2)
  /** Shared breakers with several tenants configured: each tenant's last counted failure, epoch ms. */
  readonly failedAt = new Map<string, number>()
  constructor(
    readonly provider: string,
    readonly model: string,
    readonly region: string,
    /** The tenant of a tenant's own breaker; null for the shared one. */
    readonly tenant: string | null,
  ) {}

  transition(state: BreakerState, now: number, openForMs: number): void {
    this.state = state
    this.generation++
    this.testing = false
    if (state === "open") this.openUntil = now + openForMs
    if (state === "closed") {
      this.window.clear()
      this.failedAt.clear()
    }
  }
}

export const breakerKey = (provider: string, model: string): string => `${provider}\u0000${model}`

const tenantKey = (tenant: string, key: string): string => `${tenant}\u0000${key}`

/**
 * One breaker per provider + model (+ the provider's region) in this
 * process, plus the target's retry-after cooldown (reliability.md "Circuit
 * breakers"). With more than one tenant configured (`tenants` > 1, ADR
 * 0048), that shared breaker opens only when the failures in its window
 * come from at least two distinct tenants, and each tenant also has its own
 * breaker per provider + model, made on first use, fed only by that
 * tenant's attempts: one tenant's failures open its own breaker, not
 * everyone's. Plain synchronous methods over state kept in memory; time
 * from the layer's `Clock`.
 */
export const makeBreakers = (
  settings: BreakerConfig | (() => BreakerConfig),
  now: () => number,
  tenantCount: number | (() => number),
) => {
  // A reload may change both (ADR 0052): read them when used.
  const settingsNow = typeof settings === "function" ? settings : () => settings
  const tenantsNow = typeof tenantCount === "function" ? tenantCount : () => tenantCount
  const perTenantNow = () => tenantsNow() > 1
  const breakers = new Map<string, Breaker>()
  /** The tenants' own breakers, by `tenantKey`. */
  const owned = new Map<string, Breaker>()

  const get = (provider: string, model: string, region: string): Breaker => {
    const key = breakerKey(provider, model)
    let breaker = breakers.get(key)
    if (breaker === undefined) {
      breaker = new Breaker(provider, model, region, null)
      breakers.set(key, breaker)
    }
    return breaker
  }

  const getOwn = (shared: Breaker, key: string, tenant: string): { key: string; breaker: Breaker } => {
    const own = tenantKey(tenant, key)
    let breaker = owned.get(own)
    if (breaker === undefined) {
      breaker = new Breaker(shared.provider, shared.model, shared.region, tenant)
      owned.set(own, breaker)
    }
    return { key: own, breaker }
  }

  /**
   * Whether `breaker` permits an attempt now: Blocked, or whether the attempt
   * would be its half-open test. An open breaker whose open time has passed
   * becomes half-open; the test slot is taken by the caller (`testing`).
   */
  const check = (breaker: Breaker, t: number): Blocked | boolean => {
    if (breaker.state === "open") {
      if (t < breaker.openUntil) return { _tag: "Blocked", until: breaker.openUntil, reason: "breaker_open" }
      breaker.transition("half_open", t, settingsNow().openForMs)
    }
    if (breaker.state === "half_open") {
      if (breaker.testing) return { _tag: "Blocked", until: t + TESTING_RETRY_MS, reason: "breaker_testing" }
      return true
    }
    return false
  }

  /**
   * The cooldown, then the shared breaker, then (several tenants) the tenant's own breaker. With
   * `localShared` false the shared breaker of this process is not asked (the fleet's decides, ADR 0055):
   * the permit only feeds its window.
   */
  const acquire = (
    provider: string,
    model: string,
    region: string,
    tenant: string,
    localShared = true,
  ): Permit | Blocked => {
    const breaker = get(provider, model, region)
    const t = now()
    const key = breakerKey(provider, model)
    if (t < breaker.cooldownUntil)
      return { _tag: "Blocked", until: breaker.cooldownUntil, reason: "cooldown" }
    const probe = localShared ? check(breaker, t) : false
    if (typeof probe !== "boolean") return probe
    let own: TenantPermit | undefined
    if (perTenantNow()) {
      const mine = getOwn(breaker, key, tenant)
      const ownProbe = check(mine.breaker, t)
      // Blocked by its own breaker: the shared test slot stays free for another tenant.
      if (typeof ownProbe !== "boolean") return ownProbe
      if (ownProbe) mine.breaker.testing = true
      own = { key: mine.key, generation: mine.breaker.generation, probe: ownProbe }
    }
    if (probe) breaker.testing = true
    return { _tag: "Permit", key, generation: breaker.generation, probe, own, tenant }
  }

  /**
   * Feeds one breaker (shared or a tenant's) the result of an attempt permitted under `generation`. A closed
   * breaker that meets the ratio rule opens when `opens` agrees.
   */
  const feed = (
    breaker: Breaker,
    generation: number,
    probe: boolean,
    outcome: Outcome,
    t: number,
    opens: (breaker: Breaker, t: number) => boolean,
  ): void => {
    // A result from an attempt permitted under an older generation changes nothing.
    if (breaker.generation !== generation) return
    if (breaker.state === "half_open") {
      // Only the test is permitted under a half-open generation; whoever ran it, its result decides.
      if (!probe) return
      if (outcome === "success") breaker.transition("closed", t, settingsNow().openForMs)
      else if (outcome === "failure") breaker.transition("open", t, settingsNow().openForMs)
      else breaker.testing = false
      return
    }
    if (breaker.state !== "closed" || outcome === "neutral") return
    breaker.window.add(t, outcome === "success" ? SUCCESSES : FAILURES)
    const failures = breaker.window.sum(t, FAILURES)
    const total = failures + breaker.window.sum(t, SUCCESSES)
    // failures / total, not ratio × total: 0.28 × 25 is 7.000000000000001, so 7 of 25 would not open.
    const config = settingsNow()
    if (total >= config.minRequests && failures / total >= config.failureRatio && opens(breaker, t)) {
      breaker.transition("open", t, settingsNow().openForMs)
    }
  }

  const always = () => true

  /** The failed share of the attempts a breaker's window counts now (0 when none). */
  const ratioOf = (breaker: Breaker, t: number): number => {
    const failures = breaker.window.sum(t, FAILURES)
    const total = failures + breaker.window.sum(t, SUCCESSES)
    return total === 0 ? 0 : failures / total
  }

  /**
   * A shared breaker meeting the ratio rule opens only when enough distinct
   * tenants are failing in its window — each at the breaker's failure ratio
   * on its own attempts (its own breaker's window), so one tenant's burst of
   * failures plus another's chance failure among successes is not enough.
   */
  const enoughTenants = (breaker: Breaker, t: number): boolean => {
    if (!perTenantNow()) return true
    const needed = Math.min(2, tenantsNow())
    const ratio = settingsNow().failureRatio
    const key = breakerKey(breaker.provider, breaker.model)
    let failing = 0
    for (const [tenant, at] of breaker.failedAt) {
      if (!inWindow(at, t)) {
        breaker.failedAt.delete(tenant)
        continue
      }
      const own = owned.get(tenantKey(tenant, key))
      if (own === undefined || ratioOf(own, t) >= ratio) failing++
    }
    return failing >= needed
  }

  const record = (permit: Permit, outcome: Outcome): void => {
    const t = now()
    // The tenant's own breaker first: the shared one reads its window.
    const own = permit.own
    if (own !== undefined) {
      const mine = owned.get(own.key)
      if (mine !== undefined) feed(mine, own.generation, own.probe, outcome, t, always)
    }
    const breaker = breakers.get(permit.key)
    if (breaker === undefined) return
    if (
      perTenantNow() &&
      outcome === "failure" &&
      breaker.state === "closed" &&
      breaker.generation === permit.generation
    )
      breaker.failedAt.set(permit.tenant, t)
    feed(breaker, permit.generation, permit.probe, outcome, t, enoughTenants)
  }

  /** Skips the target until `untilMs` (capped at 10 minutes from now); a shorter cooldown never shortens a longer one. */
  const cooldown = (provider: string, model: string, region: string, untilMs: number): void => {
    const breaker = get(provider, model, region)
    const capped = Math.min(untilMs, now() + MAX_RETRY_AFTER_MS)
    if (capped > breaker.cooldownUntil) breaker.cooldownUntil = capped
  }

  const viewOf = (b: Breaker, t: number): BreakerView => {
    const failures = b.window.sum(t, FAILURES)
    const attempts = failures + b.window.sum(t, SUCCESSES)
    return {
      tenant: b.tenant,
      provider: b.provider,
      model: b.model,
      region: b.region,
      state: b.state === "open" && t >= b.openUntil ? "half_open" : b.state,
      failureRatio: attempts === 0 ? 0 : failures / attempts,
      attempts,
      testableAt: b.state === "open" ? b.openUntil : 0,
      cooldownUntil: b.cooldownUntil > t ? b.cooldownUntil : 0,
    }
  }

  /** Every shared breaker (`tenant` null), then every tenant's own breaker that is not closed. */
  const view = (): Array<BreakerView> => {
    const t = now()
    const views = [...breakers.values()].map((b) => viewOf(b, t))
    for (const b of owned.values()) if (b.state !== "closed") views.push(viewOf(b, t))
    return views
  }

  /** Whether `tenant` fails at the breaker's ratio on its own attempts at the target now (ADR 0048). */
  const tenantFailing = (tenant: string, provider: string, model: string): boolean => {
    const own = owned.get(tenantKey(tenant, breakerKey(provider, model)))
    return own === undefined || ratioOf(own, now()) >= settingsNow().failureRatio
  }

  return {
    acquire,
    record,
    cooldown,
    view,
    tenantFailing,
    /** Several tenants configured: tenants' own breakers and the two-tenant rule apply (ADR 0048). */
    perTenant: perTenantNow,
    /** The tenants the two-tenant rule needs (0: the rule is off). */
    tenantsNeeded: (): number => (perTenantNow() ? Math.min(2, tenantsNow()) : 0),
  }
}

export type LocalBreakers = ReturnType<typeof makeBreakers>

/**
 * What the request path uses: `acquire` may answer with an effect (the
 * fleet's half-open test is claimed in Redis, ADR 0055); the rest is
 * synchronous.
 */
export interface BreakersService {
  readonly acquire: (
    provider: string,
    model: string,
    region: string,
    tenant: string,
  ) => Permit | Blocked | Effect.Effect<Permit | Blocked>
  readonly record: (permit: Permit, outcome: Outcome) => void
  readonly cooldown: (provider: string, model: string, region: string, untilMs: number) => void
  readonly view: () => Array<BreakerView>
  /** Breaker store operations that failed (`breaker.shared`; 0 otherwise): `/metrics`. */
  readonly storeErrors: () => number
}

export class Breakers extends Context.Service<Breakers, BreakersService>()("tollgate/reliability/Breakers") {}

export const layer = Layer.effect(
  Breakers,
  Effect.gen(function* () {
    const live = yield* LiveConfig
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const local = makeBreakers(
      () => live.get().breaker,
      now,
      () => live.get().tenants.size,
    )
    // `breaker.shared` (ADR 0055): the fleet's breakers in the limit store's Redis, this copy's as the fallback.
    const shared = yield* fleetPart<BreakerRedis, BreakersService>(
      live.get(),
      BREAKER_SCRIPTS,
      {
        down: "breakers: redis unavailable; this copy decides with its own breakers until it answers",
        up: "breakers: redis answers again; the fleet's breakers decide",
      },
      (redis, onStore) =>
        makeSharedBreakers({
          local,
          redis,
          settings: () => live.get().breaker,
          now,
          leaseMs: () => {
            let longest = 0
            for (const route of live.get().routes.values())
              longest = Math.max(longest, route.timeouts.totalMs)
            return longest + 5_000
          },
          targets: () => {
            const current = live.get()
            return [...current.routes.values()].flatMap((route) =>
              route.targets.map((t) => {
                const provider = current.providers.get(t.provider)
                return {
                  provider: t.provider,
                  model: t.model,
                  region: provider?.kind === "vertex" || provider?.kind === "bedrock" ? provider.region : "",
                }
              }),
            )
          },
          onStore,
        }),
    )
    return shared ?? { ...local, storeErrors: () => 0 }
  }),
)
