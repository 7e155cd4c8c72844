/**
 * The Redis limit store: every Tollgate copy shares the same counters. One
 * Lua script per operation (`lua/*.ts`, registered once with
 * `defineCommand`), atomic; the admissions and settlements of one
 * event-loop turn go to Redis as one script call (`redisTurn.ts`, `lua/many.ts`, ADR 0062),
 * one round trip for all of them. Far from every limit one admission counts a
 * lease for several requests (`redisLease.ts`, ADR 0063, 0065), and those
 * requests' settlements are sent merged a moment later (`redisDeferred.ts`,
 * ADR 0066). Every key of a tenant
 * carries the tenant as its hash tag (`tollgate:{TENANT}:…`), so one
 * tenant's keys share a slot and the scripts also run on Redis Cluster.
 *
 * Time is the caller's `now`, never Redis's clock; PEXPIREs (real time) are
 * only garbage collection, longer than any window they serve.
 */
import { Effect, Layer } from "effect"
import { ADMIT_LUA } from "./lua/admit.js"
import { acquireRedis, passwordsOf, type RedisClientOptions } from "./redisClient.js"
import { EXTEND_LUA } from "./lua/extend.js"
import { MANY_ADMIT, MANY_LUA, MANY_RELEASE, MANY_SESSION_TARGET } from "./lua/many.js"
import { makeDeferredSettles } from "./redisDeferred.js"
import { type Lease, LEASE_MARGIN, LEASE_REQUESTS, LEASE_SLACK, leaseId } from "./redisLease.js"
import { type Arg, makeTurnCalls, type RedisWithScripts } from "./redisTurn.js"
import { SETTLE_LUA } from "./lua/settle.js"
import { REMEMBER_SESSION_TARGET_LUA, SESSION_TARGET_BODY } from "./lua/sessionTarget.js"
import { type KnownTarget, makeKnownTargets, TARGET_REFRESH_MS, type TenantTargets } from "./redisTargets.js"
import { TENANT_STATE_LUA } from "./lua/tenantState.js"
import type { BudgetName } from "../domain/errors.js"
import { isSessionLive, REFUSAL_CODES, sortSessions, windowAt } from "./lua/rules.js"
import { monthOf } from "./periods.js"
import {
  budgetNameOf,
  MINUTE_MS,
  RESPONSE_OWNER_TTL_MS,
  SESSION_TTL_MS,
  SPEND_KEPT_MS,
  Store,
  StoreError,
  type Admitted,
  type AdmitRequest,
  type BudgetCheck,
  type PeriodBudget,
  type Refused,
  type SessionState,
  type StoreService,
} from "./Store.js"

export { LEASE_MARGIN, LEASE_REQUESTS, LEASE_SLACK } from "./redisLease.js"

/** Minute counters live 3 minutes (real time): the current minute is read as "previous" until its end + 1 min. */
const COUNTER_PX = 3 * MINUTE_MS
/** Month hashes (the tenant's and keys') live 35 days after their last write. */
const MONTH_PX = 35 * 24 * 60 * MINUTE_MS
/** Session hashes and the session index live 25 h after their last write (the lifetime is decided by `now`). */
const SESSION_PX = SESSION_TTL_MS + 60 * MINUTE_MS

/** `tollgate:{TENANT}:` with the tenant percent-encoded, so `{` or `}` in a name cannot move the hash tag. */
const prefix = (tenant: string): string => `tollgate:{${encodeURIComponent(tenant)}}:`

/** A response owner's key: hash-tagged by the response id (the id alone finds it; a tenant's key is refused). */
const responseKey = (id: string): string => `tollgate:{response:${encodeURIComponent(id)}}:owner`

