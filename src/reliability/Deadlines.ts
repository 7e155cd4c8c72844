import { Clock, Context, Duration, Effect, Layer } from "effect"
import { IndexedList, type Listed } from "../ops/IndexedList.js"

/** Which per-attempt timeout ran out. `client_write` is the relay's idle write deadline for a slow client. */
export type TimeoutKind = "first_token" | "idle" | "total" | "client_write"

/**
 * The timing state of one attempt. The relay updates the fields directly
 * (plain writes per chunk, no Effect); the sweeper reads them.
 */
export interface Deadline extends Listed {
  /** Epoch ms by which the first response body byte must arrive; `Infinity` once it has. */
  firstByteBy: number
  /** Epoch ms by which the whole attempt must end. */
  totalBy: number
  /** Longest gap between two upstream chunks, ms. */
  idleMs: number
  /** Epoch ms of the last upstream chunk (or of the first byte). */
  lastActivity: number
  /** Epoch ms since which the relay waits for the client's `drain`; 0 when it does not. */
  waitingForClientSince: number
  /** A deadline that passed while nobody was relaying (the budget cutoff's pause); the next relay ends with it. */
  expired?: TimeoutKind
  /** While relaying: the relay, which the sweeper tells instead of `expire` and asks for its buffered bytes. */
  holder?: DeadlineHolder | undefined
  /** Called once, by the sweeper, with the first deadline that passed, unless a holder is set. */
  expire: (kind: TimeoutKind) => void
}

/** What holds a deadline while relaying (one object per stream: methods, not closures). */
export interface DeadlineHolder {
  /** Called once, by the sweeper, with the first deadline that passed. */
  expire(kind: TimeoutKind): void
  /** The bytes Tollgate holds for this response (upstream read buffer + client write buffer). */
  buffered(): number
}

/** How often the sweeper looks at open attempts, ms. Timeouts fire up to this late. */
export const SWEEP_INTERVAL_MS = 25

/**
 * Per-attempt timeouts without a fiber or timer per attempt
 * (ARCHITECTURE.md "The hot path"): attempts register a `Deadline`, and one
 * layer-owned fiber sweeps them on the `Clock` service, so `TestClock` drives them.
 * The idle deadline does not run while the relay waits for a slow client;
 * the client's own write deadline (`idleMs`) and `totalBy` do.
 */
export class Deadlines extends Context.Service<
  Deadlines,
  {
    /** Current epoch ms from the layer's clock (cheap, synchronous). */
    readonly now: () => number
    readonly register: (deadline: Deadline) => void
    readonly unregister: (deadline: Deadline) => void
    /** Bytes held in memory by all open relays now (for the slow-client bound; read at metrics scrape). */
    readonly bufferedBytes: () => number
  }
>()("tollgate/Deadlines") {}

const overdue = (d: Deadline, now: number): TimeoutKind | undefined => {
  if (now >= d.totalBy) return "total"
  if (now >= d.firstByteBy) return "first_token"
  if (d.waitingForClientSince > 0)
    return now - d.waitingForClientSince >= d.idleMs ? "client_write" : undefined
  if (d.firstByteBy === Infinity && now - d.lastActivity >= d.idleMs) return "idle"
  return undefined
}

export const layer = Layer.effect(
  Deadlines,
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const open = new IndexedList<Deadline>()
    const sweep = Effect.sync(() => {
      if (open.size === 0) return
      const now = clock.currentTimeMillisUnsafe()
      for (const d of open.snapshot()) {
        // An earlier deadline's expiry in this sweep may have settled this one.
        if (d.listIndex === -1) continue
        const kind = overdue(d, now)
        if (kind !== undefined) {
          open.remove(d)
          if (d.holder !== undefined) d.holder.expire(kind)
          else d.expire(kind)
        }
      }
    })
    // The sweeper sleeps on the layer's clock too: under TestClock a test that moves the clock runs the
    // sweeps of that time, and a first-token, idle or total timeout fires with no real waiting.
    const tick = clock.sleep(Duration.millis(SWEEP_INTERVAL_MS))
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(tick, sweep)))
    return {
      now: () => clock.currentTimeMillisUnsafe(),
      register: (d: Deadline) => open.add(d),
      unregister: (d: Deadline) => open.remove(d),
      bufferedBytes: () => {
        let total = 0
        open.forEach((d) => {
          if (d.holder !== undefined) total += d.holder.buffered()
        })
        return total
      },
    }
  }),
)
