/**
 * The memory limit store: one process, plain maps in a closure. Its rules
 * are the Redis Lua scripts' rules, line for line (`lua/*.ts`), so both
 * stores pass one conformance suite. Every map stays bounded: minute
 * counters older than the previous minute, sessions idle for 24 h and the
 * spend of periods that ended SPEND_KEPT_MS ago are dropped as time passes, and a
 * tenant keeps at most `maxSessions` live sessions (the least recently used
 * are evicted when a new one starts).
 */
import { Clock, Effect, Layer } from "effect"
import { readUsageFile, type UsageFileError } from "../meter/UsageLog.js"
import type { BudgetName } from "../domain/errors.js"
import { dayPeriod, monthOf, monthPeriod, weekPeriod } from "./periods.js"
import {
  budgetNameOf,
  MINUTE_MS,
  RESPONSE_OWNER_TTL_MS,
  SESSION_TTL_MS,
  sessionTargetId,
  SPEND_KEPT_MS,
  Store,
  type AdmitRequest,
  type Admitted,
  type ExtendRequest,
  type PeriodBudget,
  type Refused,
  type RefusalReason,
  type ResponseOwner,
  type SettleRequest,
  type SessionState,
  type SessionTargetKey,
  type SpendState,
  type StoreService,
  type TenantState,
} from "./Store.js"
import { fitsWindow, isSessionLive, sortSessions, windowAt } from "./lua/rules.js"

/** Most response owners one memory store remembers; the oldest are forgotten first. */
export const MAX_RESPONSE_OWNERS = 100_000

interface Counts {
  requests: number
  tokens: number
}

interface Spend {
  spend: number
  reserved: number
}

interface PeriodSpend extends Spend {
  /** Epoch ms the period ends; the entry is dropped SPEND_KEPT_MS later. */
  readonly until: number
}

interface Session extends Spend {
  last: number
}

/**
 * The key of a (scope, period) in `TenantData.spends`: the period id for the
 * tenant's, `key:ID PERIOD` for a key's (a period id has no space, so the
 * two never meet).
 */
const spendKey = (budget: Pick<PeriodBudget, "key" | "period">): string =>
  budget.key === undefined ? budget.period : `key:${budget.key} ${budget.period}`

interface TenantData {
  /** Minute index → counters; only the current and previous minute are kept. */
  readonly minutes: Map<number, Counts>
  /** (scope, period) → spend (see `spendKey`); periods that ended SPEND_KEPT_MS ago are dropped. */
  readonly spends: Map<string, PeriodSpend>
  /** Session id → spend; insertion order follows the last request, so expired ones are at the front. */
  readonly sessions: Map<string, Session>
  /** The id of the last entry of `sessions` when `touch` put it there (undefined: not known). */
  newestSession: string | undefined
  /**
   * `route\nsession` → the target that served the session's last request on a sticky route (ADR 0073);
   * insertion order follows the last use, so the least recently used are at the front.
   */
  readonly targets: Map<string, { readonly target: string; last: number }>
}

const ZERO: Counts = { requests: 0, tokens: 0 }
const NO_SPEND: SpendState = { spend: 0, reserved: 0 }

const emptyTenantData = (): TenantData => ({
  minutes: new Map(),
  spends: new Map(),
  sessions: new Map(),
  newestSession: undefined,
  targets: new Map(),
})

const targetKey = (key: SessionTargetKey): string => `${key.route}\n${key.session}`

