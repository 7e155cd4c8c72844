/**
 * The usage table (SPEC Part 3 "Usage in a database"): one row per usage
 * record, the columns named as the record's fields, `request_id` the primary
 * key, and the indexes the admin API's queries use (ADR 0069). The schema
 * has a version, kept in the table's comment, so that `serve` can refuse a
 * table older than it needs and `tollgate usage migrate` knows what to add.
 */

/**
 * The schema version this build writes and reads. 1: the table, its
 * indexes and the hourly totals; 2: a tenant's records by time carry the
 * session and the sums in their index (an index-only scan for a tenant's
 * sessions and the ends of a tenant's ranges), instead of `_tenant_ts`;
 * 3: `cache_saved_micro_usd` (also in the hourly totals), `moved_from` and
 * `moved_reason` (ADR 0073).
 */
export const SCHEMA_VERSION = 3

/** The table comment that carries the version: `tollgate usage schema N`. */
export const versionComment = (version: number): string => `tollgate usage schema ${version}`

/** The version in a table comment, or undefined when the comment is not Tollgate's. */
export const versionOf = (comment: string | null | undefined): number | undefined => {
  const match = /^tollgate usage schema (\d+)$/.exec(comment ?? "")
  return match === null ? undefined : Number(match[1])
}

/** One column: its name (the record's field), its SQL type, and whether it may be null. */
export interface Column {
  readonly name: string
  readonly type: "timestamptz" | "text" | "boolean" | "integer" | "bigint"
  readonly nullable: boolean
}

const col = (name: string, type: Column["type"], nullable = false): Column => ({ name, type, nullable })

/** Every column, in the order of the record's fields (SPEC "Usage records"). */
export const COLUMNS: ReadonlyArray<Column> = [
  col("ts", "timestamptz"),
  col("request_id", "text"),
  col("tenant", "text"),
  col("key_id", "text"),
  col("route", "text"),
  col("endpoint", "text"),
  col("stream", "boolean"),
  col("provider", "text", true),
  col("model", "text", true),
  col("attempts", "integer"),
  col("status", "integer"),
  col("input_tokens", "bigint"),
  col("output_tokens", "bigint"),
  col("cache_read_tokens", "bigint"),
  col("cache_write_tokens", "bigint"),
  col("reserved_micro_usd", "bigint"),
  col("cost_micro_usd", "bigint"),
  col("usage_estimated", "boolean"),
  col("incomplete", "boolean"),
  col("session", "text", true),
  col("duration_ms", "bigint"),
  col("error", "text", true),
  col("upstream_endpoint", "text", true),
  col("trace_id", "text", true),
  col("budget", "text", true),
  col("cache_saved_micro_usd", "bigint"),
  col("moved_from", "text", true),
  col("moved_reason", "text", true),
]

/** The columns schema 3 added, as `ALTER TABLE … ADD COLUMN` takes them (rows before it: 0 and null). */
const SCHEMA_3_COLUMNS = [
  `"cache_saved_micro_usd" bigint NOT NULL DEFAULT 0`,
  `"moved_from" text`,
  `"moved_reason" text`,
]

