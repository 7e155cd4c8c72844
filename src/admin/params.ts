/**
 * The query strings of `GET /admin/usage` (`tenant`, `since`, `until` —
 * ISO-8601; since inclusive, until exclusive —, `group_by` and `format`) and
 * of `GET /admin/usage/series` (`tenant`, `since`, `until`, `resolution`).
 */
import { Data, Result } from "effect"
import { GROUP_BY, type UsageQuery } from "./query.js"
import { RESOLUTIONS, type SeriesQuery } from "./series.js"

/** A parameter of `/admin/usage` is malformed (400). */
export class InvalidUsageQuery extends Data.TaggedError("InvalidUsageQuery")<{
  /** The parameter at fault. */
  readonly param: string
  readonly message: string
}> {}

const PARAMS = ["tenant", "since", "until", "group_by", "format"]
const SERIES_PARAMS = ["tenant", "since", "until", "resolution"]

/** How `/admin/usage` answers: JSON (the default) or CSV. */
export type UsageFormat = "json" | "csv"

const FORMATS: ReadonlyArray<UsageFormat> = ["json", "csv"]

// Date, or date-time with seconds optional, any number of fraction digits and a required zone
// (Z or ±hh:mm; a "+" sent unencoded in a query string arrives as a space and is read as "+").
const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:([Zz])|([+\- ])(\d{2}):(\d{2})))?$/

/**
 * Epoch ms of an ISO-8601 time, rounded up to the next whole millisecond
 * when it has finer digits (records carry whole ms, so `ts >= since` and
 * `ts < until` stay exact). Undefined when `text` is not a valid time.
 */
export const parseInstant = (text: string): number | undefined => {
  const m = ISO.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? "0")) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return undefined
  const fraction = m[7] ?? ""
  const ms = Number(fraction.slice(0, 3).padEnd(3, "0"))
  const finer = /[1-9]/.test(fraction.slice(3)) ? 1 : 0
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  if (date.getUTCDate() !== day) return undefined
  date.setUTCHours(hour, minute, second, ms)
  let offsetMinutes = 0
  if (m[9] !== undefined) {
    const hours = Number(m[10])
    const minutes = Number(m[11])
    if (hours > 23 || minutes > 59) return undefined
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (hours * 60 + minutes)
  }
  return date.getTime() - offsetMinutes * 60_000 + finer
}

const instant = (
  params: URLSearchParams,
  name: "since" | "until",
): Result.Result<number | undefined, InvalidUsageQuery> => {
  const text = params.get(name)
  if (text === null || text === "") return Result.succeed(undefined)
  const ms = parseInstant(text)
  return ms === undefined
    ? Result.fail(
        new InvalidUsageQuery({
          param: name,
          message: `${name}: not an ISO-8601 date or time with a zone: ${JSON.stringify(text)} (e.g. 2026-12-02 or 2026-12-02T10:00:00Z)`,
        }),
      )
    : Result.succeed(ms)
}

/** Refuses a parameter that is not in `known`, or one given more than once. */
const checkNames = (
  params: URLSearchParams,
  known: ReadonlyArray<string>,
): Result.Result<void, InvalidUsageQuery> => {
  for (const name of new Set(params.keys())) {
    if (!known.includes(name)) {
      return Result.fail(
        new InvalidUsageQuery({
          param: name,
          message: `unknown parameter ${JSON.stringify(name)}; expected ${known.join(", ")}`,
        }),
      )
    }
    if (params.getAll(name).length > 1)
      return Result.fail(new InvalidUsageQuery({ param: name, message: `${name}: given more than once` }))
  }
  return Result.void
}

/** `since` and `until` (since not after until). */
const range = (
  params: URLSearchParams,
): Result.Result<
  { readonly since: number | undefined; readonly until: number | undefined },
  InvalidUsageQuery
> =>
  Result.gen(function* () {
    const since = yield* instant(params, "since")
    const until = yield* instant(params, "until")
    if (since !== undefined && until !== undefined && since > until)
      return yield* Result.fail(new InvalidUsageQuery({ param: "since", message: "since is after until" }))
    return { since, until }
  })

/** The format of a `/admin/usage` request whose query {@link parseUsageQuery} accepted (`json` unless `format=csv`). */
export const usageFormat = (params: URLSearchParams): UsageFormat =>
  params.get("format") === "csv" ? "csv" : "json"

/** Parameter `name`: undefined when absent or empty, else one of `allowed` (a 400 naming it otherwise). */
const choice = <T extends string>(
  params: URLSearchParams,
  name: string,
  allowed: ReadonlyArray<T>,
  what: string,
): Result.Result<T | undefined, InvalidUsageQuery> => {
  const value = params.get(name) ?? ""
  if (value === "") return Result.succeed(undefined)
  if (allowed.includes(value as T)) return Result.succeed(value as T)
  return Result.fail(
    new InvalidUsageQuery({
      param: name,
      message: `${name}: unknown ${what} ${JSON.stringify(value)}; expected one of ${allowed.join(", ")}`,
    }),
  )
}

const tenantOf = (params: URLSearchParams): string | undefined => {
  const tenant = params.get("tenant") ?? ""
  return tenant === "" ? undefined : tenant
}

/** The query of a `/admin/usage` request (its `format` checked too); empty parameters count as absent. */
export const parseUsageQuery = (params: URLSearchParams): Result.Result<UsageQuery, InvalidUsageQuery> =>
  Result.gen(function* () {
    yield* checkNames(params, PARAMS)
    yield* choice(params, "format", FORMATS, "format")
    const groupBy = yield* choice(params, "group_by", GROUP_BY, "grouping")
    const { since, until } = yield* range(params)
    return { tenant: tenantOf(params), since, until, groupBy }
  })

/** The query of a `/admin/usage/series` request; empty parameters count as absent. */
export const parseSeriesQuery = (params: URLSearchParams): Result.Result<SeriesQuery, InvalidUsageQuery> =>
  Result.gen(function* () {
    yield* checkNames(params, SERIES_PARAMS)
    const resolution = yield* choice(params, "resolution", RESOLUTIONS, "resolution")
    const { since, until } = yield* range(params)
    return { tenant: tenantOf(params), since, until, resolution }
  })
