/**
 * `breaker.shared: true` (ADR 0055): the breakers of every copy are one
 * breaker per target, kept in Redis. The request path stays synchronous: each
 * copy decides from a mirror of the fleet's state, which it refreshes every
 * {@link SYNC_MS} with one script per target — the same call that adds the
 * outcomes it counted meanwhile and opens the breaker when the fleet's window
 * meets the rule. Only the half-open test is claimed in Redis by the request
 * that will make it (one per target for the whole fleet), and its result is
 * sent at once. While Redis fails, the copy decides with its own breakers,
 * which it keeps fed all along (`local`), for {@link LOCAL_MS} after the last
 * failure.
 */
import { Effect } from "effect"
import type { BreakerConfig } from "../config/model.js"
import {
  breakerKey,
  type Blocked,
  type BreakersService,
  type BreakerState,
  type BreakerView,
  type LocalBreakers,
  type Outcome,
  type Permit,
} from "./Breakers.js"
import { BREAKER_SCRIPTS } from "./lua/breaker.js"
import { MAX_RETRY_AFTER_MS } from "./rules.js"
import { BUCKETS, BUCKET_MS } from "./Window.js"

export { BREAKER_SCRIPTS }

/** How often each copy adds its counts to the fleet's and reads the fleet's state, ms. */
export const SYNC_MS = 500
/** How long a copy keeps to its own breakers after a failed call to Redis, ms (ADR 0006's 5 s). */
export const LOCAL_MS = 5_000
/** How long a half-open breaker's waiting callers are told to wait for its test, ms. */
const TESTING_RETRY_MS = 1_000
type Reply = Array<number | string>

/** The scripts as the client defines them. */
export interface BreakerRedis {
  tollgateBreakerSync(...keysAndArgs: Array<string | number>): Promise<Reply>
  tollgateBreakerClaim(...keysAndArgs: Array<string | number>): Promise<Reply>
  tollgateBreakerResult(...keysAndArgs: Array<string | number>): Promise<Reply>
}

/** The fleet's state of one target, as this copy last read it. */
interface Mirror {
  /** -1 until the first read. */
  gen: number
  state: BreakerState
  openUntil: number
  probeUntil: number
  cooldownUntil: number
  failures: number
  total: number
}

/** What this copy counted for one target since its last sync. */
interface Pending {
  /** The fleet generation the counts were made under. */
  gen: number
  /** bucket → [successes, failures]. */
  readonly counts: Map<number, [number, number]>
  /** Tenants failing at the ratio on their own attempts, and when (ADR 0048). */
  readonly tenants: Map<string, number>
}

interface Target {
  readonly provider: string
  readonly model: string
  readonly region: string
  /** The Redis keys: `tollgate:{brk:PROVIDER:MODEL}` and its failing tenants. */
  readonly keys: readonly [string, string]
  readonly mirror: Mirror
  pending: Pending
  /** A retry-after cooldown not told to the fleet yet (epoch ms; 0: none). */
  cooldownUntil: number
  /** The result of this copy's test, until Redis has it: sent again at each sync (a result of an old generation changes nothing there). */
  result: { readonly generation: number; readonly outcome: Outcome } | undefined
  /** New counts, a cooldown or a result wait: the next quick sync includes this target. */
  dirty: boolean
  /** Calls sent for this target, and the latest whose answer the mirror holds: an older answer is not applied. */
  sent: number
  applied: number
}

const emptyPending = (gen: number): Pending => ({ gen, counts: new Map(), tenants: new Map() })

const hashTag = (provider: string, model: string): string =>
  `tollgate:{brk:${encodeURIComponent(provider)}:${encodeURIComponent(model)}}`

const STATES: ReadonlySet<string> = new Set(["closed", "open", "half_open"])

/**
 * Reads the state reply (from `offset`) of call number `call` into the target's
 * mirror — unless an answer to a later call is there already (answers of one
 * connection arrive in order, but their continuations need not run in order).
 */
const applyReply = (target: Target, call: number, reply: Reply, offset = 0): void => {
  if (call < target.applied) return
  target.applied = call
  readReply(target.mirror, reply, offset)
}

/** Reads a script's state reply (from `offset`) into `mirror`. */
const readReply = (mirror: Mirror, reply: Reply, offset = 0): void => {
  const number = (i: number) => Number(reply[offset + i] ?? 0)
  mirror.gen = number(0)
  const state = String(reply[offset + 1])
  mirror.state = STATES.has(state) ? (state as BreakerState) : "closed"
  mirror.openUntil = number(2)
  mirror.probeUntil = number(3)
  mirror.cooldownUntil = Math.max(mirror.cooldownUntil, number(4))
  // The window's counts are read only when closed; an open breaker's last counts stay on show.
  if (mirror.state === "closed") {
    mirror.failures = number(5)
    mirror.total = number(6)
  }
}

