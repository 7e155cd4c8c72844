/**
 * Totals over a time range of the usage index: per chunk of rows, one binary
 * search per bound, then one pass over the rows in the range (O(rows in
 * range), never the usage file).
 */
import { lowerBound, type Rows, type Tables } from "./columns.js"

/**
 * How `/admin/usage` may group: the record's upstream model or provider, its
 * route, its tenant, its key (tenant and key id, `acme/ci`), its UTC date, its
 * session, or its target on its route (`route/provider/model`, ADR 0073).
 */
export type GroupBy = "model" | "provider" | "route" | "tenant" | "key" | "day" | "session" | "target"

export const GROUP_BY: ReadonlyArray<GroupBy> = [
  "model",
  "provider",
  "route",
  "tenant",
  "key",
  "day",
  "session",
  "target",
]

/** A usage query. Bounds are epoch ms: `since` inclusive, `until` exclusive; undefined is open. */
export interface UsageQuery {
  readonly tenant: string | undefined
  readonly since: number | undefined
  readonly until: number | undefined
  readonly groupBy: GroupBy | undefined
}

/** Sums over a set of usage records (tokens are counts, cost integer micro-USD). */
export interface UsageTotals {
  readonly requests: number
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_tokens: number
  readonly cache_write_tokens: number
  readonly cost_micro_usd: number
  /** micro-USD the prompt cache saved (Σ of the records' `cache_saved_micro_usd`, ADR 0073). */
  readonly cache_saved_micro_usd: number
  /** cache_read / (input + cache_read + cache_write) tokens, 4 decimals; 0 without prompt tokens. */
  readonly cache_hit_ratio: number
}

/** The cache-hit ratio of some totals: cache reads over all prompt tokens, to 4 decimals (0 when none). */
export const cacheHitRatio = (
  t: Pick<UsageTotals, "input_tokens" | "cache_read_tokens" | "cache_write_tokens">,
): number => {
  const prompt = t.input_tokens + t.cache_read_tokens + t.cache_write_tokens
  return prompt === 0 ? 0 : Math.round((t.cache_read_tokens / prompt) * 10_000) / 10_000
}

/**
 * One group: `key` is the model, provider, route, session (null when the records had none),
 * tenant, `tenant/key_id` or `YYYY-MM-DD`.
 */
export interface UsageGroup extends UsageTotals {
  readonly key: string | null
}

export interface UsageResult {
  readonly totals: UsageTotals
  /** Present when the query has `groupBy`; sorted by key, null last. */
  readonly groups: ReadonlyArray<UsageGroup> | undefined
}

const DAY_MS = 86_400_000

class Sum {
  requests = 0
  input = 0
  output = 0
  cacheRead = 0
  cacheWrite = 0
  cost = 0
  saved = 0

  totals(): UsageTotals {
    const totals = {
      requests: this.requests,
      input_tokens: this.input,
      output_tokens: this.output,
      cache_read_tokens: this.cacheRead,
      cache_write_tokens: this.cacheWrite,
      cost_micro_usd: this.cost,
      cache_saved_micro_usd: this.saved,
      cache_hit_ratio: 0,
    }
    totals.cache_hit_ratio = cacheHitRatio(totals)
    return totals
  }
}

/** Totals of no records. */
export const EMPTY = new Sum().totals()

/**
 * How a grouping reads a row: the group is `groupOf[row's column]` (the
 * column's value itself without `groupOf`), named by `name`. Model, provider
 * and route are parts of the row's target; tenant is part of its key.
 */
interface Grouping {
  readonly column: "target" | "key" | "session"
  readonly groupOf: ArrayLike<number> | undefined
  readonly name: (group: number) => string | null
}

