/**
 * `/admin/usage` as CSV (`format=csv`), for the console's download: RFC 4180
 * (CRLF line ends, a header row, fields quoted when they hold a comma, a
 * quote or a line break, quotes doubled), one row per group — or one row of
 * totals, with an empty key, without `group_by`. A key is a string a client
 * may have chosen (a session id), so a key cell that a spreadsheet would
 * read as a formula (starting with `=`, `+`, `-`, `@`, tab or CR) gets a
 * leading `'` (CSV injection, OWASP).
 */
import type { UsageQuery, UsageResult, UsageTotals } from "./query.js"

export const CSV_COLUMNS = [
  "key",
  "requests",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "cost_micro_usd",
  "cache_saved_micro_usd",
  "cache_hit_ratio",
] as const

const FORMULA_START = /^[=+\-@\t\r]/
const NEEDS_QUOTES = /[",\r\n]/

/** One text cell: a `'` before a formula start, then RFC 4180 quoting when needed. */
export const csvCell = (text: string): string => {
  const safe = FORMULA_START.test(text) ? `'${text}` : text
  return NEEDS_QUOTES.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}

const row = (key: string | null, totals: UsageTotals): string =>
  `${csvCell(key ?? "")},${totals.requests},${totals.input_tokens},${totals.output_tokens},` +
  `${totals.cache_read_tokens},${totals.cache_write_tokens},${totals.cost_micro_usd},${totals.cache_saved_micro_usd},${totals.cache_hit_ratio}\r\n`

/** The CSV text of a `/admin/usage` answer: the groups when there are any (a null key is an empty cell), else the totals. */
export const usageCsv = (result: UsageResult): string => {
  const lines = [`${CSV_COLUMNS.join(",")}\r\n`]
  if (result.groups === undefined) lines.push(row(null, result.totals))
  else for (const group of result.groups) lines.push(row(group.key, group))
  return lines.join("")
}

/** A file-name part: ASCII letters, digits, `.`, `_` and `-` kept, anything else `_` (at most 64 characters). */
const namePart = (text: string): string => text.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64)

/** `20261202T100000Z` (with `.250` when the time has milliseconds). */
const stamp = (ms: number): string => new Date(ms).toISOString().replace(/[-:]/g, "").replace(".000Z", "Z")

/**
 * The download's file name: `tollgate-usage-{tenant|all}-{by-GROUP|totals}`,
 * then `-from-{since}` and `-until-{until}` when set, `.csv`; e.g.
 * `tollgate-usage-acme-by-model-from-20261201T000000Z.csv`.
 */
export const csvFilename = (query: UsageQuery): string =>
  [
    "tollgate-usage",
    query.tenant === undefined ? "all" : namePart(query.tenant),
    query.groupBy === undefined ? "totals" : `by-${query.groupBy}`,
    ...(query.since === undefined ? [] : [`from-${stamp(query.since)}`]),
    ...(query.until === undefined ? [] : [`until-${stamp(query.until)}`]),
  ].join("-") + ".csv"
