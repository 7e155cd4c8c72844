import { Duration, Effect, Option } from "effect"
import type { TenantConfig } from "../config/model.js"
import { RateLimited } from "../domain/errors.js"

/**
 * Waiting for a rate window (ADR 0057): a request of a tenant with
 * `limits.queue.max_wait` that the store refused for its request or token
 * limit waits, with its body, until the store's retry time and asks again,
 * instead of a 429 at once.
 *
 * The tenant's waiters form one queue per copy, first come first served:
 * only its head asks the store (one call per retry time, not one per waiter:
 * a burst of 1,000 does not become 1,000 store calls each time the window
 * moves); when the head is admitted the next asks at once, so the queue is
 * served as fast as the window allows. A request that the store's retry
 * time shows cannot be admitted before its deadline (arrival + `max_wait`)
 * gets its 429 at once; none waits past its deadline.
 */
export interface WindowQueue {
  /**
   * `admit`, waiting in the tenant's queue while it refuses for a rate
   * window, until `deadline` (epoch ms). Runs in the caller's
   * (uninterruptible) region: only the waits are interruptible, never a
   * store call, so an admission that happened is never lost.
   */
  readonly admit: <A, E>(
    tenant: TenantConfig,
    deadline: number,
    admit: Effect.Effect<A, E | RateLimited>,
  ) => Effect.Effect<A, E | RateLimited>
  /** Requests of `tenant` waiting for their window on this copy. */
  readonly queued: (tenant: string) => number
}

export interface WindowQueueOptions {
  readonly now: () => number
  readonly queueEntered: (tenant: string) => void
  readonly queueLeft: (tenant: string, waitedMs: number, timedOut: boolean) => void
}

interface Turn {
  /** A request holds the turn: it alone asks the store. */
  busy: boolean
  /** Waiting for the turn, first come first. */
  readonly waiters: Array<TurnWaiter>
  /** Requests in this queue: the holder while it waits, and the waiters. */
  queued: number
}

interface TurnWaiter {
  granted: boolean
  resume: () => void
}

export const makeWindowQueue = (options: WindowQueueOptions): WindowQueue => {
  const { now } = options
  const turns = new Map<string, Turn>()
  const turnOf = (tenant: string): Turn => {
    let turn = turns.get(tenant)
    if (turn === undefined) {
      turn = { busy: false, waiters: [], queued: 0 }
      turns.set(tenant, turn)
    }
    return turn
  }

  const release = (turn: Turn): void => {
    const next = turn.waiters.shift()
    if (next === undefined) {
      turn.busy = false
      return
    }
    next.granted = true
    next.resume()
  }

  /** Waits for the turn; interrupted (a timeout, the client gone), it passes a turn it was just given on. */
  const acquire = (turn: Turn): Effect.Effect<void> =>
    Effect.callback<void>((resume) => {
      if (!turn.busy) {
        turn.busy = true
        return resume(Effect.void)
      }
      const waiter: TurnWaiter = { granted: false, resume: () => resume(Effect.void) }
      turn.waiters.push(waiter)
      return Effect.sync(() => {
        if (waiter.granted) return release(turn)
        const at = turn.waiters.indexOf(waiter)
        if (at >= 0) turn.waiters.splice(at, 1)
      })
    })

  const timedOut = (maxWaitMs: number, last: RateLimited | undefined): RateLimited =>
    new RateLimited({
      message: `${last?.message ?? "rate limit exceeded for this tenant"}; not admitted within limits.queue.max_wait (${maxWaitMs / 1000} s)`,
      retryAfterSeconds: last?.retryAfterSeconds ?? 1,
      ...(last?.rateHeaders === undefined ? {} : { rateHeaders: last.rateHeaders }),
    })

  const admit = <A, E>(
    tenant: TenantConfig,
    deadline: number,
    attempt: Effect.Effect<A, E | RateLimited>,
  ): Effect.Effect<A, E | RateLimited> =>
    Effect.suspend(() => {
      const turn = turnOf(tenant.name)
      // Nobody waiting: ask at once, and queue only when refused for a window.
      if (!turn.busy && turn.queued === 0)
        return Effect.catchIf(attempt, isWindowRefusal, (refusal) =>
          wait(tenant, turn, deadline, attempt, refusal),
        )
      return wait(tenant, turn, deadline, attempt, undefined)
    })

  const wait = <A, E>(
    tenant: TenantConfig,
    turn: Turn,
    deadline: number,
    attempt: Effect.Effect<A, E | RateLimited>,
    first: RateLimited | undefined,
  ): Effect.Effect<A, E | RateLimited> => {
    const queue = tenant.limits.queue!
    const since = now()
    // The store says when it admits one more: past the deadline, waiting is no use.
    if (first !== undefined && since + first.retryAfterMs! > deadline) return Effect.fail(first)
    if (turn.queued >= queue.maxLength)
      return Effect.fail(
        new RateLimited({
          message: `${first?.message ?? "rate limit exceeded for this tenant"}; ${queue.maxLength} requests already wait (limits.queue.max_length)`,
          retryAfterSeconds: first?.retryAfterSeconds ?? 1,
          ...(first?.rateHeaders === undefined ? {} : { rateHeaders: first.rateHeaders }),
        }),
      )
    turn.queued++
    options.queueEntered(tenant.name)
    let last = first
    let left = false
    const leave = (timeout: boolean) =>
      Effect.sync(() => {
        if (left) return
        left = true
        turn.queued--
        options.queueLeft(tenant.name, now() - since, timeout)
      })
    /** Asks the store while holding the turn, sleeping until each retry time; fails once that passes the deadline. */
    const loop = (sleepMs: number): Effect.Effect<A, E | RateLimited> => {
      if (sleepMs > 0 && now() + sleepMs > deadline)
        return Effect.andThen(leave(true), Effect.fail(timedOut(queue.maxWaitMs, last)))
      return Effect.andThen(
        sleepMs > 0 ? Effect.interruptible(Effect.sleep(Duration.millis(sleepMs))) : Effect.void,
        Effect.catchIf(attempt, isWindowRefusal, (refusal) => {
          last = refusal
          return loop(Math.max(1, refusal.retryAfterMs!))
        }),
      )
    }
    const held = Effect.flatMap(
      Effect.interruptible(
        Effect.timeoutOption(acquire(turn), Duration.millis(Math.max(0, deadline - now()))),
      ),
      (got) =>
        Option.isNone(got)
          ? Effect.andThen(leave(true), Effect.fail(timedOut(queue.maxWaitMs, last)))
          : loop(last === undefined ? 0 : Math.max(0, since + last.retryAfterMs! - now())).pipe(
              Effect.ensuring(Effect.sync(() => release(turn))),
            ),
    )
    return Effect.ensuring(held, leave(false))
  }

  return { admit, queued: (tenant) => turns.get(tenant)?.queued ?? 0 }
}

/** A refusal for a request or token window, which the store's retry time says when to ask again. */
const isWindowRefusal = (error: unknown): error is RateLimited =>
  error instanceof RateLimited && error.retryAfterMs !== undefined
