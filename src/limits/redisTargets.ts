/**
 * What one copy on a Redis store knows of its tenants' session targets
 * (sticky routes; ADR 0074): a target read from Redis, or written by this
 * copy, answers this copy's lookups of the session for TARGET_FRESH_MS
 * without a round trip; a lookup answered from a target read more than
 * TARGET_REFRESH_MS ago reads it again in the background, so a session
 * with many requests a second asks Redis about twice a second, and a move
 * made by another copy is seen here within TARGET_FRESH_MS.
 *
 * Bounded per tenant (by `sessions.max_per_tenant`), and what is older than
 * TARGET_FRESH_MS goes first, so a tenant's entries are at most the
 * sessions it looked up in the last second.
 */

/** A target known for this long answers lookups without asking Redis, ms. */
export const TARGET_FRESH_MS = 1_000
/** A lookup answered from a target known for this long reads it again in the background, ms. */
export const TARGET_REFRESH_MS = 500

export interface KnownTarget {
  readonly target: string
  /** When it was read from Redis or written (the caller's `now`). */
  readonly checked: number
  /** A background read of it is on its way. */
  refreshing: boolean
}

export interface TenantTargets {
  /** By `route\nsession`, in the order they were checked (the oldest first). */
  readonly known: Map<string, KnownTarget>
  /**
   * This copy's writes of the tenant's targets so far: a read sent before a
   * write may answer with what the write replaced, and is then not kept.
   */
  writes: number
}

export const makeKnownTargets = () => {
  const tenants = new Map<string, TenantTargets>()

  const of = (tenant: string): TenantTargets => {
    let targets = tenants.get(tenant)
    if (targets === undefined) tenants.set(tenant, (targets = { known: new Map(), writes: 0 }))
    return targets
  }

  /** The target of `field` if it was checked less than TARGET_FRESH_MS before `now`. */
  const fresh = (targets: TenantTargets, field: string, now: number): KnownTarget | undefined => {
    const known = targets.known.get(field)
    if (known === undefined) return undefined
    const age = now - known.checked
    if (age >= 0 && age < TARGET_FRESH_MS) return known
    targets.known.delete(field)
    return undefined
  }

  /** Keeps `target` as checked at `now`, at most `most` per tenant, the stale ones first out. */
  const keep = (
    targets: TenantTargets,
    field: string,
    target: string,
    now: number,
    most: number,
  ): KnownTarget => {
    const known: KnownTarget = { target, checked: now, refreshing: false }
    const map = targets.known
    map.delete(field)
    map.set(field, known)
    for (const [oldest, entry] of map) {
      if (map.size <= most && now - entry.checked < TARGET_FRESH_MS) break
      map.delete(oldest)
    }
    return known
  }

  /** Forgets `field` when what is known of it is still `known` (a failed write or read). */
  const forget = (targets: TenantTargets, field: string, known: KnownTarget): void => {
    if (targets.known.get(field) === known) targets.known.delete(field)
  }

  return { of, fresh, keep, forget }
}
