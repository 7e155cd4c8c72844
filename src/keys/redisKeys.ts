/**
 * The key store on Redis, shared by every copy (ADR 0050). Layout:
 *
 *     tollgate:{TENANT}:keys          hash  id → {"sha256","created_at","expires_at"} (JSON, epoch ms)
 *     tollgate:{TENANT}:keys:revoked  hash  id → revoked_at (epoch ms)
 *     tollgate:{TENANT}:keys:used     hash  id → last_used_at (epoch ms; config keys too)
 *     tollgate:{keys:index}:tenants   set   the tenants that have runtime keys or a noted last use
 *     tollgate:{keys:index}:version   int   incremented after every create and revoke
 *
 * A tenant's keys carry the tenant as their hash tag, as the limit store's do
 * (`src/limits/redisStore.ts`); the two index keys share their own tag, which
 * no tenant's can equal (a tenant's is percent-encoded, so it holds no `:`).
 * Every command or script touches one slot, so this also runs on Redis
 * Cluster.
 *
 * Each copy holds every runtime key in memory and reads the version every
 * {@link POLL_MS}; when it changed, it reads all the keys again (and also
 * every {@link FULL_READ_MS}, which mends a change whose version increment
 * was lost). Last-use times are noted in memory and written every
 * {@link REDIS_FLUSH_MS}, one script per tenant keeping the later time.
 * When Redis is down, the copy keeps the keys it read last (one warning),
 * and create and revoke fail with `KeyStoreUnavailable`.
 */
import { Clock, Duration, Effect, Semaphore } from "effect"
import { Redis } from "ioredis"
import {
  decodeKeyBudgets,
  encodeKeyBudgets,
  KeyExists,
  KeyNotFound,
  KeyStoreUnavailable,
  POLL_MS,
  REDIS_FLUSH_MS,
  type KeyStoreService,
  type NewKey,
  type RuntimeKey,
} from "./model.js"
import { acquireRedis, passwordsOf, type RedisClientOptions } from "../limits/redisClient.js"
import { KeyTable, LastUse, type UseTimes } from "./table.js"

/** How often a copy reads every key even when the version did not change, ms. */
export const FULL_READ_MS = 15_000

/** `tollgate:{TENANT}:` with the tenant percent-encoded, as `src/limits/redisStore.ts` names a tenant's keys. */
const prefix = (tenant: string): string => `tollgate:{${encodeURIComponent(tenant)}}:`

/** The Redis keys of `tenant`'s runtime keys. */
export const tenantKeys = (tenant: string) => {
  const p = prefix(tenant)
  return { keys: `${p}keys`, revoked: `${p}keys:revoked`, used: `${p}keys:used` }
}

export const TENANTS_KEY = "tollgate:{keys:index}:tenants"
export const VERSION_KEY = "tollgate:{keys:index}:version"

/**
 * Revoke: KEYS 1 keys hash, 2 revoked hash; ARGV 1 id, 2 now (epoch ms).
 * Returns false for an unknown id, else [the key's JSON, its revoked_at]
 * (the first revocation's time: revoking again changes nothing).
 */
const REVOKE_LUA = `
local key = redis.call("HGET", KEYS[1], ARGV[1])
if not key then return false end
redis.call("HSETNX", KEYS[2], ARGV[1], ARGV[2])
return { key, redis.call("HGET", KEYS[2], ARGV[1]) }
`

/** Last use: KEYS 1 used hash; ARGV id, time pairs. Keeps the later time of each id. Returns 1. */
const USED_LUA = `
for i = 1, #ARGV, 2 do
  local old = tonumber(redis.call("HGET", KEYS[1], ARGV[i]) or "0")
  if tonumber(ARGV[i + 1]) > old then redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
`

interface RedisWithScripts extends Redis {
  tollgateKeyRevoke(keys: string, revoked: string, id: string, now: number): Promise<[string, string] | null>
  tollgateKeyUsed(used: string, ...idsAndTimes: Array<string | number>): Promise<number>
}

const encodeKey = (key: RuntimeKey): string =>
  JSON.stringify({
    sha256: key.sha256,
    created_at: key.createdAt,
    expires_at: key.expiresAt,
    budgets: encodeKeyBudgets(key.budgets),
  })

