/**
 * The key store's types, errors and timings (the service is `KeyStore.ts`;
 * the backends are `redisKeys.ts` and `fileKeys.ts`).
 */
import { Schema, type Effect } from "effect"
import type { BudgetConfig, KeyBudgets } from "../config/model.js"

/** A key made through the admin API. Times are epoch ms. */
export interface RuntimeKey {
  readonly tenant: string
  readonly id: string
  /** Lower-case hex SHA-256 of the secret. */
  readonly sha256: string
  readonly createdAt: number
  /** Null: never expires. The key gets 401 from this time on. */
  readonly expiresAt: number | null
  /** Null: not revoked. */
  readonly revokedAt: number | null
  /** The key's own budgets (`POST /admin/keys` `budgets`), beside the tenant's. */
  readonly budgets: KeyBudgets
}

/** A key to add to the store (its creation time is the store's clock). */
export interface NewKey {
  readonly tenant: string
  readonly id: string
  readonly sha256: string
  readonly expiresAt: number | null
  readonly budgets: KeyBudgets
}

/** A key without budgets of its own. */
export const NO_KEY_BUDGETS: KeyBudgets = { day: undefined, week: undefined, month: undefined }

const PERIODS = ["day", "week", "month"] as const

/**
 * A key's budgets as the key stores keep them (the file's `created` line,
 * the Redis hash's JSON): `{"day":{"limit_micro_usd":5000000,"mode":"hard"}}`,
 * integer micro-USD; undefined when the key has none (the field is left out).
 */
export const encodeKeyBudgets = (
  budgets: KeyBudgets,
): Record<string, { limit_micro_usd: number; mode: string }> | undefined => {
  let out: Record<string, { limit_micro_usd: number; mode: string }> | undefined
  for (const name of PERIODS) {
    const budget = budgets[name]
    if (budget !== undefined)
      (out ??= {})[name] = { limit_micro_usd: budget.limitMicroUsd, mode: budget.mode }
  }
  return out
}

const decodeBudget = (value: unknown): BudgetConfig | undefined | null => {
  if (value === undefined) return undefined
  if (typeof value !== "object" || value === null) return null
  const { limit_micro_usd: limit, mode } = value as Record<string, unknown>
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) return null
  return mode === "hard" || mode === "soft" ? { limitMicroUsd: limit, mode } : null
}

/** The budgets of a stored key (`encodeKeyBudgets`' form; absent: none), or null when they are not that form. */
export const decodeKeyBudgets = (value: unknown): KeyBudgets | null => {
  if (value === undefined || value === null) return NO_KEY_BUDGETS
  if (typeof value !== "object") return null
  const fields = value as Record<string, unknown>
  const day = decodeBudget(fields.day)
  const week = decodeBudget(fields.week)
  const month = decodeBudget(fields.month)
  if (day === null || week === null || month === null) return null
  return { day, week, month }
}

/** The tenant already has a runtime key with this id (revoked ones keep their id). */
export class KeyExists extends Schema.TaggedError<KeyExists>()("KeyExists", {
  tenant: Schema.String,
  id: Schema.String,
}) {
  override get message(): string {
    return `tenant "${this.tenant}" already has a key "${this.id}"`
  }
}

/** No runtime key with this id for this tenant. */
export class KeyNotFound extends Schema.TaggedError<KeyNotFound>()("KeyNotFound", {
  tenant: Schema.String,
  id: Schema.String,
}) {
  override get message(): string {
    return `tenant "${this.tenant}" has no runtime key "${this.id}"`
  }
}

/** The store could not be written or read (Redis down, the keys file not writable). */
export class KeyStoreUnavailable extends Schema.TaggedError<KeyStoreUnavailable>()("KeyStoreUnavailable", {
  message: Schema.String,
}) {}

/** What the request path needs: synchronous, a map read and a map write. */
export interface KeyLookup {
  /** The runtime key with this SHA-256 (lower-case hex) that is neither revoked nor expired now, or undefined. */
  readonly find: (sha256: string) => RuntimeKey | undefined
  /** Notes that key `id` of `tenant` (config or runtime) authenticated a request now; written in batches. */
  readonly used: (tenant: string, id: string) => void
}

export interface KeyStoreService extends KeyLookup {
  /** Adds a key, seen by every copy on the same store within 1 s. */
  readonly create: (key: NewKey) => Effect.Effect<RuntimeKey, KeyExists | KeyStoreUnavailable>
  /**
   * Revokes a key: from the answer on, this copy refuses it; every copy on
   * the same store within 1 s. Revoking a revoked key changes nothing and
   * answers it as it is.
   */
  readonly revoke: (
    tenant: string,
    id: string,
  ) => Effect.Effect<RuntimeKey, KeyNotFound | KeyStoreUnavailable>
  /**
   * The runtime keys of `tenant` (every tenant when undefined), revoked and
   * expired ones included, oldest first: read again from the store first, or
   * the last known ones when it cannot be read.
   */
  readonly list: (tenant: string | undefined) => Effect.Effect<ReadonlyArray<RuntimeKey>>
  /** The latest use of a key that this copy knows (its own uses merged with the stored ones), or null. */
  readonly lastUsed: (tenant: string, id: string) => number | null
}

/** How often a copy on Redis reads the version counter, ms: bounds how late it sees another copy's change. */
export const POLL_MS = 250
/** How often a copy on Redis writes the last-use times it noted, ms. */
export const REDIS_FLUSH_MS = 5_000
/** How often the memory store appends the last-use times it noted to the keys file, ms (and at shutdown). */
export const FILE_FLUSH_MS = 10 * 60_000
