/**
 * The running configuration, which a reload replaces (ADR 0052). `Config`
 * stays the configuration the process started with — what only a restart
 * changes (the listen address, the store, the files) is read from it —
 * while everything a request uses is read from `LiveConfig.get()` when the
 * request starts, so a request in flight finishes under the configuration
 * it started with.
 */
import { Context, Data, Effect, Layer, Semaphore } from "effect"
import { Config } from "./Config.js"
import type { TollgateConfig } from "./model.js"

/** A reload refused by a participant (or by the config itself): nothing changed. */
export class ReloadRefused extends Data.TaggedError("ReloadRefused")<{
  readonly problems: ReadonlyArray<string>
}> {}

/** What a participant prepared for the next config: applied together with the others, or undone. */
export interface Prepared {
  /** Applies the change; runs only when every participant prepared, and cannot fail. */
  readonly commit: () => void
  /** Undoes what `prepare` made (another participant refused). */
  readonly abort: Effect.Effect<void>
}

/**
 * A part of the gateway that holds something built from the config (the
 * provider clients, the request pipeline): it prepares for the next config
 * without disturbing the running one, then commits.
 */
export type Participant = (
  next: TollgateConfig,
  previous: TollgateConfig,
) => Effect.Effect<Prepared, ReloadRefused>

export class LiveConfig extends Context.Service<
  LiveConfig,
  {
    /** The configuration new requests use. */
    readonly get: () => TollgateConfig
    /** Adds a participant to every later swap, in the order registered. */
    readonly register: (participant: Participant) => void
    /**
     * Prepares every participant for `next` and, when all succeed, commits
     * them and makes `next` current; when one refuses, undoes the others and
     * fails: nothing changed. One swap at a time.
     */
    readonly swap: (next: TollgateConfig) => Effect.Effect<void, ReloadRefused>
  }
>()("tollgate/config/LiveConfig") {
  /** Starts from the `Config` the process was started with. */
  static readonly layer: Layer.Layer<LiveConfig, never, Config> = Layer.effect(
    LiveConfig,
    Effect.gen(function* () {
      let current = yield* Config
      const participants: Array<Participant> = []
      const lock = yield* Semaphore.make(1)
      const swap = (next: TollgateConfig): Effect.Effect<void, ReloadRefused> =>
        lock.withPermits(1)(
          Effect.gen(function* () {
            const previous = current
            const prepared: Array<Prepared> = []
            for (const participant of participants) {
              // Any end but success (a refusal, a defect) undoes what the others prepared.
              const exit = yield* Effect.exit(participant(next, previous))
              if (exit._tag === "Failure") {
                yield* Effect.forEach(prepared.reverse(), (p) => p.abort, { discard: true })
                return yield* Effect.failCause(exit.cause)
              }
              prepared.push(exit.value)
            }
            for (const p of prepared) p.commit()
            current = next
          }).pipe(Effect.uninterruptible),
        )
      return {
        get: () => current,
        register: (participant) => void participants.push(participant),
        swap,
      }
    }),
  )
}
