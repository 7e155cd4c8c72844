/**
 * The usage database (SPEC Part 3): PostgreSQL through Effect's SQL stack
 * (`effect/sql` and `@effect/sql-pg`, its own wire-protocol client). This
 * service is the only place that talks to it: it inserts batches of
 * records, runs the admin API's queries, and reads and migrates the
 * table's schema. Its errors are one tagged error with a `reason`; their
 * messages never hold the URL's password.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Duration, Effect, Layer, Redacted } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import type { SqlError } from "effect/sql/SqlError"
import { insertStatement, migrationStatements, SCHEMA_VERSION, versionOf } from "./table.js"

/** Why the database did not answer as asked. */
export type UsageDbReason = "connection" | "authentication" | "schema" | "timeout" | "data" | "query"

export class UsageDbError extends Data.TaggedError("UsageDbError")<{
  readonly reason: UsageDbReason
  readonly message: string
}> {}

/** Rows as the database returns them: a column name to a value. */
export type DbRow = Readonly<Record<string, unknown>>

export interface UsageDatabaseService {
  /** The table, as configured (`schema.table` or `table`). */
  readonly table: string
  /**
   * Inserts records, each the JSON text of one (a line of the usage file),
   * and adds them to the hourly totals, in one statement (one transaction);
   * records whose `request_id` is already in the table are left as they are
   * and not counted again. The database parses the texts: a text that is not
   * a record it can hold fails the whole batch with reason `data`. Fails
   * after `timeoutMs` (default 10 s) with reason `timeout`.
   */
  readonly insert: (texts: ReadonlyArray<string>, timeoutMs?: number) => Effect.Effect<void, UsageDbError>
  /** The table's schema version: 0 when there is no table, undefined for a table Tollgate did not make. */
  readonly schemaVersion: Effect.Effect<number | undefined, UsageDbError>
  /** Creates or upgrades the table and its indexes; returns the version found before. */
  readonly migrate: Effect.Effect<number, UsageDbError>
  /** Runs a read-only query with parameters (the admin API's), failing after `timeoutMs` (default 30 s). */
  readonly select: (
    sql: string,
    params: ReadonlyArray<unknown>,
    timeoutMs?: number,
  ) => Effect.Effect<ReadonlyArray<DbRow>, UsageDbError>
}

export class UsageDatabase extends Context.Service<UsageDatabase, UsageDatabaseService>()(
  "tollgate/usagedb/UsageDatabase",
) {}

/** `text` with every occurrence of `secret` (and its URL-encoded form) replaced. */
const scrub = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = text
  for (const secret of secrets) if (secret.length > 0) out = out.split(secret).join("***")
  return out
}

/** The password of a `postgres://` URL, raw and decoded, to keep out of messages. */
const secretsOf = (url: string): ReadonlyArray<string> => {
  try {
    const password = new URL(url).password
    return password === "" ? [] : [password, decodeURIComponent(password)]
  } catch {
    return [url]
  }
}

/** The SQLSTATE the server sent with an error, when it sent one. */
const sqlStateOf = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

const reasonOf = (error: SqlError): UsageDbReason => {
  const state = sqlStateOf(error)
  // Class 22 (data exception) and 23 (integrity): the rows sent, not the database, are at fault.
  if (state !== undefined && (state.startsWith("22") || state.startsWith("23"))) return "data"
  switch (error.reason._tag) {
    case "ConnectionError":
      return "connection"
    case "AuthenticationError":
    case "AuthorizationError":
      return "authentication"
    case "StatementTimeoutError":
    case "LockTimeoutError":
      return "timeout"
    case "SqlSyntaxError":
      return "schema"
    default:
      return "query"
  }
}

/** The words of a SqlError: its reason's message, and its cause's when that says more. */
const describe = (error: SqlError): string => {
  const reason = error.reason
  const cause = reason.cause instanceof Error ? reason.cause.message : undefined
  const message = reason.message ?? error.message
  return cause !== undefined && !message.includes(cause) ? `${message}: ${cause}` : message
}

