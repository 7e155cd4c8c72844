import type { TenantConfig } from "../config/model.js"
import type { Endpoint } from "../domain/endpoint.js"
import { BudgetExceeded, RateLimited } from "../domain/errors.js"
import { monthOf } from "./Store.js"

/**
 * Admission before the body (issue #16, ADR 0049): what this copy can decide
 * about an authenticated request from its headers alone, without a store
 * call, so that a tenant that would be refused anyway cannot make Tollgate
 * read and hold its body.
 *
 * - `concurrent_requests`: the tenant's requests in flight on this copy,
 *   counted from the headers to the record; `server.max_concurrent_requests`
 *   the same for all tenants together. With `limits.queue.max_wait` a request
 *   over either waits for a place (ADR 0057), before its body is read: one
 *   queue per tenant, served round-robin across tenants as places free, so a
 *   tenant with 1,000 waiting takes one turn like a tenant with one.
 * - The request limit: after the store refused a request for the request
 *   limit, the tenant is refused here until the store's retry-after (unless
 *   its queue would wait that long: then the request goes on and waits for
 *   its window after its body, see `waiting.ts`). The store's counts only
 *   grow within a minute (other copies add to them), so the store would
 *   refuse these too.
 * - A hard month budget: once the tenant's settled spend of the month has
 *   reached the limit (spend only grows within a month), every request that
 *   costs money is refused here until the month ends.
 *
 * Everything else (tokens, sessions, reservations) needs the body and the
 * store, and is decided by the admission as before.
 */
export interface Gate {
  /**
   * Refuses the request, counts it in flight (`undefined`; `leave` ends
   * that), or queues it (`Queued`: the caller sets `resume` at once).
   */
  readonly enter: (
    tenant: TenantConfig,
    endpoint: Endpoint,
  ) => RateLimited | BudgetExceeded | Queued | undefined
  readonly leave: (tenant: TenantConfig) => void
  /** The store refused a request of `tenant` for its request limit; it admits one more at `untilMs` (epoch ms). */
  readonly learnRequestLimit: (tenant: TenantConfig, refusal: RateLimited, untilMs: number) => void
  /** The tenant's settled spend of `month`, as the store last reported it (micro-USD). */
  readonly learnMonthSpend: (tenant: TenantConfig, month: string, spend: number) => void
  /** Requests in flight on this copy, for `tenant`. */
  readonly inFlight: (tenant: string) => number
  /** Requests of `tenant` waiting for a place on this copy. */
  readonly queued: (tenant: string) => number
}

/** What the gate needs besides the clock: timers, the gateway-wide cap and the queue's telemetry. */
export interface GateOptions {
  /** Runs `f` after `ms` on the gateway's clock; returns a canceler. */
  readonly after: (ms: number, f: () => void) => () => void
  /** `server.max_concurrent_requests` now (a reload may change it). */
  readonly maxConcurrent: () => number | undefined
  /** A request joined its tenant's queue. */
  readonly queueEntered: (tenant: string) => void
  /** A request left its tenant's queue after `waitedMs`: given a place, or refused (`timedOut`). */
  readonly queueLeft: (tenant: string, waitedMs: number, timedOut: boolean) => void
}

/** A request waiting for a place under its tenant's or the gateway's concurrency cap. */
export interface Queued {
  readonly _tag: "Queued"
  /**
   * Called once, never synchronously inside `enter`: `undefined` when the
   * request has its place (counted in flight; `leave` ends that), or the
   * refusal when its wait ran out.
   */
  resume: (refusal: RateLimited | undefined) => void
  /** The client went away: leaves the queue (nothing once resumed). */
  readonly cancel: () => void
}

interface TenantGate {
  readonly name: string
  inFlight: number
  /** Epoch ms until which the request limit is known to be spent. */
  requestsUntil: number
  requestsRefusal: RateLimited | undefined
  month: string
  monthSpend: number
  /** Waiting for a place, first come first; `head` is the first live one. */
  waiting: Array<Waiter>
  head: number
  /** In the dispatcher's ring (it has waiters). */
  inRing: boolean
}

