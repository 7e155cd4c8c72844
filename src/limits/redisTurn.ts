/**
 * The calls of one event-loop turn as one Redis script call (ADR 0062), and
 * the connection's writes of the turn held back to go out together (ADR 0039):
 * admissions, settlements and lease releases are queued by `enqueue` and
 * `enqueueSettle` and run, at the end of the turn, as one `lua/many.ts` call
 * per hash-slot group (one group on a single Redis, one per tenant on a
 * cluster); settlements of the same keys in a turn merge into one.
 */
import type { Redis } from "ioredis"
import { MANY_ADMIT, MANY_RELEASE, MANY_SESSION_TARGET, MANY_SETTLE } from "./lua/many.js"

export type Arg = string | number

export interface RedisWithScripts extends Redis {
  tollgateAdmit(...keysAndArgs: Array<Arg>): Promise<Array<number>>
  tollgateSettle(...keysAndArgs: Array<Arg>): Promise<number>
  tollgateExtend(...keysAndArgs: Array<Arg>): Promise<number>
  tollgateTenantState(...keysAndArgs: Array<Arg>): Promise<Array<number | string>>
  tollgateMany(...keysAndArgs: Array<Arg>): Promise<Array<unknown>>
  tollgateSessionTarget(...keysAndArgs: Array<Arg>): Promise<string | null>
  tollgateRememberSessionTarget(...keysAndArgs: Array<Arg>): Promise<number>
}

/** An admission or a settlement waiting for the end of the event-loop turn. */
interface Call {
  readonly op: typeof MANY_ADMIT | typeof MANY_SETTLE | typeof MANY_RELEASE | typeof MANY_SESSION_TARGET
  readonly keys: ReadonlyArray<Arg>
  readonly args: Array<Arg>
  /** Replaced by a merged settlement, to answer both. */
  resolve: (reply: unknown) => void
  reject: (cause: unknown) => void
}

/** The calls of one turn for one script call, and its settlements by their keys (to merge). */
interface Group {
  readonly calls: Array<Call>
  readonly settles: Map<string, Call>
}

/** Positions in a settle call's arguments (`redisStore.ts`'s `settle`; `lua/settle.ts`). */
const SETTLE_NOW = 0
const SETTLE_RESERVED = 1
const SETTLE_COST = 2
const SETTLE_TOKENS = 3
const SETTLE_SESSION_UNRESERVE = 7
const SETTLE_SESSION_MOST = 8
const SETTLE_FIRST_PX = 9

/**
 * Adds settlement `args` to `sum`, settlement arguments of the same keys: one settle of the summed
 * reservations, costs and token deltas at the latest `now`, as the settle script would leave them one after
 * the other (see `enqueueSettle`).
 */
export const mergeSettle = (sum: Array<Arg>, args: ReadonlyArray<Arg>): void => {
  sum[SETTLE_NOW] = Math.max(Number(sum[SETTLE_NOW]), Number(args[SETTLE_NOW]))
  for (const at of [SETTLE_RESERVED, SETTLE_COST, SETTLE_TOKENS, SETTLE_SESSION_UNRESERVE])
    sum[at] = Number(sum[at]) + Number(args[at])
  // A session left to settle by either is started when gone (the same tenant: the same most).
  sum[SETTLE_SESSION_MOST] = Math.max(Number(sum[SETTLE_SESSION_MOST]), Number(args[SETTLE_SESSION_MOST]))
  // The later settlement's expiries (a day's or week's hash lives until its period ends + a margin).
  for (let at = SETTLE_FIRST_PX; at < args.length; at++) sum[at] = args[at]!
}

/** What the store's calls of a turn go through. */
export interface TurnCalls {
  /** Holds the connection's writes until the end of this turn (called before each call). */
  readonly batch: () => void
  /** Queues one call for this turn's script call. */
  readonly enqueue: (
    tenant: string,
    op: Call["op"],
    keys: ReadonlyArray<Arg>,
    args: Array<Arg>,
  ) => Promise<unknown>
  /** Queues a settlement, merged with the turn's other settlements of the same keys. */
  readonly enqueueSettle: (tenant: string, keys: ReadonlyArray<Arg>, args: Array<Arg>) => Promise<unknown>
}

