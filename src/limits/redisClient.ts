import { Effect, type Scope } from "effect"
import { Cluster, Redis, type RedisOptions } from "ioredis"

/**
 * A Lua script the client defines as a command: its source and how many of
 * its arguments are keys (undefined: it varies, and each call passes the
 * count as its first argument).
 */
export interface ScriptCommand {
  readonly lua: string
  readonly numberOfKeys?: number
}

export interface RedisClientOptions {
  /**
   * `store.cluster`: `url` names one node of a Redis Cluster. The client
   * learns the slots from it and sends each command to the node of its keys'
   * slot (every Tollgate script touches keys of one slot: ADR 0056). Writes
   * of one event-loop turn are batched by ioredis' auto-pipelining per node.
   */
  readonly cluster?: boolean
  /** `store.lease_requests` (ADR 0063): requests one admission may lease far from every limit; 1: none. Default 32. */
  readonly leaseRequests?: number
}

/** Per command and per connection attempt: fail fast. */
const TIMEOUTS = { maxRetriesPerRequest: 0, commandTimeout: 500, connectTimeout: 1_000 }
/** Reconnect in the background, every ≤ 1 s. */
const reconnect = (attempt: number): number => Math.min(attempt * 100, 1_000)

/** A cluster client seeded with the node of `url` (its credentials and TLS apply to every node). */
const clusterClient = (url: string): Cluster => {
  const parsed = new URL(url)
  const node: Pick<RedisOptions, "username" | "password" | "tls"> = {}
  if (parsed.username !== "") node.username = decodeURIComponent(parsed.username)
  if (parsed.password !== "") node.password = decodeURIComponent(parsed.password)
  if (parsed.protocol === "rediss:") node.tls = {}
  return new Cluster([{ host: parsed.hostname, port: Number(parsed.port === "" ? 6379 : parsed.port) }], {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    clusterRetryStrategy: reconnect,
    slotsRefreshTimeout: 1_000,
    redisOptions: { ...TIMEOUTS, ...node },
  })
}

/**
 * One ioredis client for a Tollgate store, in the current scope: commands
 * fail fast instead of queueing while Redis is down (no offline queue, no
 * retries per request, 500 ms per command), it reconnects forever in the
 * background, and `scripts` are defined as commands. The first connection is
 * tried once (bounded by the 1 s connect timeout); a Redis that is down now
 * is retried. Failures reach callers through their commands; the client's
 * own error events are only reconnect noise. With `cluster`, a `Cluster`
 * client (the same commands; no `stream` of its own).
 */
export const acquireRedis = <C extends Redis>(
  url: string,
  scripts: Readonly<Record<string, ScriptCommand>>,
  options: RedisClientOptions = {},
): Effect.Effect<C, never, Scope.Scope> =>
  Effect.gen(function* () {
    const redis = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client: Redis | Cluster =
          options.cluster === true
            ? clusterClient(url)
            : new Redis(url, {
                ...TIMEOUTS,
                lazyConnect: true,
                enableOfflineQueue: false,
                retryStrategy: reconnect,
              })
        client.on("error", () => {})
        for (const [name, script] of Object.entries(scripts)) client.defineCommand(name, script)
        return client as unknown as C
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
