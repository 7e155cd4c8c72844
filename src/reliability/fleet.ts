/**
 * What the fleet's breakers and retry budget (`breaker.shared`, ADR 0055)
 * share: their own Redis client (the limit store's options, cluster-aware),
 * a first sync before the gateway serves, a sync every {@link SYNC_MS}, and
 * one log line when Redis stops answering and one when it answers again.
 */
import { Effect, type Scope } from "effect"
import type { Redis } from "ioredis"
import type { TollgateConfig } from "../config/model.js"
import { acquireRedis, type ScriptCommand } from "../limits/redisClient.js"
import { SYNC_MS } from "./sharedBreakers.js"

/** Reported by a fleet part on the first failed call after an answer, and on the first answer after failures. */
export type StoreEvent = { readonly ok: boolean; readonly error?: string }

/**
 * With `breaker.shared` and the Redis store: `make` over a client with
 * `scripts`, synced now and every {@link SYNC_MS}; its store events are logged
 * with `messages`. Without: undefined (the caller keeps its local part).
 */
export const fleetPart = <C, S>(
  config: TollgateConfig,
  scripts: Readonly<Record<string, ScriptCommand>>,
  messages: { readonly down: string; readonly up: string },
  make: (
    redis: Redis & C,
    onStore: (event: StoreEvent) => void,
  ) => {
    readonly service: S
    readonly sync: () => Promise<void>
  },
): Effect.Effect<S | undefined, never, Scope.Scope> =>
  Effect.gen(function* () {
    const store = config.store
    if (!config.breaker.shared || store.kind !== "redis") return undefined
    const redis = yield* acquireRedis<Redis & C>(store.url, scripts, { cluster: store.cluster })
    const run = Effect.runForkWith(yield* Effect.context<never>())
    const part = make(redis, ({ ok, error }) =>
      run(
        ok
          ? Effect.logInfo(messages.up)
          : Effect.logWarning(messages.down).pipe(Effect.annotateLogs({ error: error ?? "" })),
      ),
    )
    yield* Effect.promise(part.sync)
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(SYNC_MS), Effect.promise(part.sync))))
    return part.service
  })