const make = () => {
  const tenants = new Map<string, TenantData>()

  const tenant = (name: string): TenantData => {
    let data = tenants.get(name)
    if (data === undefined) {
      data = emptyTenantData()
      tenants.set(name, data)
    }
    return data
  }

  const prune = (data: TenantData, now: number): void => {
    const minute = Math.floor(now / MINUTE_MS)
    for (const m of data.minutes.keys()) if (m < minute - 1) data.minutes.delete(m)
    for (const [id, session] of data.sessions) {
      if (isSessionLive(session.last, now)) break
      data.sessions.delete(id)
      if (id === data.newestSession) data.newestSession = undefined
    }
  }

  /** The spend of `budget`'s scope and period, made (after dropping periods long over) when new. */
  const spendOf = (data: TenantData, budget: PeriodBudget, now: number): PeriodSpend => {
    const key = spendKey(budget)
    let spend = data.spends.get(key)
    if (spend === undefined) {
      for (const [k, old] of data.spends) if (old.until + SPEND_KEPT_MS <= now) data.spends.delete(k)
      spend = { spend: 0, reserved: 0, until: budget.until }
      data.spends.set(key, spend)
    }
    return spend
  }

  const liveSession = (data: TenantData, id: string, now: number): Session | undefined => {
    const session = data.sessions.get(id)
    return session !== undefined && isSessionLive(session.last, now) ? session : undefined
  }

  /**
   * Moves the session to the end of the map (the newest), with `last` = the
   * later of `last` and `now`. A session that is already the newest entry
   * stays where it is: an agent's turns touch the same session over and
   * over, and each move is a delete and an insert in a long-lived table.
   */
  const touch = (data: TenantData, id: string, session: Session, now: number): void => {
    session.last = Math.max(session.last, now)
    if (data.newestSession === id && data.sessions.get(id) === session) return
    data.sessions.delete(id)
    data.sessions.set(id, session)
    data.newestSession = id
  }

  /**
   * Drops the `count` least recently used sessions (all live: `prune` ran
   * first) and returns how many it dropped. The oldest are at the front of
   * the map; among the front entries with the same `last`, the smallest id
   * goes first, as in the Redis store's session index (ZPOPMIN).
   */
  const evict = (data: TenantData, count: number): number => {
    let evicted = 0
    while (evicted < count) {
      let victim: string | undefined
      let oldest = 0
      for (const [id, session] of data.sessions) {
        if (victim === undefined) {
          victim = id
          oldest = session.last
        } else if (session.last !== oldest) break
        else if (id < victim) victim = id
      }
      if (victim === undefined) break
      data.sessions.delete(victim)
      if (victim === data.newestSession) data.newestSession = undefined
      evicted++
    }
    return evicted
  }

  const admit = (request: AdmitRequest): Admitted | Refused => {
    const { now, tokenCost, reserve, requestsPerMinute: rpm, tokensPerMinute: tpm } = request
    const data = tenant(request.tenant)
    prune(data, now)
    const minute = Math.floor(now / MINUTE_MS)
    const msIntoMinute = now - minute * MINUTE_MS
    const current = data.minutes.get(minute) ?? { ...ZERO }
    const previous = data.minutes.get(minute - 1) ?? ZERO
    const tokenLimit = tokenCost > 0 ? tpm : undefined
    let spendRead: number | undefined
    const refuse = (reason: RefusalReason, budget?: BudgetName): Refused => ({
      _tag: "Refused",
      reason,
      budget,
      requests: windowAt(rpm, current.requests, previous.requests, now),
      tokens: windowAt(tokenLimit, current.tokens, previous.tokens, now),
      monthSpend: spendRead,
    })

    if (rpm !== undefined && !fitsWindow(rpm, current.requests, previous.requests, msIntoMinute, 1)) {
      return refuse("requests")
    }
    if (tokenLimit !== undefined) {
      if (tokenCost > tokenLimit) return refuse("tokens_too_large")
      if (!fitsWindow(tokenLimit, current.tokens, previous.tokens, msIntoMinute, tokenCost)) {
        return refuse("tokens")
      }
    }
    const budgets = request.budgets
    spendRead = 0
    for (const budget of budgets) {
      const spend = data.spends.get(spendKey(budget)) ?? NO_SPEND
      if (budget.key === undefined && budget.name === "month") spendRead = spend.spend
    }
    for (const budget of budgets) {
      const check = budget.check
      if (check?.hard !== true) continue
      const spend = data.spends.get(spendKey(budget)) ?? NO_SPEND
      if (spend.spend + spend.reserved + reserve > check.limit) return refuse("budget", budgetNameOf(budget))
    }
    const sessionRequest = request.session
    const live = sessionRequest === undefined ? undefined : liveSession(data, sessionRequest.id, now)
    const session = sessionRequest === undefined ? undefined : (live ?? { spend: 0, reserved: 0, last: now })
    const sessionBudget = sessionRequest?.budget
    if (
      session !== undefined &&
      sessionBudget?.hard === true &&
      session.spend + session.reserved + reserve > sessionBudget.limit
    ) {
      return refuse("budget", "session")
    }

    current.requests += 1
    if (tokenCost > 0) current.tokens += tokenCost
    data.minutes.set(minute, current)
    const softExceeded: Array<BudgetName> = []
    for (const budget of budgets) {
      const entry = spendOf(data, budget, now)
      entry.reserved += reserve
      const check = budget.check
      if (check?.hard === false && entry.spend + entry.reserved > check.limit) {
        softExceeded.push(budgetNameOf(budget))
      }
    }
    let sessionsEvicted = 0
    if (session !== undefined && sessionRequest !== undefined) {
      if (live === undefined) {
        // A new session: make room under the cap (an expired entry of the same id is replaced, not counted).
        data.sessions.delete(sessionRequest.id)
        sessionsEvicted = evict(data, data.sessions.size - request.maxSessions + 1)
      }
      session.reserved += reserve
      touch(data, sessionRequest.id, session, now)
      if (sessionBudget?.hard === false && session.spend + session.reserved > sessionBudget.limit) {
        softExceeded.push("session")
      }
    }
    return {
      _tag: "Admitted",
      minute,
      month: monthOf(now),
      requests: windowAt(rpm, current.requests, previous.requests, now),
      tokens: windowAt(tokenLimit, current.tokens, previous.tokens, now),
      softExceeded,
      sessionsEvicted,
      monthSpend: spendRead,
    }
  }

  const settle = (request: SettleRequest): void => {
    const { now, reserved, cost } = request
    const data = tenant(request.tenant)
    prune(data, now)
    for (const budget of request.budgets) {
      const entry = spendOf(data, budget, now)
      entry.reserved = Math.max(0, entry.reserved - reserved)
      entry.spend += cost
    }
    if (request.sessionId !== undefined) {
      const session = liveSession(data, request.sessionId, now)
      if (session !== undefined) {
        session.reserved = Math.max(0, session.reserved - reserved)
        session.spend += cost
        touch(data, request.sessionId, session, now)
      }
    }
    const counts = data.minutes.get(request.minute)
    if (counts !== undefined && request.tokenDelta !== 0) {
      counts.tokens = Math.max(0, counts.tokens + request.tokenDelta)
    }
  }

  const extend = (request: ExtendRequest): BudgetName | undefined => {
    const { now, amount } = request
    const data = tenant(request.tenant)
    for (const budget of request.budgets) {
      const check = budget.check
      if (check?.hard !== true) continue
      const spend = data.spends.get(spendKey(budget)) ?? NO_SPEND
      if (spend.spend + spend.reserved + amount > check.limit) return budgetNameOf(budget)
    }
    const session = request.session === undefined ? undefined : liveSession(data, request.session.id, now)
    const sessionBudget = request.session?.budget
    if (
      session !== undefined &&
      sessionBudget?.hard === true &&
      session.spend + session.reserved + amount > sessionBudget.limit
    ) {
      return "session"
    }
    for (const budget of request.budgets) spendOf(data, budget, now).reserved += amount
    if (session !== undefined) session.reserved += amount
    return undefined
  }

  const tenantState = (
    name: string,
    now: number,
    budgets: ReadonlyArray<Pick<PeriodBudget, "key" | "period">> = [],
  ): TenantState => {
    const data = tenants.get(name) ?? emptyTenantData()
    prune(data, now)
    const minute = Math.floor(now / MINUTE_MS)
    const current = data.minutes.get(minute) ?? ZERO
    const previous = data.minutes.get(minute - 1) ?? ZERO
    const monthKey = monthOf(now)
    const monthSpend = data.spends.get(monthKey) ?? NO_SPEND
    const sessions: Array<SessionState> = []
    for (const [id, s] of data.sessions) {
      if (isSessionLive(s.last, now))
        sessions.push({ id, spend: s.spend, reserved: s.reserved, lastMs: s.last })
    }
    return {
      month: monthKey,
      monthSpend: monthSpend.spend,
      monthReserved: monthSpend.reserved,
      budgets: budgets.map((budget) => {
        const spend = data.spends.get(spendKey(budget)) ?? NO_SPEND
        return { spend: spend.spend, reserved: spend.reserved }
      }),
      sessions: sortSessions(sessions),
      requests: { current: current.requests, previous: previous.requests },
      tokens: { current: current.tokens, previous: previous.tokens },
    }
  }

  /** Response owners, oldest first (a `Map` keeps insertion order), at most MAX_RESPONSE_OWNERS. */
  const owners = new Map<string, { readonly owner: ResponseOwner; readonly until: number }>()
  const rememberResponse = (id: string, owner: ResponseOwner, now: number): void => {
    owners.delete(id)
    owners.set(id, { owner, until: now + RESPONSE_OWNER_TTL_MS })
    // Forget the oldest (and, on the way, the expired) beyond the bound.
    for (const [oldest, entry] of owners) {
      if (owners.size <= MAX_RESPONSE_OWNERS && entry.until > now) break
      owners.delete(oldest)
    }
  }
  const responseOwner = (id: string, now: number): ResponseOwner | undefined => {
    const entry = owners.get(id)
    if (entry === undefined) return undefined
    if (entry.until > now) return entry.owner
    owners.delete(id)
    return undefined
  }

  const sessionTarget = (key: SessionTargetKey, now: number): string | undefined => {
    const data = tenants.get(key.tenant)
    if (data === undefined) return undefined
    const k = targetKey(key)
    const entry = data.targets.get(k)
    if (entry === undefined) return undefined
    data.targets.delete(k)
    if (!isSessionLive(entry.last, now)) return undefined
    // Moved to the end: the map's order is the order of last use.
    entry.last = Math.max(entry.last, now)
    data.targets.set(k, entry)
    return entry.target
  }
  const rememberSessionTarget = (
    key: SessionTargetKey,
    target: string,
    now: number,
    maxSessions: number,
  ): void => {
    const targets = tenant(key.tenant).targets
    const k = targetKey(key)
    targets.delete(k)
    targets.set(k, { target, last: now })
    // Forget the least recently used beyond the bound, and on the way those idle for their lifetime.
    for (const [oldest, entry] of targets) {
      if (targets.size <= maxSessions && isSessionLive(entry.last, now)) break
      targets.delete(oldest)
    }
  }

  const service: StoreService = {
    admit: (request) => Effect.sync(() => admit(request)),
    // No leases here: a session is always written at admission, so settling never evicts.
    settle: (request) => Effect.sync(() => (settle(request), 0)),
    extend: (request) => Effect.sync(() => extend(request)),
    rememberResponse: (id, owner, now) => Effect.sync(() => rememberResponse(id, owner, now)),
    responseOwner: (id, now) => Effect.sync(() => responseOwner(id, now)),
    sessionTarget: (key, now) => Effect.sync(() => sessionTarget(key, now)),
    rememberSessionTarget: (key, target, now, maxSessions) =>
      Effect.sync(() => rememberSessionTarget(key, target, now, maxSessions)),
    tenantState: (name, now, budgets) => Effect.sync(() => tenantState(name, now, budgets)),
  }
  return { service, tenant, spendOf, rememberSessionTarget }
}

