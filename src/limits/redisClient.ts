import { Effect, type Scope } from "effect"
import { Redis } from "ioredis"

/** A Lua script the client defines as a command: its source and how many of its arguments are keys. */
export interface ScriptCommand {
  readonly lua: string
  readonly numberOfKeys: number
}

/**
 * One ioredis client for a Tollgate store, in the current scope: commands
 * fail fast instead of queueing while Redis is down (no offline queue, no
 * retries per request, 500 ms per command), it reconnects forever in the
 * background, and `scripts` are defined as commands. The first connection is
 * tried once (bounded by the 1 s connect timeout); a Redis that is down now
 * is retried. Failures reach callers through their commands; the client's
 * own error events are only reconnect noise.
 */
export const acquireRedis = <C extends Redis>(
  url: string,
  scripts: Readonly<Record<string, ScriptCommand>>,
): Effect.Effect<C, never, Scope.Scope> =>
  Effect.gen(function* () {
    const redis = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = new Redis(url, {
          lazyConnect: true,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          commandTimeout: 500,
          connectTimeout: 1_000,
          retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
        })
        client.on("error", () => {})
        for (const [name, script] of Object.entries(scripts)) client.defineCommand(name, script)
        return client as C
      }),
      (client) =>
        Effect.promise(() =>
          client.status === "ready" ? client.quit().catch(() => "") : Promise.resolve(""),
        ).pipe(Effect.ensuring(Effect.sync(() => client.disconnect()))),
    )
    yield* Effect.promise(() => redis.connect().catch(() => undefined))
    return redis
  })

/** The URL's password, encoded and decoded (empty when none), to keep out of error messages. */
export const passwordsOf = (url: string): ReadonlyArray<string> => {
  try {
    const encoded = new URL(url).password
    return encoded === "" ? [] : [...new Set([encoded, decodeURIComponent(encoded)])]
  } catch {
    return []
  }
}
