/**
 * `/admin/usage`, its CSV and `/admin/usage/series` over the usage database
 * (SPEC Part 3): the same answers as the file index (`UsageIndex.ts`), but
 * of every copy's records, so any copy answers for the whole fleet. Each
 * query is one aggregate over a time range (and a tenant), which the
 * table's indexes serve (ADR 0069).
 */
import { Clock, Effect, Layer, Result } from "effect"
import { UsageDatabase, type DbRow, type UsageDbError } from "../usagedb/Database.js"
import { quoteTable } from "../usagedb/table.js"
import { UsageIndex, UsageUnavailable, type UsageIndexService } from "./UsageIndex.js"
import { byKey, EMPTY, type GroupBy, type UsageGroup, type UsageQuery, type UsageResult } from "./query.js"
import { seriesFrame, seriesOf, seriesSums, seriesUntil, type SeriesQuery } from "./series.js"

/** The SQL of each grouping's key. */
const GROUP_KEY: Readonly<Record<GroupBy, string>> = {
  model: "model",
  provider: "provider",
  route: "route",
  tenant: "tenant",
  key: "tenant || '/' || key_id",
  day: "to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
  session: "session",
}

const SUMS =
  "count(*)::int8 AS requests, coalesce(sum(input_tokens), 0)::int8 AS input_tokens, " +
  "coalesce(sum(output_tokens), 0)::int8 AS output_tokens, coalesce(sum(cache_read_tokens), 0)::int8 AS cache_read_tokens, " +
  "coalesce(sum(cache_write_tokens), 0)::int8 AS cache_write_tokens, coalesce(sum(cost_micro_usd), 0)::int8 AS cost_micro_usd"

/** A number from an `int8` (bigint) or `numeric` (string) column. */
const num = (value: unknown): number =>
  typeof value === "bigint" ? Number(value) : typeof value === "number" ? value : Number(value ?? 0)

/** `WHERE …` of a tenant and a time range, and its parameters. */
const where = (
  tenant: string | undefined,
  since: number | undefined,
  until: number | undefined,
): { readonly sql: string; readonly params: Array<unknown> } => {
  const conditions: Array<string> = []
  const params: Array<unknown> = []
  if (tenant !== undefined) {
    params.push(tenant)
    conditions.push(`tenant = $${params.length}`)
  }
  if (since !== undefined) {
    params.push(new Date(since))
    conditions.push(`ts >= $${params.length}`)
  }
  if (until !== undefined) {
    params.push(new Date(until))
    conditions.push(`ts < $${params.length}`)
  }
  return { sql: conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`, params }
}

const totalsOf = (row: DbRow | undefined) =>
  row === undefined
    ? EMPTY
    : {
        requests: num(row.requests),
        input_tokens: num(row.input_tokens),
        output_tokens: num(row.output_tokens),
        cache_read_tokens: num(row.cache_read_tokens),
        cache_write_tokens: num(row.cache_write_tokens),
        cost_micro_usd: num(row.cost_micro_usd),
      }

/** The usage index over the database's table. */
export const make = (db: UsageDatabase["Service"]): UsageIndexService => {
  const table = quoteTable(db.table)

  const unavailable = (error: UsageDbError) =>
    new UsageUnavailable({ message: `usage database: ${error.message}` })

  const query = (q: UsageQuery): Effect.Effect<UsageResult, UsageDbError> => {
    const filter = where(q.tenant, q.since, q.until)
    if (q.groupBy === undefined) {
      return Effect.map(db.select(`SELECT ${SUMS} FROM ${table}${filter.sql}`, filter.params), (rows) => ({
        totals: totalsOf(rows[0]),
        groups: undefined,
      }))
    }
    const sql = `SELECT ${GROUP_KEY[q.groupBy]} AS key, ${SUMS} FROM ${table}${filter.sql} GROUP BY 1`
    return Effect.map(db.select(sql, filter.params), (rows) => {
      const groups: Array<UsageGroup> = rows.map((row) => ({
        key: row.key === null || row.key === undefined ? null : String(row.key),
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
      }
      return { totals, groups: groups.sort(byKey) }
    })
  }

  const series = (q: SeriesQuery) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const until = seriesUntil(q, now)
      let since = q.since
      if (since === undefined) {
        const filter = where(q.tenant, undefined, until)
        const rows = yield* db.select(
          `SELECT (extract(epoch FROM min(ts)) * 1000)::int8 AS first FROM ${table}${filter.sql}`,
          filter.params,
        )
        const first = rows[0]?.first
        since = first === null || first === undefined ? until : num(first)
      }
      const framed = seriesFrame(q, since, until)
      if (Result.isFailure(framed)) return yield* framed.failure
      const frame = framed.success
      const sums = seriesSums(frame)
      if (frame.buckets > 0) {
        const filter = where(q.tenant, frame.since, frame.until)
        const n = filter.params.length
        const rows = yield* db.select(
          `SELECT floor((extract(epoch FROM ts) * 1000 - $${n + 1}) / $${n + 2})::int8 AS b, count(*)::int8 AS requests, ` +
            `count(*) FILTER (WHERE status < 200 OR status > 299)::int8 AS errors, ` +
            `coalesce(sum(cost_micro_usd), 0)::int8 AS cost, coalesce(sum(input_tokens), 0)::int8 AS input, ` +
            `coalesce(sum(output_tokens), 0)::int8 AS output FROM ${table}${filter.sql} GROUP BY 1`,
          [...filter.params, frame.start, frame.size],
        )
        for (const row of rows) {
          const b = num(row.b)
          if (b < 0 || b >= frame.buckets) continue
          sums.requests[b] = num(row.requests)
          sums.errors[b] = num(row.errors)
          sums.cost[b] = num(row.cost)
          sums.input[b] = num(row.input)
          sums.output[b] = num(row.output)
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