/** An empty memory store (tests, and the local fallback limits of ADR 0006). */
export const makeMemoryStore = (): StoreService => make().service

/**
 * Adds the usage file's spend to a fresh store (ADR 0019): each record's
 * `cost_micro_usd` to its tenant's and its key's (`key_id`) spend of the
 * current UTC day, ISO week and month when `ts` is in them, and to its
 * session when `ts` is less than 24 h before `now` (the session's last
 * request = its latest `ts`).
 */
const restore = Effect.fnUntraced(function* (file: string, maxSessions: number) {
  const now = yield* Clock.currentTimeMillis
  const periods = [
    { name: "day" as const, ...dayPeriod(now) },
    { name: "week" as const, ...weekPeriod(now) },
    { name: "month" as const, ...monthPeriod(now) },
  ]
  const since = Math.min(...periods.map((p) => p.from), now - SESSION_TTL_MS)
  const { records } = yield* readUsageFile(file, { since: new Date(since).toISOString() })
  const store = make()
  const withSessions = new Set<TenantData>()
  for (const record of records) {
    const ts = Date.parse(record.ts)
    if (Number.isNaN(ts)) continue
    const data = store.tenant(record.tenant)
    for (const p of periods) {
      if (ts < p.from || ts >= p.until) continue
      const tenantBudget = { name: p.name, key: undefined, period: p.id, until: p.until, check: undefined }
      store.spendOf(data, tenantBudget, now).spend += record.cost_micro_usd
      store.spendOf(data, { ...tenantBudget, key: record.key_id }, now).spend += record.cost_micro_usd
    }
    if (record.session !== null && now - ts < SESSION_TTL_MS) {
      const session = data.sessions.get(record.session) ?? { spend: 0, reserved: 0, last: ts }
      session.spend += record.cost_micro_usd
      session.last = Math.max(session.last, ts)
      data.sessions.set(record.session, session)
      withSessions.add(data)
      // The target that served the session last, for sticky routes (ADR 0073); bounded on the next remember.
      if (record.provider !== null && record.model !== null && record.status >= 200 && record.status < 300) {
        store.rememberSessionTarget(
          { tenant: record.tenant, route: record.route, session: record.session },
          sessionTargetId(record.provider, record.model),
          ts,
          maxSessions,
        )
      }
    }
  }
  // The store expects sessions in the order of their last request (it prunes from the front).
  for (const data of withSessions) {
    const oldestFirst = [...data.sessions].sort(([, a], [, b]) => a.last - b.last)
    data.sessions.clear()
    for (const [id, session] of oldestFirst) data.sessions.set(id, session)
    data.newestSession = undefined
  }
  yield* Effect.logInfo("limit store restored from the usage file").pipe(
    Effect.annotateLogs({ file, records: records.length }),
  )
  return Store.of(store.service)
})

/**
 * The memory store. With `usageFile` (absolute path), the layer reads the
 * file before it is available, restoring the current day's, week's and
 * month's spend of every tenant and key, and 24-hour session spend; a missing file restores nothing, a torn line is skipped with a
 * warning, and an unreadable file fails the layer. Rate counters start at 0.
 */
export const layerMemory = (options?: {
  readonly usageFile?: string
  /** `sessions.max_per_tenant`: the most session targets per tenant the restore keeps (default 10,000). */
  readonly maxSessions?: number
}): Layer.Layer<Store, UsageFileError> => {
  const file = options?.usageFile
  return file === undefined
    ? Layer.sync(Store, () => Store.of(makeMemoryStore()))
    : Layer.effect(Store, restore(file, options?.maxSessions ?? 10_000))
}