/** `"name"`: a quoted identifier (names are checked by the config to be plain identifiers). */
export const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`

/** The table's name as SQL: `"table"` or `"schema"."table"`. */
export const quoteTable = (table: string): string => table.split(".").map(quoteIdent).join(".")

/** Index `index` in the schema of `table`, as SQL (an index lives in its table's schema). */
const quoteTableIn = (table: string, index: string): string =>
  table.includes(".") ? `${quoteIdent(table.split(".")[0]!)}.${quoteIdent(index)}` : quoteIdent(index)

/** The unqualified part of a table name, the prefix of its index names. */
const baseName = (table: string): string => table.split(".").at(-1)!

/** The hourly totals beside the table (`table_hourly`, in the same schema). */
export const hourlyTable = (table: string): string => `${table}_hourly`

/**
 * The columns of the hourly totals: one row per UTC hour and tenant, key,
 * route, provider and model (`''` for a record without a provider or model:
 * a key column cannot be null), with the sums the admin API reports.
 */
export const HOURLY_KEYS = ["hour", "tenant", "key_id", "route", "provider", "model"] as const
export const HOURLY_SUMS = [
  "requests",
  "errors",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "cost_micro_usd",
  "cache_saved_micro_usd",
] as const

/** The columns a tenant's records by time carry in their index (schema 2): what its queries sum. */
const TENANT_TS_INCLUDE =
  "session, status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_micro_usd"

/**
 * The indexes, each `[name, columns]`: every admin query is a time range,
 * alone or of one tenant, and the groupings the issue names (route, key,
 * model) have their own, so a month of one of them is an index range scan.
 * A tenant's by time includes the session and the sums, so a month of one
 * tenant's sessions (and the ends of its ranges) reads the index alone.
 */
export const indexes = (table: string): ReadonlyArray<readonly [string, string]> => {
  const base = baseName(table)
  return [
    [`${base}_ts`, "ts"],
    [`${base}_tenant_ts_sums`, `tenant, ts) INCLUDE (${TENANT_TS_INCLUDE}`],
    [`${base}_tenant_key_ts`, "tenant, key_id, ts"],
    [`${base}_route_ts`, "route, ts"],
    [`${base}_model_ts`, "model, ts"],
  ]
}

/**
 * The statements that bring a table of `from` (0: none) to
 * {@link SCHEMA_VERSION}, in order; each is safe to run again.
 */
export const migrationStatements = (table: string, from: number): ReadonlyArray<string> => {
  const name = quoteTable(table)
  const statements: Array<string> = []
  if (from < 1) {
    const schema = table.includes(".") ? table.split(".")[0]! : undefined
    if (schema !== undefined) statements.push(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`)
    const columns = COLUMNS.map(
      (c) =>
        `  ${quoteIdent(c.name)} ${c.type}${c.nullable ? "" : " NOT NULL"}${c.name === "request_id" ? " PRIMARY KEY" : ""}`,
    )
    statements.push(`CREATE TABLE IF NOT EXISTS ${name} (\n${columns.join(",\n")}\n)`)
    for (const [index, columns] of indexes(table)) {
      statements.push(`CREATE INDEX IF NOT EXISTS ${quoteIdent(index)} ON ${name} (${columns})`)
    }
    const hourly = quoteTable(hourlyTable(table))
    statements.push(
      `CREATE TABLE IF NOT EXISTS ${hourly} (\n  "hour" timestamptz NOT NULL,\n` +
        HOURLY_KEYS.slice(1)
          .map((k) => `  ${quoteIdent(k)} text NOT NULL,\n`)
          .join("") +
        HOURLY_SUMS.map((k) => `  ${quoteIdent(k)} bigint NOT NULL,\n`).join("") +
        `  PRIMARY KEY (${HOURLY_KEYS.map(quoteIdent).join(", ")})\n)`,
    )
    statements.push(
      `CREATE INDEX IF NOT EXISTS ${quoteIdent(`${baseName(table)}_hourly_tenant_hour`)} ON ${hourly} (tenant, "hour")`,
    )
    // Totals of rows already in the table (none when both are made together).
    statements.push(`${rollupInsert(table)} SELECT * FROM ${name}) ${rollupSelect(table)}`)
  } else {
    if (from < 2) {
      // 1 → 2: the tenant's index with the session and the sums, in place of the plain one.
      const [index, columns] = indexes(table)[1]!
      statements.push(`CREATE INDEX IF NOT EXISTS ${quoteIdent(index)} ON ${name} (${columns})`)
      statements.push(`DROP INDEX IF EXISTS ${quoteTableIn(table, `${baseName(table)}_tenant_ts`)}`)
    }
    if (from < 3) {
      // 2 → 3: columns with a constant default (PostgreSQL adds them without rewriting the table).
      for (const column of SCHEMA_3_COLUMNS)
        statements.push(`ALTER TABLE ${name} ADD COLUMN IF NOT EXISTS ${column}`)
      statements.push(
        `ALTER TABLE ${quoteTable(hourlyTable(table))} ADD COLUMN IF NOT EXISTS "cache_saved_micro_usd" bigint NOT NULL DEFAULT 0`,
      )
    }
  }
  statements.push(`COMMENT ON TABLE ${name} IS '${versionComment(SCHEMA_VERSION)}'`)
  return statements
}

/** `WITH new AS (`: the start of a statement whose rows `new` go into the hourly totals. */
const rollupInsert = (_table: string): string => "WITH new AS ("

/**
 * `INSERT INTO table_hourly SELECT … FROM new …`: adds the rows of `new` to
 * their hours' totals, in key order (so that copies adding to the same hours
 * take their row locks in one order).
 */
const rollupSelect = (table: string): string => {
  const hourly = quoteTable(hourlyTable(table))
  const keys = HOURLY_KEYS.map(quoteIdent).join(", ")
  const sums = HOURLY_SUMS.map(quoteIdent)
  const set = sums.map((c) => `${c} = ${hourly}.${c} + excluded.${c}`).join(", ")
  return (
    `INSERT INTO ${hourly} (${keys}, ${sums.join(", ")}) ` +
    `SELECT date_bin('1 hour', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00'), tenant, key_id, route, ` +
    `coalesce(provider, ''), coalesce(model, ''), count(*), count(*) FILTER (WHERE status < 200 OR status > 299), ` +
    `sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(cost_micro_usd), ` +
    `sum(cache_saved_micro_usd) ` +
    `FROM new GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6 ` +
    `ON CONFLICT (${keys}) DO UPDATE SET ${set}`
  )
}

/**
 * The insert of one batch, in one statement: the rows from one parameter, a
 * JSON array of records (`json_populate_recordset` maps each field to the
 * column of its name; fields the table has no column for are ignored), and
 * the hourly totals of the rows that were new. Rows already in the table
 * (sent before) are left alone and not counted again.
 */
export const insertStatement = (table: string): string => {
  const names = COLUMNS.map((c) => quoteIdent(c.name)).join(", ")
  const name = quoteTable(table)
  return (
    `${rollupInsert(table)}INSERT INTO ${name} (${names}) SELECT ${names} ` +
    `FROM json_populate_recordset(NULL::${name}, $1::json) ` +
    `ON CONFLICT (request_id) DO NOTHING RETURNING *) ${rollupSelect(table)}`
  )
}
