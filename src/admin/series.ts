/**
 * A time series over the usage index (`GET /admin/usage/series`): the
 * records in a time range counted into UTC minute, hour or day buckets, in
 * one pass over the rows of the range (two binary searches per chunk of rows
 * find it), with every bucket of the range present, empty ones as zeros.
 */
import { Data, Result } from "effect"
import { lowerBound, type Rows, type Tables } from "./columns.js"

/** The range has more buckets than {@link MAX_BUCKETS} at the resolution (400, naming `resolution`). */
export class TooManyBuckets extends Data.TaggedError("TooManyBuckets")<{
  readonly param: "resolution"
  readonly buckets: number
  readonly message: string
}> {}

export type Resolution = "minute" | "hour" | "day"

export const RESOLUTIONS: ReadonlyArray<Resolution> = ["minute", "hour", "day"]

/** Bucket length of each resolution, in ms (UTC has no leap seconds in epoch time, so every day is 86,400 s). */
export const RESOLUTION_MS: Readonly<Record<Resolution, number>> = {
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
}

/** Most buckets one series may have (a week of minutes is 10,080: ask for hours). */
export const MAX_BUCKETS = 10_000

/** Without `resolution`: minute up to this range (360 buckets at most)… */
export const MINUTE_UP_TO_MS = 6 * 3_600_000
/** …hour up to this one (744 at most), day beyond. */
export const HOUR_UP_TO_MS = 31 * 86_400_000

/** A series query. Bounds are epoch ms: `since` inclusive, `until` exclusive. */
export interface SeriesQuery {
  readonly tenant: string | undefined
  /** Undefined: the `ts` of the first record (of `tenant`) before `until`. */
  readonly since: number | undefined
  /** Undefined: now (or `since`, when that is later). */
  readonly until: number | undefined
  /** Undefined: chosen from the length of the range ({@link defaultResolution}). */
  readonly resolution: Resolution | undefined
}

/** A series, columnar: bucket `i` starts at `t[i]` (epoch seconds) and its sums are at `[i]` of the other arrays. */
export interface Series {
  readonly tenant: string | undefined
  /** The range counted (epoch ms): the query's, or its defaults. */
  readonly since: number
  readonly until: number
  readonly resolution: Resolution
  readonly t: ReadonlyArray<number>
  readonly requests: ReadonlyArray<number>
  /** Records whose status is not 2xx (outside 200–299). */
  readonly errors: ReadonlyArray<number>
  readonly cost_micro_usd: ReadonlyArray<number>
  readonly input_tokens: ReadonlyArray<number>
  readonly output_tokens: ReadonlyArray<number>
}

/** The resolution of a range without one: minute up to 6 hours, hour up to 31 days, day beyond. */
export const defaultResolution = (rangeMs: number): Resolution =>
  rangeMs <= MINUTE_UP_TO_MS ? "minute" : rangeMs <= HOUR_UP_TO_MS ? "hour" : "day"

/** A series being counted: `visit` each chunk of rows (in any order), then `result`. */
export interface SeriesRun {
  readonly since: number
  readonly until: number
  readonly visit: (rows: Rows) => void
  readonly result: () => Series
}

/** The buckets of a series: `buckets` of `size` ms from `start` (epoch ms), over `since`..`until`. */
export interface SeriesFrame {
  readonly tenant: string | undefined
  readonly since: number
  readonly until: number
  readonly resolution: Resolution
  readonly start: number
  readonly size: number
  readonly buckets: number
}

/** The `until` of `query`: its own, else now (or `since`, when that is later). */
export const seriesUntil = (query: SeriesQuery, now: number): number =>
  query.until ?? Math.max(now, query.since ?? now)

/**
 * The buckets of `query` over `since`..`until` (the defaults already
 * resolved); fails (naming `resolution`) when the range has more than
 * {@link MAX_BUCKETS} buckets.
 */
export const seriesFrame = (
  query: SeriesQuery,
  since: number,
  until: number,
): Result.Result<SeriesFrame, TooManyBuckets> => {
  const resolution = query.resolution ?? defaultResolution(until - since)
  const size = RESOLUTION_MS[resolution]
  const firstBucket = Math.floor(since / size)
  const buckets = since < until ? Math.ceil(until / size) - firstBucket : 0
  if (buckets > MAX_BUCKETS) {
    return Result.fail(
      new TooManyBuckets({
        param: "resolution",
        buckets,
        message: `resolution: ${resolution} over ${new Date(since).toISOString()} to ${new Date(until).toISOString()} is ${buckets} buckets; at most ${MAX_BUCKETS}: narrow since/until or choose a coarser resolution`,
      }),
    )
  }
  return Result.succeed({
    tenant: query.tenant,
    since,
    until,
    resolution,
    start: firstBucket * size,
    size,
    buckets,
  })
}