/** The turn's calls on `redis` (`cluster`: one group per tenant, and no corking: the client batches itself). */
export const makeTurnCalls = (redis: RedisWithScripts, cluster: boolean): TurnCalls => {
  /** The connection whose writes this event-loop turn are held back, to go out together (ADR 0039). */
  let corked: { uncork: () => void } | undefined
  const uncork = () => {
    const stream = corked
    corked = undefined
    stream?.uncork()
  }
  /**
   * Holds the connection's writes until the check phase of this event-loop
   * turn, so the calls of every request that admits or settles in this turn
   * reach Redis in one write (and Redis answers them with one); called before
   * each call. Each call is still its own command with its own reply and
   * timeout.
   */
  const batch = (): void => {
    // A cluster client batches by itself (auto-pipelining, per node) and has no one connection to cork.
    if (corked !== undefined || cluster || redis.status !== "ready") return
    const stream = redis.stream
    stream.cork()
    corked = stream
    setImmediate(uncork)
  }

  /**
   * The admissions and settlements of this turn, by hash slot group: one
   * group on a single Redis, one per tenant on a cluster (a script's keys
   * must share a slot; a tenant's do).
   */
  let queued = new Map<string, Group>()
  const run = (calls: ReadonlyArray<Call>): void => {
    if (calls.length === 1 && calls[0]!.op !== MANY_RELEASE) {
      const call = calls[0]!
      const reply: Promise<unknown> =
        call.op === MANY_ADMIT
          ? redis.tollgateAdmit(call.keys.length, ...call.keys, ...call.args)
          : call.op === MANY_SESSION_TARGET
            ? redis.tollgateSessionTarget(...call.keys, ...call.args)
            : redis.tollgateSettle(call.keys.length, ...call.keys, ...call.args)
      reply.then(call.resolve, call.reject)
      return
    }
    const keys: Array<Arg> = []
    const args: Array<Arg> = [calls.length]
    for (const call of calls) {
      for (const key of call.keys) keys.push(key)
      args.push(call.op, call.keys.length, call.args.length)
      for (const arg of call.args) args.push(arg)
    }
    redis.tollgateMany(keys.length, ...keys, ...args).then(
      (replies) => calls.forEach((call, i) => call.resolve(replies[i])),
      (cause: unknown) => calls.forEach((call) => call.reject(cause)),
    )
  }
  const flush = (): void => {
    const groups = queued
    queued = new Map()
    for (const { calls } of groups.values()) {
      try {
        run(calls)
      } catch (cause) {
        // The client threw instead of rejecting: every call of the group fails with it.
        for (const call of calls) call.reject(cause)
      }
    }
  }
  /** This turn's group of `tenant`'s calls (the first call of the turn schedules the flush, after the turn's I/O). */
  const groupOf = (tenant: string): Group => {
    if (queued.size === 0) setImmediate(flush)
    const name = cluster ? tenant : ""
    let group = queued.get(name)
    if (group === undefined) queued.set(name, (group = { calls: [], settles: new Map() }))
    return group
  }
  /** Queues one call for this turn's script call. */
  const enqueue = (
    tenant: string,
    op: Call["op"],
    keys: ReadonlyArray<Arg>,
    args: Array<Arg>,
  ): Promise<unknown> =>
    new Promise((resolve, reject) => {
      groupOf(tenant).calls.push({ op, keys, args, resolve, reject })
    })
  /**
   * Queues a settlement, merged with the turn's other settlements of the
   * same keys (same tenant, session, minute and budget periods): one settle
   * of the summed reservations, costs and token deltas at the latest `now`,
   * as the settle script would leave them one after the other (a
   * reservation or a counter that would go below 0 stops at 0 either way,
   * but for a token counter taken below 0 by one delta and raised by a later
   * one; a session's last request is the latest either way).
   */
  const enqueueSettle = (tenant: string, keys: ReadonlyArray<Arg>, args: Array<Arg>): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const group = groupOf(tenant)
      const signature = keys.join("\n")
      const first = group.settles.get(signature)
      if (first === undefined) {
        const call: Call = { op: MANY_SETTLE, keys, args, resolve, reject }
        group.settles.set(signature, call)
        group.calls.push(call)
        return
      }
      mergeSettle(first.args, args)
      const { resolve: resolveFirst, reject: rejectFirst } = first
      // The sessions it evicted are counted once, by the first.
      first.resolve = (reply) => {
        resolveFirst(reply)
        resolve(0)
      }
      first.reject = (cause) => {
        rejectFirst(cause)
        reject(cause)
      }
    })

  return { batch, enqueue, enqueueSettle }
}