class Waiter implements Queued {
  readonly _tag = "Queued"
  resume: (refusal: RateLimited | undefined) => void = () => {}
  done = false
  stopTimer: () => void = () => {}
  constructor(
    readonly gate: TenantGate,
    readonly tenant: TenantConfig,
    readonly since: number,
    readonly cancel: () => void,
  ) {}
}

const capOf = (tenant: TenantConfig): number => tenant.limits.concurrentRequests ?? Number.POSITIVE_INFINITY

const noTimers: GateOptions = {
  after: () => () => {},
  maxConcurrent: () => undefined,
  queueEntered: () => {},
  queueLeft: () => {},
}

export const makeGate = (now: () => number, options: GateOptions = noTimers): Gate => {
  const tenants = new Map<string, TenantGate>()
  /** Requests in flight on this copy, every tenant. */
  let total = 0
  /** Tenants with waiters, served in turn from `cursor`. */
  const ring: Array<TenantGate> = []
  let cursor = 0

  const of = (name: string): TenantGate => {
    let gate = tenants.get(name)
    if (gate === undefined) {
      gate = {
        name,
        inFlight: 0,
        requestsUntil: 0,
        requestsRefusal: undefined,
        month: "",
        monthSpend: 0,
        waiting: [],
        head: 0,
        inRing: false,
      }
      tenants.set(name, gate)
    }
    return gate
  }

  const waitingCount = (gate: TenantGate): number => gate.waiting.length - gate.head
  const gatewayRoom = (): boolean => {
    const cap = options.maxConcurrent()
    return cap === undefined || total < cap
  }

  const dropFromRing = (gate: TenantGate): void => {
    gate.inRing = false
    gate.waiting = []
    gate.head = 0
    const at = ring.indexOf(gate)
    if (at < 0) return
    ring.splice(at, 1)
    if (at < cursor) cursor--
  }

  const takeHead = (gate: TenantGate): Waiter => {
    const waiter = gate.waiting[gate.head]!
    gate.waiting[gate.head++] = undefined as unknown as Waiter
    if (gate.head === gate.waiting.length) dropFromRing(gate)
    else if (gate.head > 64 && gate.head * 2 > gate.waiting.length) {
      gate.waiting = gate.waiting.slice(gate.head)
      gate.head = 0
    }
    return waiter
  }

  /**
   * Gives free places to waiters, one per tenant per turn of the ring
   * (round-robin by request: a tenant's 1,000 waiters take one turn like
   * another's one). Resumes them after the ring is settled.
   */
  const dispatch = (): void => {
    if (ring.length === 0) return
    const granted: Array<Waiter> = []
    let passed = 0
    while (ring.length > 0 && passed < ring.length && gatewayRoom()) {
      if (cursor >= ring.length) cursor = 0
      const gate = ring[cursor]!
      const next = gate.waiting[gate.head]!
      if (gate.inFlight < capOf(next.tenant)) {
        const waiter = takeHead(gate)
        waiter.done = true
        gate.inFlight++
        total++
        granted.push(waiter)
        passed = 0
        // `takeHead` removed the tenant from the ring when it had no one left: the cursor already names the next.
        if (gate.inRing) cursor++
      } else {
        cursor++
        passed++
      }
    }
    const t = now()
    for (const waiter of granted) {
      waiter.stopTimer()
      options.queueLeft(waiter.gate.name, t - waiter.since, false)
      waiter.resume(undefined)
    }
  }

  const remove = (waiter: Waiter, timedOut: boolean): boolean => {
    if (waiter.done) return false
    waiter.done = true
    waiter.stopTimer()
    const gate = waiter.gate
    const at = gate.waiting.indexOf(waiter, gate.head)
    if (at >= 0) {
      gate.waiting.splice(at, 1)
      if (gate.head === gate.waiting.length) dropFromRing(gate)
    }
    options.queueLeft(gate.name, now() - waiter.since, timedOut)
    return true
  }

  const enqueue = (gate: TenantGate, tenant: TenantConfig, maxWaitMs: number): Queued => {
    const waiter: Waiter = new Waiter(gate, tenant, now(), () => {
      remove(waiter, false)
    })
    gate.waiting.push(waiter)
    if (!gate.inRing) {
      gate.inRing = true
      // Joins the ring just before the cursor: served after every tenant already waiting.
      ring.splice(cursor, 0, gate)
      cursor++
    }
    options.queueEntered(gate.name)
    waiter.stopTimer = options.after(maxWaitMs, () => {
      if (remove(waiter, true))
        waiter.resume(
          new RateLimited({
            message: `waited ${maxWaitMs / 1000} s (limits.queue.max_wait) for a place under ${capName(tenant)}`,
            retryAfterSeconds: 1,
          }),
        )
    })
    return waiter
  }

  const capName = (tenant: TenantConfig): string => {
    const gate = of(tenant.name)
    return gate.inFlight >= capOf(tenant)
      ? `concurrent_requests (${tenant.limits.concurrentRequests} in flight)`
      : `server.max_concurrent_requests (${options.maxConcurrent()} in flight)`
  }

  const enter = (
    tenant: TenantConfig,
    endpoint: Endpoint,
  ): RateLimited | BudgetExceeded | Queued | undefined => {
    const gate = of(tenant.name)
    const t = now()
    const queue = tenant.limits.queue
    if (gate.requestsRefusal !== undefined && t < gate.requestsUntil) {
      // A queue that waits this long lets the request go on: it waits for its window after its body.
      if (queue === undefined || gate.requestsUntil - t > queue.maxWaitMs) {
        const refusal = gate.requestsRefusal
        return new RateLimited({
          message: refusal.message,
          retryAfterSeconds: Math.max(1, Math.ceil((gate.requestsUntil - t) / 1000)),
          ...(refusal.rateHeaders === undefined ? {} : { rateHeaders: refusal.rateHeaders }),
        })
      }
    }
    const month = tenant.budgets.month
    // count_tokens costs nothing: no budget refuses it.
    if (
      month?.mode === "hard" &&
      endpoint !== "/v1/messages/count_tokens" &&
      gate.month === monthOf(t) &&
      gate.monthSpend >= month.limitMicroUsd
    ) {
      return new BudgetExceeded({
        message: "the tenant's month budget has no money left for this request",
        budget: "month",
      })
    }
    // First come first served: nobody passes the tenant's own waiters.
    if (waitingCount(gate) === 0 && gate.inFlight < capOf(tenant) && gatewayRoom()) {
      gate.inFlight++
      total++
      return undefined
    }
    if (queue === undefined || waitingCount(gate) >= queue.maxLength) {
      const full =
        queue === undefined ? "" : ` and ${queue.maxLength} requests already wait (limits.queue.max_length)`
      return new RateLimited({
        message: `${capName(tenant)} exceeded for this tenant${full}`,
        retryAfterSeconds: 1,
      })
    }
    return enqueue(gate, tenant, queue.maxWaitMs)
  }

  return {
    enter,
    leave: (tenant) => {
      const gate = tenants.get(tenant.name)
      if (gate !== undefined && gate.inFlight > 0) {
        gate.inFlight--
        total--
      }
      dispatch()
    },
    learnRequestLimit: (tenant, refusal, untilMs) => {
      const gate = of(tenant.name)
      gate.requestsUntil = untilMs
      gate.requestsRefusal = refusal
    },
    learnMonthSpend: (tenant, month, spend) => {
      const gate = of(tenant.name)
      // A later month replaces what is known; an answer about an earlier month changes nothing.
      if (month > gate.month) {
        gate.month = month
        gate.monthSpend = spend
      } else if (month === gate.month && spend > gate.monthSpend) gate.monthSpend = spend
    },
    inFlight: (tenant) => tenants.get(tenant)?.inFlight ?? 0,
    queued: (tenant) => {
      const gate = tenants.get(tenant)
      return gate === undefined ? 0 : waitingCount(gate)
    },
  }
}