const grouping = (tables: Tables, groupBy: Exclude<GroupBy, "day">): Grouping => {
  const [route, provider, model] = tables.targets.parts as [Array<number>, Array<number>, Array<number>]
  const [tenant, keyId] = tables.keys.parts as [Array<number>, Array<number>]
  const named =
    (names: ReadonlyArray<string | null>) =>
    (id: number): string | null =>
      names[id] ?? null
  switch (groupBy) {
    case "model":
      return { column: "target", groupOf: model, name: named(tables.models.names) }
    case "provider":
      return { column: "target", groupOf: provider, name: named(tables.providers.names) }
    case "route":
      return { column: "target", groupOf: route, name: named(tables.routes.names) }
    case "tenant":
      return { column: "key", groupOf: tenant, name: named(tables.tenants.names) }
    case "key":
      return {
        column: "key",
        groupOf: undefined,
        name: (id) => `${tables.tenants.names[tenant[id]!]}/${tables.keyIds.names[keyId[id]!]}`,
      }
    case "session":
      return { column: "session", groupOf: undefined, name: named(tables.sessions.names) }
    case "target":
      // `route/provider/model`; a record no target served (no provider) is in the null group.
      // Every target without a provider is one group (-1).
      return {
        column: "target",
        groupOf: provider.map((p, id) => ((tables.providers.names[p] ?? null) === null ? -1 : id)),
        name: (id) =>
          id < 0
            ? null
            : `${tables.routes.names[route[id]!] ?? ""}/${tables.providers.names[provider[id]!]}/${tables.models.names[model[id]!] ?? ""}`,
      }
  }
}

const dayName = (day: number): string => new Date(day * DAY_MS).toISOString().slice(0, 10)

/** Groups in the order the API lists them: by key, null last. */
export const byKey = (a: UsageGroup, b: UsageGroup): number =>
  a.key === b.key ? 0 : a.key === null ? 1 : b.key === null ? -1 : a.key < b.key ? -1 : 1

/** A query being run: `visit` each chunk of rows (in any order), then `result`. */
export interface QueryRun {
  readonly visit: (rows: Rows) => void
  readonly result: () => UsageResult
}

/** Starts `query` over rows whose ids are `tables`'. */
export const startQuery = (tables: Tables, query: UsageQuery): QueryRun => {
  const groupBy = query.groupBy
  // With a tenant: which key ids are that tenant's (the row holds the key, the key its tenant).
  const tenantKeys = query.tenant === undefined ? undefined : tables.keysOf(query.tenant)
  if (query.tenant !== undefined && tenantKeys === undefined) {
    return {
      visit: () => {},
      result: () => ({ totals: EMPTY, groups: groupBy === undefined ? undefined : [] }),
    }
  }
  const total = new Sum()
  const groups = new Map<number, Sum>()
  const day = groupBy === "day"
  const by = groupBy === undefined || day ? undefined : grouping(tables, groupBy)
  const groupOf = by?.groupOf
  const visit = (rows: Rows): void => {
    const from = query.since === undefined ? 0 : lowerBound(rows, query.since)
    const to = query.until === undefined ? rows.size : lowerBound(rows, query.until)
    const keys = day ? rows.ts : by === undefined ? undefined : rows[by.column]
    const { key: rowKeys, input, output, cacheRead, cacheWrite, cost, saved } = rows
    const add = (sum: Sum, i: number): void => {
      sum.requests++
      sum.input += input[i]!
      sum.output += output[i]!
      sum.cacheRead += cacheRead[i]!
      sum.cacheWrite += cacheWrite[i]!
      sum.cost += cost[i]!
      sum.saved += saved[i]!
    }
    for (let i = from; i < to; i++) {
      if (tenantKeys !== undefined && tenantKeys[rowKeys[i]!] !== 1) continue
      add(total, i)
      if (keys === undefined) continue
      const key = day ? Math.floor(keys[i]! / DAY_MS) : groupOf === undefined ? keys[i]! : groupOf[keys[i]!]!
      let group = groups.get(key)
      if (group === undefined) groups.set(key, (group = new Sum()))
      add(group, i)
    }
  }
  const result = (): UsageResult => {
    if (groupBy === undefined) return { totals: total.totals(), groups: undefined }
    const list: Array<UsageGroup> = []
    for (const [key, sum] of groups) {
      list.push({ key: by === undefined ? dayName(key) : by.name(key), ...sum.totals() })
    }
    return { totals: total.totals(), groups: list.sort(byKey) }
  }
  return { visit, result }
}