/** A key from its hash field, or undefined when the value is not one. */
export const decodeKey = (
  tenant: string,
  id: string,
  json: string,
  revokedAt: string | undefined,
): RuntimeKey | undefined => {
  try {
    const value = JSON.parse(json) as {
      sha256?: unknown
      created_at?: unknown
      expires_at?: unknown
      budgets?: unknown
    }
    const { sha256, created_at: createdAt, expires_at: expiresAt } = value
    if (typeof sha256 !== "string" || typeof createdAt !== "number") return undefined
    if (expiresAt !== null && typeof expiresAt !== "number") return undefined
    const budgets = decodeKeyBudgets(value.budgets)
    if (budgets === null) return undefined
    const revoked = revokedAt === undefined ? null : Number(revokedAt)
    return {
      tenant,
      id,
      sha256,
      createdAt,
      expiresAt,
      revokedAt: Number.isFinite(revoked) ? revoked : null,
      budgets,
    }
  } catch {
    return undefined
  }
}

/**
 * The Redis key store at `url`. Scoped: its own client (the limit store's
 * options: no offline queue, 500 ms command timeout, reconnects every ≤ 1 s),
 * a poller and a last-use writer; closing it writes the last-use times not
 * yet written and quits the client. It builds also when Redis is down.
 */
