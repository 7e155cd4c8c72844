/**
 * `/admin/usage`, its CSV and `/admin/usage/series` over the usage database
 * (SPEC Part 3): the same answers as the file index (`UsageIndex.ts`), but
 * of every copy's records, so any copy answers for the whole fleet. Each
 * query is one aggregate over a time range (and a tenant): the whole hours
 * from the hourly totals, the ends from the records (ADR 0069).
 */
import { Clock, Effect, Layer, Result } from "effect"
import { UsageDatabase, type DbRow, type UsageDbError } from "../usagedb/Database.js"
import { hourlyTable, quoteTable } from "../usagedb/table.js"
import { UsageIndex, UsageUnavailable, type UsageIndexService } from "./UsageIndex.js"
import {
  byKey,
  cacheHitRatio,
  EMPTY,
  type GroupBy,
  type UsageGroup,
  type UsageQuery,
  type UsageResult,
} from "./query.js"
import { seriesFrame, seriesOf, seriesSums, seriesUntil, type SeriesQuery } from "./series.js"

const HOUR_MS = 3_600_000

/** The SQL of each grouping's key over the records, and over the hourly totals (none: the records alone). */
const GROUP_KEY: Readonly<Record<GroupBy, readonly [string, string | undefined]>> = {
  model: ["model", "NULLIF(model, '')"],
  provider: ["provider", "NULLIF(provider, '')"],
  route: ["route", "route"],
  tenant: ["tenant", "tenant"],
  key: ["tenant || '/' || key_id", "tenant || '/' || key_id"],
  day: ["to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD')", "to_char(\"hour\" AT TIME ZONE 'UTC', 'YYYY-MM-DD')"],
  session: ["session", undefined],
  target: [
    "CASE WHEN provider IS NULL THEN NULL ELSE route || '/' || provider || '/' || coalesce(model, '') END",
    "CASE WHEN provider = '' THEN NULL ELSE route || '/' || provider || '/' || model END",
  ],
}

const SUM_COLUMNS = [
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "cost_micro_usd",
  "cache_saved_micro_usd",
] as const

/** A number from an `int8` (bigint) or `numeric` (string) column. */
const num = (value: unknown): number =>
  typeof value === "bigint" ? Number(value) : typeof value === "number" ? value : Number(value ?? 0)

/** What to sum: the grouping key over the records and over the hourly totals (undefined: the records alone). */
interface Keys {
  readonly raw: string
  readonly hourly: string | undefined
}

/**
 * One query's SQL: the sums of the records of `tenant` in `since`..`until`
 * (epoch ms; undefined is open), grouped by `k`. The whole hours inside the
 * range come from the hourly totals, the parts of an hour at its ends from
 * the records (both by index ranges), so a month costs about 720 rows per
 * group, not a month of records (ADR 0069).
 */
const summed = (
  table: string,
  hourly: string,
  keys: Keys,
  tenant: string | undefined,
  since: number | undefined,
  until: number | undefined,
  params: Array<unknown>,
): string => {
  const p = (value: unknown): string => {
    params.push(value)
    return `$${params.length}`
  }
  const tenantIs = tenant === undefined ? [] : [`tenant = ${p(tenant)}`]
  const fromRecords = (from: number | undefined, to: number | undefined): string => {
    const conditions = [...tenantIs]
    if (from !== undefined) conditions.push(`ts >= ${p(new Date(from))}`)
    if (to !== undefined) conditions.push(`ts < ${p(new Date(to))}`)
    return (
      `SELECT ${keys.raw} AS k, count(*) AS requests, count(*) FILTER (WHERE status < 200 OR status > 299) AS errors, ` +
      SUM_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(", ") +
      ` FROM ${table}${conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`} GROUP BY 1`
    )
  }
  const lo = since === undefined ? undefined : Math.ceil(since / HOUR_MS) * HOUR_MS
  const hi = until === undefined ? undefined : Math.floor(until / HOUR_MS) * HOUR_MS
  const parts: Array<string> = []
  if (keys.hourly !== undefined && (lo === undefined || hi === undefined || lo < hi)) {
    const conditions = [...tenantIs]
    if (lo !== undefined) conditions.push(`"hour" >= ${p(new Date(lo))}`)
    if (hi !== undefined) conditions.push(`"hour" < ${p(new Date(hi))}`)
    parts.push(
      `SELECT ${keys.hourly} AS k, sum(requests) AS requests, sum(errors) AS errors, ` +
        SUM_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(", ") +
        ` FROM ${hourly}${conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`} GROUP BY 1`,
    )
    if (since !== undefined && since < lo!) parts.push(fromRecords(since, lo))
    if (until !== undefined && hi! < until) parts.push(fromRecords(hi, until))
  } else parts.push(fromRecords(since, until))
  return (
    `SELECT k, sum(requests)::int8 AS requests, sum(errors)::int8 AS errors, ` +
    SUM_COLUMNS.map((c) => `coalesce(sum(${c}), 0)::int8 AS ${c}`).join(", ") +
    ` FROM (${parts.join(" UNION ALL ")}) AS parts GROUP BY k`
  )
}