export interface SharedBreakersOptions {
  readonly local: LocalBreakers
  readonly redis: BreakerRedis
  readonly settings: () => BreakerConfig
  readonly now: () => number
  /** How long a claimed test may take before another copy may test, ms (the longest `timeouts.total` + 5 s). */
  readonly leaseMs: () => number
  /** The targets of the config: synced from the start, so a copy knows an open breaker before its first attempt. */
  readonly targets: () => Iterable<{ provider: string; model: string; region: string }>
  /** Called on the first failure after Redis answered, and on the first answer after failures. */
  readonly onStore: (event: { readonly ok: boolean; readonly error?: string }) => void
}

/** The shared breakers over `local` (see the module comment). `sync` is the periodic call (and tests'). */
export const makeSharedBreakers = (options: SharedBreakersOptions) => {
  const { local, redis, settings, now } = options
  const targets = new Map<string, Target>()
  /** Epoch ms until which this copy decides with its own breakers. */
  let localUntil = 0
  let storeErrors = 0
  let failing = false

  const targetOf = (provider: string, model: string, region: string): Target => {
    const key = breakerKey(provider, model)
    let target = targets.get(key)
    if (target === undefined) {
      const tag = hashTag(provider, model)
      target = {
        provider,
        model,
        region,
        keys: [tag, `${tag}:t`],
        mirror: {
          gen: -1,
          state: "closed",
          openUntil: 0,
          probeUntil: 0,
          cooldownUntil: 0,
          failures: 0,
          total: 0,
        },
        pending: emptyPending(-1),
        cooldownUntil: 0,
        result: undefined,
        dirty: false,
        sent: 0,
        applied: 0,
      }
      targets.set(key, target)
    }
    return target
  }
  for (const t of options.targets()) targetOf(t.provider, t.model, t.region)

  const storeFailed = (cause: unknown): void => {
    storeErrors++
    localUntil = now() + LOCAL_MS
    if (failing) return
    failing = true
    options.onStore({ ok: false, error: cause instanceof Error ? cause.message : String(cause) })
  }
  const storeAnswered = (): void => {
    if (!failing) return
    failing = false
    options.onStore({ ok: true })
  }

  /** Tells Redis the result of this copy's test of `target` (kept until delivered). */
  const sendResult = async (target: Target): Promise<void> => {
    const result = target.result
    if (result === undefined) return
    const call = ++target.sent
    const reply = await redis.tollgateBreakerResult(
      target.keys[0],
      target.keys[1],
      now(),
      result.generation,
      result.outcome,
      settings().openForMs,
    )
    if (target.result === result) target.result = undefined
    applyReply(target, call, reply)
  }

  /** One target's sync: a test's result first, then its pending counts in and the fleet's state out. */
  const syncTarget = async (target: Target): Promise<void> => {
    target.dirty = false
    await sendResult(target)
    const pending = target.pending
    const cooldownUntil = target.cooldownUntil
    target.pending = emptyPending(target.mirror.gen)
    target.cooldownUntil = 0
    const config = settings()
    const args: Array<string | number> = [
      now(),
      pending.gen,
      config.minRequests,
      config.failureRatio,
      config.openForMs,
      BUCKET_MS,
      BUCKETS,
      local.tenantsNeeded(),
      cooldownUntil,
      pending.counts.size,
    ]
    for (const [bucket, [s, f]] of pending.counts) args.push(bucket, s, f)
    for (const [tenant, at] of pending.tenants) args.push(tenant, at)
    const call = ++target.sent
    try {
      applyReply(target, call, await redis.tollgateBreakerSync(target.keys[0], target.keys[1], ...args))
    } catch (error) {
      // The cooldown is told again at the next sync; the counts are left to this copy's own breakers.
      target.cooldownUntil = Math.max(target.cooldownUntil, cooldownUntil)
      throw error
    }
  }

  let syncing: Promise<void> | undefined
  /**
   * Syncs every target of the config (one script each, sent together) — or,
   * `onlyDirty`, those with something new to tell; one sync at a time.
   */
  const syncTargets = (onlyDirty: boolean): Promise<void> => {
    if (syncing !== undefined) return syncing.then(() => syncTargets(onlyDirty))
    // A reload may add targets: they are synced from the first tick after it.
    if (!onlyDirty) for (const t of options.targets()) targetOf(t.provider, t.model, t.region)
    const chosen = [...targets.values()].filter((target) => !onlyDirty || target.dirty)
    syncing = Promise.allSettled(chosen.map(syncTarget))
      .then((results) => {
        const failure = results.find((r) => r.status === "rejected")
        if (failure !== undefined) storeFailed(failure.reason)
        else if (chosen.length > 0) storeAnswered()
      })
      .finally(() => {
        syncing = undefined
      })
    return syncing
  }
  /** The periodic sync of every target (and tests'). */
  const sync = (): Promise<void> => syncTargets(false)

  /** Least time between two quick syncs, ms: a stream of failures costs Redis at most one sync per target per this. */
  const SOON_MS = 20
  let soon = false
  /** A failure, a cooldown or a test's result is told to the fleet at once (within {@link SOON_MS}), not at the next tick. */
  const syncSoon = (target: Target): void => {
    target.dirty = true
    if (soon) return
    soon = true
    setTimeout(() => {
      soon = false
      void syncTargets(true)
    }, SOON_MS).unref()
  }

  /** The fleet's test of `target`, claimed by this request; its tenant's own breaker asked first. */
  const claim = (target: Target, tenant: string): Effect.Effect<Permit | Blocked> =>
    Effect.suspend(() => {
      const own = local.acquire(target.provider, target.model, target.region, tenant, false)
      if (own._tag === "Blocked") return Effect.succeed(own)
      const call = ++target.sent
      return Effect.tryPromise(() =>
        redis.tollgateBreakerClaim(target.keys[0], now(), options.leaseMs()),
      ).pipe(
        Effect.map((reply): Permit | Blocked => {
          storeAnswered()
          applyReply(target, call, reply, 1)
          // The test's generation is the claim's answer's, whatever the mirror holds.
          if (Number(reply[0]) === 1) return { ...own, fleet: { generation: Number(reply[1]), probe: true } }
          // Another copy holds the test: the tenant's own test slot (if it took one) is given back.
          local.record(own, "neutral")
          return { _tag: "Blocked", until: now() + TESTING_RETRY_MS, reason: "breaker_testing" }
        }),
        Effect.catch((error) => {
          storeFailed(error)
          local.record(own, "neutral")
          return Effect.succeed(local.acquire(target.provider, target.model, target.region, tenant))
        }),
      )
    })

  const acquire: BreakersService["acquire"] = (provider, model, region, tenant) => {
    const t = now()
    if (t < localUntil) return local.acquire(provider, model, region, tenant)
    const target = targetOf(provider, model, region)
    const m = target.mirror
    if (t < m.cooldownUntil) return { _tag: "Blocked", until: m.cooldownUntil, reason: "cooldown" }
    if (m.state === "open" && t < m.openUntil)
      return { _tag: "Blocked", until: m.openUntil, reason: "breaker_open" }
    if (m.state === "half_open" && t < m.probeUntil)
      return { _tag: "Blocked", until: t + TESTING_RETRY_MS, reason: "breaker_testing" }
    if (m.state !== "closed") return claim(target, tenant)
    const permit = local.acquire(provider, model, region, tenant, false)
    if (permit._tag === "Blocked") return permit
    return { ...permit, fleet: { generation: m.gen, probe: false } }
  }

  const record: BreakersService["record"] = (permit, outcome: Outcome) => {
    local.record(permit, outcome)
    const fleet = permit.fleet
    if (fleet === undefined) return
    const target = targets.get(permit.key)
    if (target === undefined) return
    if (fleet.probe) {
      // Sent at once and, until Redis has it, again with each sync: a lost result would hold the test
      // (and the target) for the whole lease.
      target.result = { generation: fleet.generation, outcome }
      sendResult(target).then(storeAnswered, (error: unknown) => {
        storeFailed(error)
        target.dirty = true
      })
      return
    }
    // The result of an attempt permitted before the fleet's state changed changes nothing (the seed's rule);
    // it must not replace what was counted since.
    if (outcome === "neutral" || fleet.generation !== target.mirror.gen) return
    let pending = target.pending
    if (pending.gen !== fleet.generation) pending = target.pending = emptyPending(fleet.generation)
    const t = now()
    const bucket = Math.floor(t / BUCKET_MS)
    let counts = pending.counts.get(bucket)
    if (counts === undefined) pending.counts.set(bucket, (counts = [0, 0]))
    if (outcome === "success") counts[0]++
    else {
      counts[1]++
      if (local.perTenant() && local.tenantFailing(permit.tenant, target.provider, target.model))
        pending.tenants.set(permit.tenant, t)
      syncSoon(target)
    }
  }

  const cooldown: BreakersService["cooldown"] = (provider, model, region, untilMs) => {
    local.cooldown(provider, model, region, untilMs)
    const target = targetOf(provider, model, region)
    // Capped as the local breaker caps it.
    const until = Math.min(untilMs, now() + MAX_RETRY_AFTER_MS)
    target.cooldownUntil = Math.max(target.cooldownUntil, until)
    target.mirror.cooldownUntil = Math.max(target.mirror.cooldownUntil, until)
    syncSoon(target)
  }

  const view = (): Array<BreakerView> => {
    const t = now()
    if (t < localUntil) return local.view()
    const views: Array<BreakerView> = []
    for (const target of targets.values()) {
      const m = target.mirror
      views.push({
        tenant: null,
        provider: target.provider,
        model: target.model,
        region: target.region,
        state: m.state === "open" && t >= m.openUntil ? "half_open" : m.state,
        failureRatio: m.total === 0 ? 0 : m.failures / m.total,
        attempts: m.total,
        testableAt: m.state === "open" ? m.openUntil : 0,
        cooldownUntil: m.cooldownUntil > t ? m.cooldownUntil : 0,
      })
    }
    for (const own of local.view()) if (own.tenant !== null) views.push(own)
    return views
  }

  const service: BreakersService = { acquire, record, cooldown, view, storeErrors: () => storeErrors }
  return { service, sync }
}