export const makeRedisKeys = Effect.fnUntraced(function* (url: string, options: RedisClientOptions = {}) {
  const clock = yield* Clock.Clock
  const secrets = passwordsOf(url)
  const unavailable = (operation: string) => (cause: unknown) =>
    new KeyStoreUnavailable({
      message: `redis ${operation} failed: ${secrets.reduce(
        (text, secret) => text.split(secret).join("***"),
        cause instanceof Error ? cause.message : String(cause),
      )}`,
    })
  const call = <A>(operation: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: unavailable(operation) })

  // Failures reach callers as KeyStoreUnavailable.
  const redis = yield* acquireRedis<RedisWithScripts>(
    url,
    {
      tollgateKeyRevoke: { lua: REVOKE_LUA, numberOfKeys: 2 },
      tollgateKeyUsed: { lua: USED_LUA, numberOfKeys: 1 },
    },
    options,
  )

  const table = new KeyTable()
  const lastUse = new LastUse()
  /** Held while the table is read from Redis or changed: a read that began before a change cannot undo it. */
  const lock = yield* Semaphore.make(1)
  /** The version the table was read at (null: Redis has none yet; undefined: never read). */
  let seen: string | null | undefined = undefined
  let readAt = Number.NEGATIVE_INFINITY
  let down = false

  /** Reads every runtime key and every last-use time (the version first, so a change after it is read again). */
  const readAll = call("read keys", async () => {
    const version = await redis.get(VERSION_KEY)
    const tenants = await redis.smembers(TENANTS_KEY)
    // One pipeline per tenant: a tenant's keys share a hash slot (a cluster answers a pipeline of one slot).
    const replies = await Promise.all(
      tenants.map((tenant) => {
        const k = tenantKeys(tenant)
        return redis.pipeline().hgetall(k.keys).hgetall(k.revoked).hgetall(k.used).exec()
      }),
    )
    const keys: Array<RuntimeKey> = []
    const used: UseTimes = new Map()
    tenants.forEach((tenant, i) => {
      const part = (j: number): Record<string, string> => {
        const [error, value] = replies[i]?.[j] ?? [new Error("no reply"), undefined]
        if (error) throw error
        return value as Record<string, string>
      }
      const [stored, revoked, times] = [part(0), part(1), part(2)]
      for (const [id, json] of Object.entries(stored)) {
        const key = decodeKey(tenant, id, json, revoked[id])
        if (key !== undefined) keys.push(key)
      }
      const ids = new Map<string, number>()
      for (const [id, at] of Object.entries(times)) if (Number.isFinite(Number(at))) ids.set(id, Number(at))
      if (ids.size > 0) used.set(tenant, ids)
    })
    return { version, keys, used }
  })

  const refresh = lock.withPermit(
    Effect.map(readAll, ({ version, keys, used }) => {
      table.replaceAll(keys)
      lastUse.setStored(used)
      seen = version
      readAt = clock.currentTimeMillisUnsafe()
    }),
  )

  const reachable = Effect.suspend(() => {
    if (!down) return Effect.void
    down = false
    return Effect.logInfo("runtime keys: redis answers again")
  })
  const unreachable = (error: KeyStoreUnavailable) =>
    Effect.suspend(() => {
      if (down) return Effect.void
      down = true
      return Effect.logWarning("runtime keys: redis is unavailable; serving the keys read last").pipe(
        Effect.annotateLogs({ error: error.message, keys: table.size }),
      )
    })

  /** One poll: the version, and every key when it changed or the last full read is old. */
  const poll = call("read the keys version", () => redis.get(VERSION_KEY)).pipe(
    Effect.flatMap((version) =>
      version !== seen || clock.currentTimeMillisUnsafe() - readAt >= FULL_READ_MS ? refresh : Effect.void,
    ),
    Effect.andThen(reachable),
    Effect.catch(unreachable),
  )

  /** Writes the last-use times noted since the last write: one script per tenant, sent together. */
  const flush = Effect.suspend(() => {
    if (!lastUse.hasPending) return Effect.void
    const pending = lastUse.takePending()
    return call("write last use", async () => {
      const tenants = [...pending.keys()]
      // The index names every tenant whose keys have a last use (config keys too): the other copies read
      // last use by it. Each tenant's script is its own call (its own slot; sent together all the same).
      const writes: Array<Promise<unknown>> = [redis.sadd(TENANTS_KEY, ...tenants)]
      for (const [tenant, ids] of pending) {
        const args: Array<string | number> = []
        for (const [id, at] of ids) args.push(id, at)
        writes.push(redis.tollgateKeyUsed(tenantKeys(tenant).used, ...args))
      }
      await Promise.all(writes)
    }).pipe(
      Effect.catch((error) => {
        lastUse.putBack(pending)
        return unreachable(error)
      }),
    )
  })

  yield* poll
  yield* Effect.addFinalizer(() => flush)
  yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(Duration.millis(POLL_MS)), poll)))
  yield* Effect.forkScoped(
    Effect.forever(Effect.andThen(Effect.sleep(Duration.millis(REDIS_FLUSH_MS)), flush)),
  )

  const bump = call("increment the keys version", () => redis.incr(VERSION_KEY))

  const create = (key: NewKey) =>
    Effect.gen(function* () {
      const created: RuntimeKey = { ...key, createdAt: clock.currentTimeMillisUnsafe(), revokedAt: null }
      const k = tenantKeys(key.tenant)
      yield* call("index the tenant", () => redis.sadd(TENANTS_KEY, key.tenant))
      const added = yield* call("create the key", () => redis.hsetnx(k.keys, key.id, encodeKey(created)))
      if (added === 0) return yield* new KeyExists({ tenant: key.tenant, id: key.id })
      yield* lock.withPermit(Effect.sync(() => table.put(created)))
      yield* bump
      return created
    })

  const revoke = (tenant: string, id: string) =>
    Effect.gen(function* () {
      const k = tenantKeys(tenant)
      const reply = yield* call("revoke the key", () =>
        redis.tollgateKeyRevoke(k.keys, k.revoked, id, clock.currentTimeMillisUnsafe()),
      )
      const key = reply === null ? undefined : decodeKey(tenant, id, reply[0], reply[1])
      if (key === undefined) return yield* new KeyNotFound({ tenant, id })
      yield* lock.withPermit(Effect.sync(() => table.put(key)))
      // Also when it was revoked already: a revoke whose increment was lost is mended by revoking again.
      yield* bump
      return key
    })

  const service: KeyStoreService = {
    find: (sha256) => table.find(sha256, clock.currentTimeMillisUnsafe()),
    used: (tenant, id) => lastUse.note(tenant, id, clock.currentTimeMillisUnsafe()),
    create: Effect.fn("KeyStore.create")(create),
    revoke: Effect.fn("KeyStore.revoke")(revoke),
    list: (tenant) =>
      refresh.pipe(
        Effect.catch(unreachable),
        Effect.map(() => table.list(tenant)),
      ),
    lastUsed: (tenant, id) => lastUse.get(tenant, id),
  }
  return service
})