const keys = (tenant: string) => {
  const p = prefix(tenant)
  return {
    requests: (minute: number) => `${p}rq:${minute}`,
    tokens: (minute: number) => `${p}tk:${minute}`,
    month: (month: string) => `${p}month:${month}`,
    /**
     * A periodic budget's spend hash: the tenant's `day:2026-12-02`,
     * `week:2026-W49`, `month:2026-12`; a key's `key:ID:day:2026-12-02` (the
     * id percent-encoded).
     */
    spend: (budget: Pick<PeriodBudget, "name" | "key" | "period">) =>
      budget.key === undefined
        ? `${p}${budget.name}:${budget.period}`
        : `${p}key:${encodeURIComponent(budget.key)}:${budget.name}:${budget.period}`,
    // The admit script names an evicted session's hash the same way, from this key of the request's session.
    session: (id: string | undefined) => (id === undefined ? `${p}session` : `${p}session:${id}`),
    sessionIndex: `${p}sessions`,
    /** Sticky routes' session targets (ADR 0073, `lua/sessionTarget.ts`): the hash and its last uses. */
    targets: `${p}targets`,
    targetsUsed: `${p}targets:used`,
  }
}

/** A budget as the scripts take it: its limit (-1: no budget) and whether it is hard (1) or soft (0). */
const limitArg = (budget: BudgetCheck | undefined): number => budget?.limit ?? -1
const hardArg = (budget: BudgetCheck | undefined): number => (budget?.hard === true ? 1 : 0)

/**
 * How long a periodic budget's hash lives after a write at `now`, ms: a
 * month 35 days; a day or week until SPEND_KEPT_MS after its period ends.
 */
const spendPx = (budget: PeriodBudget, now: number): number =>
  budget.name === "month" ? MONTH_PX : Math.max(0, budget.until - now) + SPEND_KEPT_MS

/** The budget a script names by position (1-based; one past the list: the session). */
const budgetAt = (budgets: ReadonlyArray<PeriodBudget>, position: number): BudgetName =>
  position >= 1 && position <= budgets.length ? budgetNameOf(budgets[position - 1]!) : "session"

const int = (value: unknown): number => (typeof value === "number" ? value : Number(value ?? 0))

