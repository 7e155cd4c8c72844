/**
 * Totals over a time range of the usage index's columns: one binary search
 * per bound, then one pass over the rows in the range (O(rows in range),
 * never the file).
 */
import { NULL_ID, type Columns } from "./columns.js"

/** How `/admin/usage` may group: the record's upstream model or provider, its UTC date, or its session. */
export type GroupBy = "model" | "provider" | "day" | "session"

export const GROUP_BY: ReadonlyArray<GroupBy> = ["model", "provider", "day", "session"]

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
}

/** One group: `key` is the model, provider, session (null when the records had none) or `YYYY-MM-DD`. */
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

  totals(): UsageTotals {
    return {
      requests: this.requests,
      input_tokens: this.input,
      output_tokens: this.output,
      cache_read_tokens: this.cacheRead,
      cache_write_tokens: this.cacheWrite,
      cost_micro_usd: this.cost,
    }
  }
}

const EMPTY = new Sum().totals()

const keyColumn = (columns: Columns, groupBy: GroupBy): ArrayLike<number> => {
  switch (groupBy) {
    case "model":
      return columns.model
    case "provider":
      return columns.provider
    case "session":
      return columns.session
    case "day":
      return columns.ts
  }
}

const keyName = (columns: Columns, groupBy: GroupBy, key: number): string | null => {
  switch (groupBy) {
    case "model":
      return columns.models.names[key] ?? null
    case "provider":
      return columns.providers.names[key] ?? null
    case "session":
      return columns.sessions.names[key] ?? null
    case "day":
      return new Date(key * DAY_MS).toISOString().slice(0, 10)
  }
}

const byKey = (a: UsageGroup, b: UsageGroup): number =>
  a.key === b.key ? 0 : a.key === null ? 1 : b.key === null ? -1 : a.key < b.key ? -1 : 1

/** Runs `query` over `columns` (which must be sorted). */
export const runQuery = (columns: Columns, query: UsageQuery): UsageResult => {
  const groupBy = query.groupBy
  let tenant = -1
  if (query.tenant !== undefined) {
    const id = columns.tenants.find(query.tenant)
    if (id === undefined) return { totals: EMPTY, groups: groupBy === undefined ? undefined : [] }
    tenant = id
  }
  const from = query.since === undefined ? 0 : columns.lowerBound(query.since)
  const to = query.until === undefined ? columns.size : columns.lowerBound(query.until)
  const total = new Sum()
  const groups = new Map<number, Sum>()
  const keys = groupBy === undefined ? undefined : keyColumn(columns, groupBy)
  const day = groupBy === "day"
  const { tenant: tenants, input, output, cacheRead, cacheWrite, cost } = columns
  const add = (sum: Sum, i: number): void => {
    sum.requests++
    sum.input += input[i]!
    sum.output += output[i]!
    sum.cacheRead += cacheRead[i]!
    sum.cacheWrite += cacheWrite[i]!
    sum.cost += cost[i]!
  }
  for (let i = from; i < to; i++) {
    if (tenant >= 0 && tenants[i] !== tenant) continue
    add(total, i)
    if (keys === undefined) continue
    const key = day ? Math.floor(keys[i]! / DAY_MS) : keys[i]!
    let group = groups.get(key)
    if (group === undefined) groups.set(key, (group = new Sum()))
    add(group, i)
  }
  if (groupBy === undefined) return { totals: total.totals(), groups: undefined }
  const list: Array<UsageGroup> = []
  for (const [key, sum] of groups) {
    list.push({ key: day || key !== NULL_ID ? keyName(columns, groupBy, key) : null, ...sum.totals() })
  }
  return { totals: total.totals(), groups: list.sort(byKey) }
}
