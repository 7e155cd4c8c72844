/**
 * The in-memory side of the key store, shared by its backends: the runtime
 * keys this copy knows (a map by SHA-256 for the request path, one by tenant
 * and id for the admin API), and the last-use times of every key, config
 * keys included, noted per request and written in batches (ADR 0050).
 */
import type { RuntimeKey } from "./model.js"

/** tenant → key id → epoch ms. */
export type UseTimes = Map<string, Map<string, number>>

const later = (times: UseTimes, tenant: string, id: string, at: number): void => {
  let ids = times.get(tenant)
  if (ids === undefined) times.set(tenant, (ids = new Map()))
  const known = ids.get(id)
  if (known === undefined || known < at) ids.set(id, at)
}

/** Adds every time of `from` to `into`, keeping the later of two. */
export const mergeUseTimes = (into: UseTimes, from: UseTimes): void => {
  for (const [tenant, ids] of from) for (const [id, at] of ids) later(into, tenant, id, at)
}

/** Whether `key` may authenticate at `now` (epoch ms): not revoked, and not expired. */
export const isLive = (key: RuntimeKey, now: number): boolean =>
  key.revokedAt === null && (key.expiresAt === null || key.expiresAt > now)

/** The runtime keys this copy knows, revoked ones included. */
export class KeyTable {
  /** Keys that are not revoked (expired ones included: expiry is decided at lookup). */
  private readonly byHash = new Map<string, RuntimeKey>()
  private readonly byTenant = new Map<string, Map<string, RuntimeKey>>()

  /** Adds or replaces `key` (by tenant and id). */
  put(key: RuntimeKey): void {
    let ids = this.byTenant.get(key.tenant)
    if (ids === undefined) this.byTenant.set(key.tenant, (ids = new Map()))
    const previous = ids.get(key.id)
    if (previous !== undefined && previous.sha256 !== key.sha256) this.byHash.delete(previous.sha256)
    ids.set(key.id, key)
    if (key.revokedAt === null) this.byHash.set(key.sha256, key)
    else this.byHash.delete(key.sha256)
  }

  /** Replaces everything with `keys` (a full read of the store). */
  replaceAll(keys: Iterable<RuntimeKey>): void {
    this.byHash.clear()
    this.byTenant.clear()
    for (const key of keys) this.put(key)
  }

  /** The live key with this SHA-256 at `now`, or undefined (a map read). */
  find(sha256: string, now: number): RuntimeKey | undefined {
    const key = this.byHash.get(sha256)
    return key !== undefined && isLive(key, now) ? key : undefined
  }

  get(tenant: string, id: string): RuntimeKey | undefined {
    return this.byTenant.get(tenant)?.get(id)
  }

  /** The keys of `tenant` (all tenants when undefined), oldest first. */
  list(tenant: string | undefined): Array<RuntimeKey> {
    const groups = tenant === undefined ? [...this.byTenant.values()] : [this.byTenant.get(tenant)]
    const keys: Array<RuntimeKey> = []
    for (const ids of groups) if (ids !== undefined) keys.push(...ids.values())
    return keys.sort((a, b) =>
      a.tenant !== b.tenant
        ? a.tenant < b.tenant
          ? -1
          : 1
        : a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
  }

  /** Number of keys known, revoked included. */
  get size(): number {
    let n = 0
    for (const ids of this.byTenant.values()) n += ids.size
    return n
  }
}

/**
 * Last-use times: this copy's own (noted per request, no I/O), those not yet
 * written, and those read from the store. One entry per key that was used, so
 * the maps are bounded by the number of keys.
 */
/** `last_used_at` is kept to this resolution, ms. */
const NOTE_RESOLUTION_MS = 1_000

export class LastUse {
  private readonly own: UseTimes = new Map()
  private pending: UseTimes = new Map()
  private stored: UseTimes = new Map()

  /**
   * A request authenticated with key `id` of `tenant` at `at` (epoch ms).
   * This runs on every request: within a second of the last time noted for
   * the key it only reads (no map write, no allocation).
   */
  note(tenant: string, id: string, at: number): void {
    const seen = this.own.get(tenant)?.get(id)
    if (seen !== undefined && at - seen < NOTE_RESOLUTION_MS) return
    later(this.own, tenant, id, at)
    later(this.pending, tenant, id, at)
  }

  /** The times not yet written, taken out; give them back with {@link putBack} when the write fails. */
  takePending(): UseTimes {
    const taken = this.pending
    this.pending = new Map()
    return taken
  }

  putBack(times: UseTimes): void {
    mergeUseTimes(this.pending, times)
  }

  get hasPending(): boolean {
    return this.pending.size > 0
  }

  /** Replaces the times read from the store. */
  setStored(times: UseTimes): void {
    this.stored = times
  }

  /** Adds times read from the store (the file's replay). */
  addStored(times: UseTimes): void {
    mergeUseTimes(this.stored, times)
  }

  /** The latest use of the key that this copy knows (its own or the store's), or null. */
  get(tenant: string, id: string): number | null {
    const own = this.own.get(tenant)?.get(id)
    const stored = this.stored.get(tenant)?.get(id)
    if (own === undefined) return stored ?? null
    return stored === undefined || own > stored ? own : stored
  }

  /** Every known time (own and stored merged), e.g. to write a compacted file. */
  all(): UseTimes {
    const merged: UseTimes = new Map()
    mergeUseTimes(merged, this.stored)
    mergeUseTimes(merged, this.own)
    return merged
  }
}