const make = Effect.fnUntraced(function* (url: string, options: RedisClientOptions) {
  const secrets = passwordsOf(url)
  const redact = (message: string): string =>
    secrets.reduce((text, secret) => text.split(secret).join("***"), message)
  const fail =
    (operation: string) =>
    (cause: unknown): StoreError =>
      new StoreError({
        message: `redis ${operation} failed: ${redact(cause instanceof Error ? cause.message : String(cause))}`,
      })

  // Errors reach callers as StoreError.
  const redis = yield* acquireRedis<RedisWithScripts>(
    url,
    {
      // The budgets vary per request: each call passes its number of keys first.
      tollgateAdmit: { lua: ADMIT_LUA },
      tollgateSettle: { lua: SETTLE_LUA },
      tollgateExtend: { lua: EXTEND_LUA },
      tollgateTenantState: { lua: TENANT_STATE_LUA },
      tollgateMany: { lua: MANY_LUA },
      tollgateSessionTarget: { lua: SESSION_TARGET_BODY, numberOfKeys: 2 },
      tollgateRememberSessionTarget: { lua: REMEMBER_SESSION_TARGET_LUA, numberOfKeys: 2 },
    },
    options,
  )

  const { batch, enqueue, enqueueSettle } = makeTurnCalls(redis, options.cluster === true)

  /** One call of this turn's batch: a `StoreError` naming `operation` when it fails. */
  const send = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, StoreError> =>
    Effect.tryPromise({
      try: () => {
        batch()
        return call()
      },
      catch: fail(operation),
    })

  /** One settle script call of the turn; its reply: the sessions it evicted. */
  const sendSettle = (tenant: string, keyList: ReadonlyArray<Arg>, args: Array<Arg>) =>
    send("settle", () => enqueueSettle(tenant, keyList, args)).pipe(Effect.map(int))
  /** Leased requests' settlements, sent merged a moment later (ADR 0066). */
  const deferred = yield* makeDeferredSettles(sendSettle)

  const leaseRequests = options.leaseRequests ?? LEASE_REQUESTS
  /**
   * Leases by `leaseId`, and the ids whose lease is being asked for (one ask at a time), with the requests
   * waiting for its answer: when the ask follows a spent lease (far from every limit a moment ago), the
   * requests of that id that come meanwhile wait for it (one round trip, as long as asking Redis themselves
   * would take) and take from the new lease; the others ask Redis singly at once.
   */
  const leases = new Map<string, Lease>()
  const asking = new Map<string, { readonly afterLease: boolean; readonly waiters: Array<() => void> }>()
  /** Gives back what `lease` has left (a failure leaves it counted, as a crash would). */
  const release = (id: string, lease: Lease): Promise<unknown> => {
    if (leases.get(id) === lease) leases.delete(id)
    if (lease.timer !== undefined) clearTimeout(lease.timer)
    if (lease.requests === 0 && lease.tokens === 0 && lease.money === 0) return Promise.resolve()
    const k = keys(lease.tenant)
    const keyList: Array<Arg> = [k.requests(lease.minute), k.tokens(lease.minute)]
    for (const budget of lease.budgets) keyList.push(k.spend(budget))
    const unused = [lease.requests, lease.tokens, lease.money]
    lease.requests = lease.tokens = lease.money = 0
    batch()
    return enqueue(lease.tenant, MANY_RELEASE, keyList, unused).catch(() => undefined)
  }
  /** Takes `request` out of `lease` when it has room for it. */
  const takes = (lease: Lease, request: AdmitRequest): boolean => {
    if (lease.requests === 0 || request.tokenCost > lease.tokens || request.reserve > lease.money)
      return false
    lease.requests--
    lease.tokens -= request.tokenCost
    lease.money -= request.reserve
    return true
  }
  /**
   * Keeps the rest of a grant of `granted` requests as a lease, given back at the end of its minute; returns
   * the answer of the requests it admits (`leased`), or undefined when it is not kept.
   */
  const keep = (
    id: string,
    request: AdmitRequest,
    granted: Admitted,
    count: number,
  ): Admitted | undefined => {
    const admitted: Admitted = { ...granted, leased: true }
    const lease: Lease = {
      tenant: request.tenant,
      minute: admitted.minute,
      budgets: request.budgets,
      admitted,
      requests: count - 1,
      tokens: (count * LEASE_SLACK - 1) * request.tokenCost,
      money: (count * LEASE_SLACK - 1) * request.reserve,
      timer: undefined,
    }
    const old = leases.get(id)
    if (old !== undefined) void release(id, old)
    // The grant's answer is every leased request's: it must say nothing that concerns this request alone.
    if (admitted.softExceeded.length > 0 || admitted.sessionsEvicted > 0) {
      void release(id, lease)
      return undefined
    }
    leases.set(id, lease)
    // Its counters are the minute's: what is left goes back 1 s after the minute ends.
    lease.timer = setTimeout(
      () => void release(id, lease),
      (admitted.minute + 1) * MINUTE_MS - request.now + 1_000,
    )
    lease.timer.unref()
    return admitted
  }
  // A copy that stops sends its deferred settlements and gives back what its leases have left.
  yield* Effect.addFinalizer(() =>
    Effect.andThen(
      deferred.flush,
      Effect.promise(() => Promise.all([...leases].map(([id, lease]) => release(id, lease)))),
    ),
  )

  const admit: StoreService["admit"] = (request) => admitOnce(request, false)
  /**
   * Decided when it runs, not when it is built, and uninterruptibly up to the Redis call: an ask is
   * registered and its cleanup (which wakes its waiters) set up in one step, so no ask is left registered.
   */
  const admitOnce = (request: AdmitRequest, waited: boolean): ReturnType<StoreService["admit"]> =>
    Effect.uninterruptibleMask((restore) => {
      // A lease is used only while the connection is up: once it is lost, admissions ask Redis, fail, and the
      // limits apply ADR 0006 (503 for hard budgets) instead of admitting what could not be settled.
      if (leaseRequests <= 1 || request.session?.budget !== undefined || redis.status !== "ready")
        return restore(askRedis(request, undefined))
      const id = leaseId(request)
      const lease = leases.get(id)
      if (lease !== undefined) {
        if (takes(lease, request))
          return Effect.succeed(
            request.session === undefined
              ? lease.admitted
              : { ...lease.admitted, sessionAtSettle: request.reserve },
          )
        // Spent, or too small for this request: what is left goes back, and this request asks for a new one.
        void release(id, lease)
      }
      const pending = asking.get(id)
      if (pending === undefined) {
        const entry = { afterLease: lease !== undefined, waiters: new Array<() => void>() }
        asking.set(id, entry)
        return Effect.ensuring(
          restore(askRedis(request, id)),
          Effect.sync(() => {
            asking.delete(id)
            for (const wake of entry.waiters) wake()
          }),
        )
      }
      if (pending.afterLease && !waited)
        return restore(
          Effect.flatMap(
            Effect.callback<void>((resume) => {
              pending.waiters.push(() => resume(Effect.void))
            }),
            () => admitOnce(request, true),
          ),
        )
      return restore(askRedis(request, undefined))
    })

  /** One admission by the admit script; with `asked` (a `leaseId`), asking for a lease kept under it. */
  const askRedis = (request: AdmitRequest, asked: string | undefined): ReturnType<StoreService["admit"]> => {
    const ask = asked === undefined ? 1 : leaseRequests
    const { now, tokenCost, budgets } = request
    const k = keys(request.tenant)
    const minute = Math.floor(now / MINUTE_MS)
    const tokenLimit = tokenCost > 0 ? request.tokensPerMinute : undefined
    const session = request.session
    const n = budgets.length
    const keyList: Array<Arg> = [
      k.requests(minute),
      k.requests(minute - 1),
      k.tokens(minute),
      k.tokens(minute - 1),
      k.session(session?.id),
      k.sessionIndex,
    ]
    for (const budget of budgets) keyList.push(k.spend(budget))
    const args: Array<Arg> = [
      now,
      now - minute * MINUTE_MS,
      request.requestsPerMinute ?? -1,
      tokenLimit ?? -1,
      tokenCost,
      request.reserve,
      session?.id ?? "",
      limitArg(session?.budget),
      hardArg(session?.budget),
      SESSION_TTL_MS,
      COUNTER_PX,
      SESSION_PX,
      request.maxSessions,
      budgets.findIndex((b) => b.key === undefined && b.name === "month") + 1,
    ]
    for (const budget of budgets)
      args.push(limitArg(budget.check), hardArg(budget.check), spendPx(budget, now))
    args.push(ask, LEASE_MARGIN, LEASE_SLACK)
    const answered = send("admit", () => enqueue(request.tenant, MANY_ADMIT, keyList, args)).pipe(
      Effect.map((answer): Admitted | Refused => {
        const reply = answer as Array<number>
        const requests = windowAt(request.requestsPerMinute, int(reply[2]), int(reply[3]), now)
        const tokens = windowAt(tokenLimit, int(reply[4]), int(reply[5]), now)
        if (int(reply[0]) !== 1) {
          const spend = int(reply[7])
          const reason = REFUSAL_CODES[int(reply[1])] ?? "requests"
          return {
            _tag: "Refused",
            reason,
            budget: reason === "budget" ? budgetAt(budgets, int(reply[8])) : undefined,
            requests,
            tokens,
            monthSpend: spend < 0 ? undefined : spend,
          }
        }
        const softExceeded: Array<BudgetName> = []
        for (let i = 0; i < n; i++) if (int(reply[10 + i]) === 1) softExceeded.push(budgetNameOf(budgets[i]!))
        if (int(reply[9]) === 1) softExceeded.push("session")
        const admitted: Admitted = {
          _tag: "Admitted",
          minute,
          month: monthOf(now),
          requests,
          tokens,
          softExceeded,
          sessionsEvicted: int(reply[6]),
          monthSpend: int(reply[7]),
        }
        const granted = int(reply[10 + n])
        if (asked !== undefined && granted > 1) return keep(asked, request, admitted, granted) ?? admitted
        return admitted
      }),
    )
    return answered
  }

  const settle: StoreService["settle"] = (request) => {
    const k = keys(request.tenant)
    const { now, budgets } = request
    const keyList: Array<Arg> = [k.session(request.sessionId), k.sessionIndex, k.tokens(request.minute)]
    for (const budget of budgets) keyList.push(k.spend(budget))
    const args: Array<Arg> = [
      now,
      request.reserved,
      request.cost,
      request.tokenDelta,
      request.sessionId ?? "",
      SESSION_TTL_MS,
      SESSION_PX,
      request.reserved - (request.sessionAtSettle?.unreserved ?? 0),
      request.sessionAtSettle?.maxSessions ?? 0,
    ]
    for (const budget of budgets) args.push(spendPx(budget, now))
    if (request.leased === true && redis.status === "ready") {
      deferred.defer(request, keyList, args)
      return Effect.succeed(0)
    }
    return sendSettle(request.tenant, keyList, args)
  }

  const extend: StoreService["extend"] = (request) => {
    const k = keys(request.tenant)
    const { now, budgets } = request
    const session = request.session
    const args: Array<Arg> = [1 + budgets.length, k.session(session?.id)]
    for (const budget of budgets) args.push(k.spend(budget))
    args.push(
      now,
      request.amount,
      session?.id ?? "",
      limitArg(session?.budget),
      hardArg(session?.budget),
      SESSION_TTL_MS,
    )
    for (const budget of budgets)
      args.push(limitArg(budget.check), hardArg(budget.check), spendPx(budget, now))
    return send("extend", () => redis.tollgateExtend(...args)).pipe(
      Effect.map((reply) => (int(reply) === 0 ? undefined : budgetAt(budgets, int(reply)))),
    )
  }

  const tenantState: StoreService["tenantState"] = (tenant, now, budgets = []) => {
    const k = keys(tenant)
    const minute = Math.floor(now / MINUTE_MS)
    return Effect.tryPromise({
      try: async () => {
        const reply = await redis.tollgateTenantState(
          6 + budgets.length,
          k.requests(minute),
          k.requests(minute - 1),
          k.tokens(minute),
          k.tokens(minute - 1),
          k.month(monthOf(now)),
          k.sessionIndex,
          ...budgets.map(k.spend),
          now,
          SESSION_TTL_MS,
        )
        const ids = reply.slice(7 + 2 * budgets.length).map(String)
        const pipeline = redis.pipeline()
        for (const id of ids) pipeline.hmget(k.session(id), "spend", "reserved", "last")
        const rows = ids.length === 0 ? [] : ((await pipeline.exec()) ?? [])
        return { reply, ids, rows }
      },
      catch: fail("tenantState"),
    }).pipe(
      Effect.flatMap(({ reply, ids, rows }) => {
        const sessions: Array<SessionState> = []
        for (let i = 0; i < ids.length; i++) {
          const [error, values] = rows[i] ?? [null, null]
          if (error !== null) return Effect.fail(fail("tenantState")(error))
          const [spend, reserved, last] = Array.isArray(values) ? values : []
          if (last === null || last === undefined) continue
          const lastMs = int(last)
          if (!isSessionLive(lastMs, now)) continue
          sessions.push({ id: ids[i]!, spend: int(spend), reserved: int(reserved), lastMs })
        }
        return Effect.succeed({
          month: monthOf(now),
          monthSpend: int(reply[4]),
          monthReserved: int(reply[5]),
          budgets: budgets.map((_, i) => ({ spend: int(reply[7 + 2 * i]), reserved: int(reply[8 + 2 * i]) })),
          sessions: sortSessions(sessions),
          requests: { current: int(reply[0]), previous: int(reply[1]) },
          tokens: { current: int(reply[2]), previous: int(reply[3]) },
        })
      }),
    )
  }

  const rememberResponse: StoreService["rememberResponse"] = (id, owner, _now) =>
    Effect.asVoid(
      send("rememberResponse", () =>
        redis.set(
          responseKey(id),
          JSON.stringify([owner.tenant, owner.provider]),
          "PX",
          RESPONSE_OWNER_TTL_MS,
        ),
      ),
    )

  const responseOwner: StoreService["responseOwner"] = (id, _now) =>
    Effect.map(
      send("responseOwner", () => redis.get(responseKey(id))),
      (value) => {
        if (value === null) return undefined
        try {
          const [tenant, provider] = JSON.parse(value) as unknown as [unknown, unknown]
          return typeof tenant === "string" && typeof provider === "string" ? { tenant, provider } : undefined
        } catch {
          return undefined
        }
      },
    )

  // This copy answers a session's lookups for a moment from what it read or wrote (ADR 0074).
  const known = makeKnownTargets()
  const readTarget = (tenant: string, field: string, now: number): Promise<string | undefined> => {
    const k = keys(tenant)
    // With the turn's other calls, in one script call (ADR 0062).
    return enqueue(
      tenant,
      MANY_SESSION_TARGET,
      [k.targets, k.targetsUsed],
      [field, now, SESSION_TTL_MS],
    ).then((value) => (typeof value === "string" ? value : undefined))
  }
  /** Reads a known target again without holding up its lookup (what it answers serves the next ones). */
  const refresh = (
    targets: TenantTargets,
    was: KnownTarget,
    tenant: string,
    field: string,
    now: number,
    most: number,
  ): void => {
    was.refreshing = true
    const writes = targets.writes
    batch()
    readTarget(tenant, field, now).then(
      (target) => {
        if (targets.known.get(field) !== was) return
        if (target === undefined) known.forget(targets, field, was)
        else if (targets.writes === writes) known.keep(targets, field, target, now, most)
        else was.refreshing = false
      },
      () => known.forget(targets, field, was),
    )
  }

  const sessionTarget: StoreService["sessionTarget"] = (key, now, maxSessions) => {
    const targets = known.of(key.tenant)
    const field = `${key.route}\n${key.session}`
    const found = known.fresh(targets, field, now)
    if (found !== undefined) {
      if (!found.refreshing && now - found.checked >= TARGET_REFRESH_MS)
        refresh(targets, found, key.tenant, field, now, maxSessions)
      return Effect.succeed(found.target)
    }
    const writes = targets.writes
    return Effect.map(
      send("sessionTarget", () => readTarget(key.tenant, field, now)),
      (target) => {
        if (target !== undefined && targets.writes === writes)
          known.keep(targets, field, target, now, maxSessions)
        return target
      },
    )
  }

  const rememberSessionTarget: StoreService["rememberSessionTarget"] = (key, target, now, maxSessions) => {
    const k = keys(key.tenant)
    const targets = known.of(key.tenant)
    const field = `${key.route}\n${key.session}`
    // Known at once: this copy's next lookups of the session go to it; a failed write forgets it.
    targets.writes++
    const kept = known.keep(targets, field, target, now, maxSessions)
    return send("rememberSessionTarget", () =>
      redis.tollgateRememberSessionTarget(
        k.targets,
        k.targetsUsed,
        field,
        target,
        now,
        SESSION_TTL_MS,
        maxSessions,
      ),
    ).pipe(
      Effect.tapError(() => Effect.sync(() => known.forget(targets, field, kept))),
      Effect.asVoid,
    )
  }

  return Store.of({
    admit,
    settle,
    extend,
    tenantState,
    rememberResponse,
    responseOwner,
    sessionTarget,
    rememberSessionTarget,
  })
})

/**
 * The Redis store at `url` (`redis://[user:pass@]host:port/db`). Scoped: the
 * client connects while the layer builds (at most ~1 s) but the layer builds
 * even when Redis is down; it then reconnects every ≤ 1 s forever. A dead
 * Redis fails each operation fast (no offline queue, no retries, 500 ms
 * command timeout) with a `StoreError` whose message never holds the password.
 * Closing the layer quits the client.
 */
export const layerRedis = (url: string, options: RedisClientOptions = {}): Layer.Layer<Store> =>
  Layer.effect(Store, make(url, options))
