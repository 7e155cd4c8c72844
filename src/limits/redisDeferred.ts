/**
 * Leased requests' settlements, sent a moment later (ADR 0066): far from
 * every limit a request's settle does not wait for Redis. Each settlement
 * waits, merged with the others of the same keys as a turn's are
 * (`mergeSettle`, ADR 0062), until a timer sends them all through the
 * per-turn script call `SETTLE_DEFER_MS` after the first; the store's
 * finalizer sends what waits when it closes.
 */
import { Effect } from "effect"
import { type Arg, mergeSettle } from "./redisTurn.js"
import type { SettleRequest, StoreError } from "./Store.js"

/** How long a leased request's settlement waits to be sent, ms. */
export const SETTLE_DEFER_MS = 50

/** Settlements of the same keys waiting to be sent: `requests` counts them, `evicted` is told what they evict. */
interface Waiting {
  readonly tenant: string
  readonly keys: ReadonlyArray<Arg>
  readonly args: Array<Arg>
  requests: number
  readonly evicted: SettleRequest["evicted"]
}

export interface DeferredSettles {
  /** Keeps a settlement (its script keys and arguments) to send within `SETTLE_DEFER_MS`. */
  readonly defer: (request: SettleRequest, keys: ReadonlyArray<Arg>, args: Array<Arg>) => void
  /** Sends what waits now (the store's finalizer); a failure is logged, as a timed send's is. */
  readonly flush: Effect.Effect<void>
}

/** `send` queues one settle script call and answers the sessions it evicted. */
export const makeDeferredSettles = (
  send: (tenant: string, keys: ReadonlyArray<Arg>, args: Array<Arg>) => Effect.Effect<number, StoreError>,
): Effect.Effect<DeferredSettles> =>
  Effect.gen(function* () {
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    let waiting = new Map<string, Waiting>()
    /** Real time, not the Clock: a test that moves a TestClock by a day does not run a flush per 50 ms of it. */
    let timer: ReturnType<typeof setTimeout> | undefined

    /** Sends every waiting settlement, in one script call; a failure is logged (their reservations stay). */
    const sendWaiting: Effect.Effect<void> = Effect.suspend(() => {
      if (waiting.size === 0) return Effect.void
      const due = waiting
      waiting = new Map()
      return Effect.forEach(
        due.values(),
        (w) =>
          send(w.tenant, w.keys, w.args).pipe(
            Effect.map((evicted) => {
              if (evicted > 0) w.evicted?.(w.tenant, evicted)
            }),
            Effect.catch((error) =>
              Effect.logWarning("settle failed; the reservation stays until the end of its period").pipe(
                Effect.annotateLogs({ tenant: w.tenant, requests: w.requests, error: error.message }),
              ),
            ),
          ),
        { concurrency: "unbounded", discard: true },
      )
    })

    const defer: DeferredSettles["defer"] = (request, keys, args) => {
      if (timer === undefined) {
        timer = setTimeout(() => {
          timer = undefined
          runFork(sendWaiting)
        }, SETTLE_DEFER_MS)
      }
      const signature = keys.join("\n")
      const merged = waiting.get(signature)
      if (merged === undefined) {
        waiting.set(signature, { tenant: request.tenant, keys, args, requests: 1, evicted: request.evicted })
        return
      }
      mergeSettle(merged.args, args)
      merged.requests++
    }

    const flush = Effect.suspend(() => {
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
      return sendWaiting
    })

    return { defer, flush }
  })