/** The sums of a series being counted, one slot per bucket. */
export interface SeriesSums {
  readonly requests: Float64Array
  readonly errors: Float64Array
  readonly cost: Float64Array
  readonly input: Float64Array
  readonly output: Float64Array
}

/** Zero sums for `frame`. */
export const seriesSums = (frame: SeriesFrame): SeriesSums => ({
  requests: new Float64Array(frame.buckets),
  errors: new Float64Array(frame.buckets),
  cost: new Float64Array(frame.buckets),
  input: new Float64Array(frame.buckets),
  output: new Float64Array(frame.buckets),
})

/** The series of `frame` with `sums`. */
export const seriesOf = (frame: SeriesFrame, sums: SeriesSums): Series => {
  const t = new Array<number>(frame.buckets)
  for (let b = 0; b < frame.buckets; b++) t[b] = (frame.start + b * frame.size) / 1000
  return {
    tenant: frame.tenant,
    since: frame.since,
    until: frame.until,
    resolution: frame.resolution,
    t,
    requests: Array.from(sums.requests),
    errors: Array.from(sums.errors),
    cost_micro_usd: Array.from(sums.cost),
    input_tokens: Array.from(sums.input),
    output_tokens: Array.from(sums.output),
  }
}

/**
 * Starts the series of `query` over rows whose ids are `tables`'; `now`
 * (epoch ms) is the default `until`, and `first(mine, until)` gives the `ts`
 * of the first row before `until` of the keys marked in `mine` (every key
 * when undefined), the default `since`. Fails (naming `resolution`) when the
 * range has more than {@link MAX_BUCKETS} buckets.
 */
export const startSeries = (
  tables: Tables,
  query: SeriesQuery,
  now: number,
  first: (mine: Uint8Array | undefined, until: number) => number | undefined,
): Result.Result<SeriesRun, TooManyBuckets> => {
  const tenant = query.tenant
  // undefined: every record; null: a tenant with no records.
  const mine = tenant === undefined ? undefined : (tables.keysOf(tenant) ?? null)
  const until = seriesUntil(query, now)
  // Without `since`: the first record of the tenant before `until`; none: an empty range.
  const since = query.since ?? (mine === null ? until : (first(mine, until) ?? until))
  const framed = seriesFrame(query, since, until)
  if (Result.isFailure(framed)) return Result.fail(framed.failure)
  const frame = framed.success
  const { start, size, buckets } = frame
  const sums = seriesSums(frame)
  const { requests, errors, cost, input, output } = sums
  const visit = (rows: Rows): void => {
    if (buckets === 0 || mine === null) return
    const { ts, key: rowKeys, status, cost: costs, input: inputs, output: outputs } = rows
    const to = lowerBound(rows, until)
    for (let i = lowerBound(rows, since); i < to; i++) {
      if (mine !== undefined && mine[rowKeys[i]!] !== 1) continue
      // Integer ms over an integer bucket length: exact for every epoch time (far below 2^53).
      const b = Math.floor((ts[i]! - start) / size)
      requests[b]!++
      // `errors`: every status outside 200–299.
      const code = status[i]!
      if (code < 200 || code > 299) errors[b]!++
      cost[b]! += costs[i]!
      input[b]! += inputs[i]!
      output[b]! += outputs[i]!
    }
  }
  return Result.succeed({ since, until, visit, result: () => seriesOf(frame, sums) })
}

/** The JSON answer of `/admin/usage/series`: the range as ISO-8601, then the columns. */
export const seriesBody = (series: Series) => ({
  tenant: series.tenant ?? null,
  since: new Date(series.since).toISOString(),
  until: new Date(series.until).toISOString(),
  resolution: series.resolution,
  t: series.t,
  requests: series.requests,
  errors: series.errors,
  cost_micro_usd: series.cost_micro_usd,
  input_tokens: series.input_tokens,
  output_tokens: series.output_tokens,
})