const make = Effect.fnUntraced(function* (url: Redacted.Redacted<string>, table: string) {
  const secrets = secretsOf(Redacted.value(url))
  const client = yield* PgClient.make({
    url,
    applicationName: "tollgate",
    // A confirmed batch moves the checkpoint: its commit must survive a crash of the server, whatever the
    // server's default (synchronous_commit = off loses the last commits it acknowledged).
    startupParameters: { synchronous_commit: "on" },
    maxConnections: 4,
    connectTimeout: Duration.seconds(5),
    acquireTimeout: Duration.seconds(10),
    idleTimeout: Duration.seconds(60),
  }).pipe(Effect.mapError((error) => toError(error, secrets)))
  const insertSql = insertStatement(table)

  const run = <A>(
    effect: Effect.Effect<A, SqlError>,
    timeoutMs: number,
    what: string,
  ): Effect.Effect<A, UsageDbError> =>
    effect.pipe(
      Effect.mapError((error) => toError(error, secrets)),
      Effect.timeoutOrElse({
        duration: Duration.millis(timeoutMs),
        orElse: () =>
          Effect.fail(
            new UsageDbError({ reason: "timeout", message: `${what}: no answer within ${timeoutMs} ms` }),
          ),
      }),
    )

  // One text parameter, a JSON array of the records as the file holds them: no parsing or encoding of
  // fields here (ADR 0069), and the statement's text is the same whatever the batch's size.
  const insert = (texts: ReadonlyArray<string>, timeoutMs = 10_000) =>
    Effect.suspend(() =>
      Effect.asVoid(run(client.unsafe(insertSql, [`[${texts.join(",")}]`]).raw, timeoutMs, "insert")),
    )

  const schemaVersion = run(
    client.unsafe<{ exists: boolean; comment: string | null }>(
      "SELECT to_regclass($1) IS NOT NULL AS exists, obj_description(to_regclass($1), 'pg_class') AS comment",
      [table],
    ),
    10_000,
    "schema check",
  ).pipe(Effect.map((rows) => (rows[0]?.exists !== true ? 0 : versionOf(rows[0].comment))))

  const migrate = Effect.gen(function* () {
    const from = yield* schemaVersion
    if (from === undefined) {
      return yield* new UsageDbError({
        reason: "schema",
        message: `table ${table} exists but was not made by tollgate (no schema version in its comment); name another usage.database.table`,
      })
    }
    if (from > SCHEMA_VERSION) {
      return yield* new UsageDbError({
        reason: "schema",
        message: `table ${table} has schema ${from}, newer than this tollgate's ${SCHEMA_VERSION}`,
      })
    }
    if (from === SCHEMA_VERSION) return from
    yield* run(
      client.withTransaction(
        Effect.forEach(migrationStatements(table, from), (statement) => client.unsafe(statement), {
          discard: true,
        }),
      ),
      120_000,
      "migrate",
    )
    return from
  })

  const select = (sql: string, params: ReadonlyArray<unknown>, timeoutMs = 30_000) =>
    run(client.unsafe<DbRow>(sql, params), timeoutMs, "query")

  return UsageDatabase.of({ table, insert, schemaVersion, migrate, select })
})

const toError = (error: SqlError, secrets: ReadonlyArray<string>): UsageDbError =>
  new UsageDbError({ reason: reasonOf(error), message: scrub(describe(error), secrets) })

/**
 * The database at `url` (a pool of up to 4 connections, opened when first
 * used, so building the layer never waits for the database), with `table`.
 */
export const layer = (
  url: Redacted.Redacted<string>,
  table: string,
): Layer.Layer<UsageDatabase, UsageDbError> =>
  Layer.effect(UsageDatabase, make(url, table)).pipe(Layer.provide(Reactivity.layer))
