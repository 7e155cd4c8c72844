/**
 * The retry budget of a fleet (`breaker.shared: true`, ADR 0055): extra
 * attempts in the recent minute may not exceed 10 + `retry.budget_ratio` ×
 * the fleet's requests in the recent minute, counted over every copy. Each
 * copy adds its counts to the fleet's in Redis every {@link SYNC_MS}, and at
 * once after each extra attempt it spends (one script, which answers with the
 * fleet's sums), and decides meanwhile from the last sums plus its own counts
 * since: no Redis call on the request path. Another copy's extra attempts are
 * seen one round trip after it spent them, so the fleet may pass the formula
 * by what the copies spend at the same moment. While Redis fails, the copy
 * uses its own budget (`local`, fed all along) until {@link LOCAL_MS} after
 * the last failure.
 */
import type { ScriptCommand } from "../limits/redisClient.js"
import { RETRY_BUDGET_FLOOR, type LocalRetryBudget, type RetryBudget } from "./RetryBudget.js"
import { LOCAL_MS } from "./sharedBreakers.js"
import { WINDOW_LUA } from "./lua/window.js"
import { BUCKETS, BUCKET_MS } from "./Window.js"

/** The fleet's budget: one hash (one slot). */
export const RETRY_KEY = "tollgate:{retry}"
/** The hash lives this long after its last write (its buckets are decided by `now`). */
const KEY_PX = 10 * 60 * 1000

/**
 * Sync: KEYS 1 the budget's hash. ARGV 1 now, 2 bucket ms, 3 buckets, 4 how
 * many triples follow, then (bucket, requests, extra attempts) triples.
 * Adds them, forgets buckets that left the window, and answers with the
 * fleet's sums over the window: { requests, extra }.
 */
export const RETRY_SYNC_LUA = `${WINDOW_LUA}
local now = tonumber(ARGV[1])
local bucketMs = tonumber(ARGV[2])
local buckets = tonumber(ARGV[3])
local current = math.floor(now / bucketMs)
windowAdd(KEYS[1], "r", "x", current, buckets, 5, tonumber(ARGV[4]))
local requests, extra = windowSum(KEYS[1], "r", "x", current, buckets)
redis.call("PEXPIRE", KEYS[1], ${KEY_PX})
return { requests, extra }
`

export const RETRY_SCRIPTS: Readonly<Record<string, ScriptCommand>> = {
  tollgateRetrySync: { lua: RETRY_SYNC_LUA, numberOfKeys: 1 },
}

export interface RetryRedis {
  tollgateRetrySync(...keysAndArgs: Array<string | number>): Promise<[number, number]>
}

export interface SharedRetryBudgetOptions {
  readonly local: LocalRetryBudget
  readonly redis: RetryRedis
  readonly ratio: () => number
  readonly now: () => number
  /** Called on the first failure after Redis answered, and on the first answer after failures. */
  readonly onStore: (event: { readonly ok: boolean; readonly error?: string }) => void
}

/** The fleet's budget over `local` (see the module comment). `sync` is the periodic call (and tests'). */
export const makeSharedRetryBudget = (options: SharedRetryBudgetOptions) => {
  const { local, redis, ratio, now } = options
  /** The fleet's sums at the last sync (this copy's counts up to then included). */
  let fleetRequests = 0
  let fleetExtra = 0
  /** This copy's counts since the last sync, by bucket: [requests, extra]. */
  let pending = new Map<number, [number, number]>()
  let pendingRequests = 0
  let pendingExtra = 0
  let localUntil = 0
  let storeErrors = 0
  let failing = false

  const add = (requests: number, extra: number): void => {
    const bucket = Math.floor(now() / BUCKET_MS)
    let counts = pending.get(bucket)
    if (counts === undefined) pending.set(bucket, (counts = [0, 0]))
    counts[0] += requests
    counts[1] += extra
    pendingRequests += requests
    pendingExtra += extra
  }

  /** This copy's counts on their way to Redis (not in the fleet's sums yet, no longer pending). */
  let sendingRequests = 0
  let sendingExtra = 0

  /** Whole extra attempts the fleet's formula permits now (the 1e-6 absorbs float error, as locally). */
  const allowed = (): number =>
    RETRY_BUDGET_FLOOR +
    Math.floor(ratio() * (fleetRequests + sendingRequests + pendingRequests) + 1e-6) -
    (fleetExtra + sendingExtra + pendingExtra)

  let syncing: Promise<void> | undefined
  let again = false
  /** Syncs now; one asked for while a sync is on its way runs right after it. */
  const sync = (): Promise<void> => {
    if (syncing !== undefined) {
      again = true
      return syncing
    }
    return syncOnce().then(() => {
      if (!again) return
      again = false
      return sync()
    })
  }

  /** Least time between two quick syncs, ms: a burst of extra attempts costs Redis one sync per this. */
  const SOON_MS = 20
  let soon = false
  /** An extra attempt is told to the fleet at once (within {@link SOON_MS}), not at the next tick. */
  const syncSoon = (): void => {
    if (soon) return
    soon = true
    setTimeout(() => {
      soon = false
      void sync()
    }, SOON_MS).unref()
  }

  const syncOnce = (): Promise<void> => {
    const sent = pending
    sendingRequests = pendingRequests
    sendingExtra = pendingExtra
    pending = new Map()
    pendingRequests = 0
    pendingExtra = 0
    const args: Array<string | number> = [now(), BUCKET_MS, BUCKETS, sent.size]
    for (const [bucket, [r, x]] of sent) args.push(bucket, r, x)
    syncing = redis
      .tollgateRetrySync(RETRY_KEY, ...args)
      .then(
        ([requests, extra]) => {
          // The fleet's sums now hold what was sent.
          fleetRequests = Number(requests)
          fleetExtra = Number(extra)
          sendingRequests = 0
          sendingExtra = 0
          if (failing) {
            failing = false
            options.onStore({ ok: true })
          }
        },
        (error: unknown) => {
          sendingRequests = 0
          sendingExtra = 0
          storeErrors++
          localUntil = now() + LOCAL_MS
          // Not delivered: counted again at the next sync (the fleet's sums stay as they were), while in the window.
          const oldest = Math.floor(now() / BUCKET_MS) - BUCKETS
          for (const [bucket, [r, x]] of sent) {
            if (bucket <= oldest) continue
            const counts = pending.get(bucket)
            if (counts === undefined) pending.set(bucket, [r, x])
            else {
              counts[0] += r
              counts[1] += x
            }
          }
          pendingRequests = 0
          pendingExtra = 0
          for (const [r, x] of pending.values()) {
            pendingRequests += r
            pendingExtra += x
          }
          if (failing) return
          failing = true
          options.onStore({ ok: false, error: error instanceof Error ? error.message : String(error) })
        },
      )
      .finally(() => {
        syncing = undefined
      })
    return syncing
  }

  const service: RetryBudget["Service"] = {
    recordRequest: () => {
      local.recordRequest()
      add(1, 0)
    },
    tryConsume: () => {
      if (now() < localUntil) {
        if (!local.tryConsume()) return false
        add(0, 1)
        return true
      }
      if (allowed() < 1) return false
      local.consume()
      add(0, 1)
      syncSoon()
      return true
    },
    remaining: () => (now() < localUntil ? local.remaining() : Math.max(0, Math.floor(allowed()))),
    storeErrors: () => storeErrors,
  }
  return { service, sync }
}