const totalsOf = (row: DbRow) => {
  const totals = {
    requests: num(row.requests),
    input_tokens: num(row.input_tokens),
    output_tokens: num(row.output_tokens),
    cache_read_tokens: num(row.cache_read_tokens),
    cache_write_tokens: num(row.cache_write_tokens),
    cost_micro_usd: num(row.cost_micro_usd),
    cache_saved_micro_usd: num(row.cache_saved_micro_usd),
    cache_hit_ratio: 0,
  }
  totals.cache_hit_ratio = cacheHitRatio(totals)
  return totals
}

/** The usage index over the database's table and its hourly totals. */
export const make = (db: UsageDatabase["Service"]): UsageIndexService => {
  const table = quoteTable(db.table)
  const hourly = quoteTable(hourlyTable(db.table))

  const unavailable = (error: UsageDbError) =>
    new UsageUnavailable({ message: `usage database: ${error.message}` })

  const query = (q: UsageQuery): Effect.Effect<UsageResult, UsageDbError> => {
    const [raw, hourlyKey] = q.groupBy === undefined ? ["NULL::text", "NULL::text"] : GROUP_KEY[q.groupBy]
    const params: Array<unknown> = []
    const sql = summed(table, hourly, { raw, hourly: hourlyKey }, q.tenant, q.since, q.until, params)
    return Effect.map(db.select(sql, params), (rows) => {
      const groups: Array<UsageGroup> = rows.map((row) => ({
        key: row.k === null || row.k === undefined ? null : String(row.k),
        ...totalsOf(row),
      }))
      const totals = { ...EMPTY }
      for (const g of groups) {
        totals.requests += g.requests
        totals.input_tokens += g.input_tokens
        totals.output_tokens += g.output_tokens
        totals.cache_read_tokens += g.cache_read_tokens
        totals.cache_write_tokens += g.cache_write_tokens
        totals.cost_micro_usd += g.cost_micro_usd
        totals.cache_saved_micro_usd += g.cache_saved_micro_usd
      }
      totals.cache_hit_ratio = cacheHitRatio(totals)
      return { totals, groups: q.groupBy === undefined ? undefined : groups.sort(byKey) }
    })
  }

  const series = (q: SeriesQuery) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const until = seriesUntil(q, now)
      let since = q.since
      if (since === undefined) {
        const params: Array<unknown> = []
        const conditions: Array<string> = []
        if (q.tenant !== undefined) {
          params.push(q.tenant)
          conditions.push(`tenant = $${params.length}`)
        }
        params.push(new Date(until))
        conditions.push(`ts < $${params.length}`)
        const rows = yield* db.select(
          `SELECT (extract(epoch FROM min(ts)) * 1000)::int8 AS first FROM ${table} WHERE ${conditions.join(" AND ")}`,
          params,
        )
        const first = rows[0]?.first
        since = first === null || first === undefined ? until : num(first)
      }
      const framed = seriesFrame(q, since, until)
      if (Result.isFailure(framed)) return yield* framed.failure
      const frame = framed.success
      const sums = seriesSums(frame)
      if (frame.buckets > 0) {
        const params: Array<unknown> = [frame.start, frame.size]
        // Buckets of whole hours (hour, day) can be counted from the hourly totals.
        const bucket = (column: string) => `floor((extract(epoch FROM ${column}) * 1000 - $1) / $2)::int8`
        const keys: Keys = {
          raw: bucket("ts"),
          hourly: frame.size % HOUR_MS === 0 ? bucket('"hour"') : undefined,
        }
        const rows = yield* db.select(
          summed(table, hourly, keys, q.tenant, frame.since, frame.until, params),
          params,
        )
        for (const row of rows) {
          const b = num(row.k)
          if (b < 0 || b >= frame.buckets) continue
          sums.requests[b] = num(row.requests)
          sums.errors[b] = num(row.errors)
          sums.cost[b] = num(row.cost_micro_usd)
          sums.input[b] = num(row.input_tokens)
          sums.output[b] = num(row.output_tokens)
        }
      }
      return seriesOf(frame, sums)
    })

  return {
    add: () => {},
    query: (q) => Effect.mapError(query(q), unavailable),
    series: (q) =>
      Effect.mapError(series(q), (error) => (error._tag === "UsageDbError" ? unavailable(error) : error)),
    stats: () => ({ records: 0, memoryBytes: 0, diskBytes: 0, sessions: 0 }),
  }
}

/** `UsageIndex` read from the usage database. */
export const layer: Layer.Layer<UsageIndex, never, UsageDatabase> = Layer.effect(
  UsageIndex,
  Effect.map(UsageDatabase, make),
)
