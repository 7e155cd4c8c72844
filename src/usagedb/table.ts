/**
 * The usage table (SPEC Part 3 "Usage in a database"): one row per usage
 * record, the columns named as the record's fields, `request_id` the primary
 * key, and the indexes the admin API's queries use (ADR 0069). The schema
 * has a version, kept in the table's comment, so that `serve` can refuse a
 * table older than it needs and `tollgate usage migrate` knows what to add.
 */

/** The schema version this build writes and reads. */
export const SCHEMA_VERSION = 1

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
]

/** `"name"`: a quoted identifier (names are checked by the config to be plain identifiers). */
export const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`

/** The table's name as SQL: `"table"` or `"schema"."table"`. */
export const quoteTable = (table: string): string => table.split(".").map(quoteIdent).join(".")

/** The unqualified part of a table name, the prefix of its index names. */
const baseName = (table: string): string => table.split(".").at(-1)!

/**
 * The indexes, each `[name, columns]`: every admin query is a time range,
 * alone or of one tenant, and the groupings the issue names (route, key,
 * model) have their own, so a month of one of them is an index range scan.
 */
export const indexes = (table: string): ReadonlyArray<readonly [string, string]> => {
  const base = baseName(table)
  return [
    [`${base}_ts`, "ts"],
    [`${base}_tenant_ts`, "tenant, ts"],
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
  }
  statements.push(`COMMENT ON TABLE ${name} IS '${versionComment(SCHEMA_VERSION)}'`)
  return statements
}

/**
 * The multi-row insert of one batch: one array parameter per column
 * (`unnest`), so the statement text is the same for every batch size, and
 * rows already in the table (sent before, by this copy) are left alone.
 */
export const insertStatement = (table: string): string => {
  const names = COLUMNS.map((c) => quoteIdent(c.name)).join(", ")
  const arrays = COLUMNS.map((c, i) => `$${i + 1}::${c.type}[]`).join(", ")
  return `INSERT INTO ${quoteTable(table)} (${names}) SELECT * FROM unnest(${arrays}) ON CONFLICT (request_id) DO NOTHING`
}
