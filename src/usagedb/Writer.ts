/**
 * The usage database's writer (SPEC Part 3, ADR 0069): one fiber per copy
 * that reads the usage file from the checkpoint on, a batch at a time, in
 * order, inserts each batch (rows already there are left alone), and moves
 * the checkpoint once the database has confirmed it. The file is the spool:
 * nothing the request path does waits for the database, a database that is
 * down or slow only makes the backlog in the file longer, and after a
 * restart or an outage the writer goes on from the checkpoint. A record is
 * in the table exactly once: sent again after a crash between the insert
 * and the checkpoint, it is ignored by the primary key.
 */
import { Cause, Clock, Context, Data, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { UsageDatabaseConfig } from "../config/model.js"
import { decodeRecord, NUMBER_FIELDS, TEXT_FIELDS, type UsageRecord } from "../meter/record.js"
import { UsageLog, type UsageLogService } from "../meter/UsageLog.js"
import { UsageBacklog } from "../ops/UsageBacklog.js"
import { UsageDbStats } from "../ops/UsageDbStats.js"
import { UsageDatabase, UsageDbError } from "./Database.js"
import { checkpointPath, readCheckpoint, SpoolReader, writeCheckpoint, type Checkpoint } from "./spool.js"
import { SCHEMA_VERSION } from "./table.js"

/** The database refused the start: no table, an old schema, or wrong credentials (exit 2, one line). */
export class UsageDbStartError extends Data.TaggedError("UsageDbStartError")<{ readonly message: string }> {}

/** Records per insert. */
export const BATCH_RECORDS = 1000
/** How often an idle writer looks for new records in the file. */
const POLL_MS = 100
/** Backoff after a failed batch: from the first to the last, doubling. */
const BACKOFF_FIRST_MS = 250
const BACKOFF_MAX_MS = 5000
/** How often the checkpoint is written while batches are confirmed (a crash sends up to this much again). */
const CHECKPOINT_MS = 1000
/** How long a shutdown waits for the database to take what is left (it stays in the file either way). */
const FLUSH_AT_CLOSE_MS = 5000

export interface UsageDbWriterService {
  /** Counts one record handed to the usage log (a plain function: it runs once per request). */
  readonly appended: () => void
}

export class UsageDbWriter extends Context.Service<UsageDbWriter, UsageDbWriterService>()(
  "tollgate/usagedb/UsageDbWriter",
) {}

/** The database and table as the checkpoint names them: `host:port/database/table`, no credentials. */
export const targetOf = (url: string, table: string): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || "5432"}${u.pathname}/${table}`
  } catch {
    return `?/${table}`
  }
}

/** A UTF-16 surrogate not in a pair (in unicode mode a pair is one code point, not `Cs`). */
const LONE_SURROGATE = /\p{Cs}/u

/** Whether the table can hold `record` as it is: integer amounts, a time, text without NUL or a lone surrogate (PostgreSQL refuses both). */
export const insertable = (record: UsageRecord): boolean => {
  for (const field of NUMBER_FIELDS) if (!Number.isSafeInteger(record[field])) return false
  if (!Number.isSafeInteger(record.cache_saved_micro_usd)) return false
  if (record.attempts > 2_147_483_647 || record.status > 2_147_483_647) return false
  for (const field of TEXT_FIELDS) {
    const value = record[field]
    if (value !== null && (value.includes("\u0000") || LONE_SURROGATE.test(value))) return false
  }
  return Number.isFinite(Date.parse(record.ts))
}

/** What `checkAtStart` says of a schema version (undefined when it is the one needed). */
const schemaProblem = (
  version: number | undefined,
  table: string,
  configPath: string,
): string | undefined => {
  const migrate = `run \`tollgate usage migrate --config ${configPath}\``
  if (version === 0) return `usage database: no table ${table}; ${migrate} first`
  if (version === undefined)
    return `usage database: table ${table} was not made by tollgate (no schema version in its comment); name another usage.database.table`
  if (version < SCHEMA_VERSION)
    return `usage database: table ${table} has schema ${version}, older than this tollgate needs (${SCHEMA_VERSION}); ${migrate}`
  if (version > SCHEMA_VERSION)
    return `usage database: table ${table} has schema ${version}, newer than this tollgate (${SCHEMA_VERSION}); upgrade tollgate`
  return undefined
}

/**
 * The check `serve` makes before it listens: the table's schema is the one
 * this build writes. Fails (exit 2, one line) on a missing or older table
 * and on refused credentials (naming the variable, never the URL); a
 * database that does not answer is only a warning: records wait in the file.
 * Returns whether the schema was seen to be right.
 */
const checkAtStart = (database: UsageDatabaseConfig, configPath: string) =>
  Effect.gen(function* () {
    const db = yield* UsageDatabase
    const version = yield* db.schemaVersion.pipe(
      Effect.catch((error) => {
        if (error.reason === "authentication")
          return Effect.fail(
            new UsageDbStartError({
              message: `usage database: the database refused the credentials in ${database.urlEnv} (${error.message})`,
            }),
          )
        return Effect.as(
          Effect.logWarning("usage database not answering at start; records wait in the usage file").pipe(
            Effect.annotateLogs({ table: database.table, reason: error.reason, error: error.message }),
          ),
          null,
        )
      }),
    )
    if (version === null) return false
    const problem = schemaProblem(version, database.table, configPath)
    if (problem !== undefined) return yield* new UsageDbStartError({ message: problem })
    return true
  })

const errorMessage = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const make = Effect.fnUntraced(function* (
  usageFile: string,
  database: UsageDatabaseConfig,
  configPath: string,
  url: string,
) {
  const db = yield* UsageDatabase
  const stats = yield* UsageDbStats
  // Records the usage log gave up (a full disk and a full backlog, ADR 0070) never reach the file: not pending.
  const usageBacklog = Option.getOrUndefined(yield* Effect.serviceOption(UsageBacklog))
  let droppedSeen = usageBacklog?.dropped ?? 0
  let verified = yield* checkAtStart(database, configPath)

  const target = targetOf(url, database.table)
  const checkpointFile = checkpointPath(usageFile)
  const saved = readCheckpoint(checkpointFile)
  const reader = new SpoolReader(usageFile, 0)
  // Another file (rotated, replaced) or another database: everything in the file is sent (the key drops repeats).
  const ino = yield* Effect.tryPromise(() => reader.start()).pipe(Effect.orElseSucceed(() => -1))
  if (saved !== undefined && saved.target === target && saved.ino === ino) reader.offset = saved.offset
  const backlog = yield* Effect.tryPromise(() => reader.countLines()).pipe(Effect.orElseSucceed(() => 0))
  stats.pending = backlog
  if (backlog > 0) {
    yield* Effect.logInfo("usage database: records of the usage file not confirmed yet; sending them").pipe(
      Effect.annotateLogs({ table: database.table, pending: backlog, from_offset: reader.offset }),
    )
  }

  /** The outage being lived through: since when, and the first error; undefined while the database answers. */
  let episode: { readonly since: number; errors: number } | undefined
  let schemaLogged = false
  let checkpointFailing = false

  const failed = (error: UsageDbError) =>
    Effect.gen(function* () {
      stats.errors++
      if (episode !== undefined) {
        episode.errors++
        return
      }
      episode = { since: yield* Clock.currentTimeMillis, errors: 1 }
      yield* Effect.logWarning("usage database not answering; records wait in the usage file").pipe(
        Effect.annotateLogs({
          table: database.table,
          reason: error.reason,
          error: error.message,
          pending: stats.pending,
        }),
      )
    })

  const recovered = Effect.gen(function* () {
    if (episode === undefined) return
    const now = yield* Clock.currentTimeMillis
    yield* Effect.logInfo("usage database answering again; sending the records that waited").pipe(
      Effect.annotateLogs({
        table: database.table,
        down_ms: now - episode.since,
        failed_batches: episode.errors,
        pending: stats.pending,
      }),
    )
    episode = undefined
  })

  /** The checkpoint confirmed but not yet written, and when one was last written (epoch ms). */
  let unsaved: Checkpoint | undefined
  let savedAt = 0

  /**
   * Writes the checkpoint when one is due (at most every CHECKPOINT_MS, or
   * at once with `now`): a crash in between sends up to that much again,
   * which the primary key drops. A checkpoint that cannot be written costs
   * only repeats after a restart.
   */
  const save = (now: boolean) =>
    Effect.gen(function* () {
      const checkpoint = unsaved
      if (checkpoint === undefined) return
      const at = yield* Clock.currentTimeMillis
      if (!now && at - savedAt < CHECKPOINT_MS) return
      unsaved = undefined
      savedAt = at
      yield* writeOrWarn(checkpoint)
    })

  /** Moves the reader past a confirmed batch, and the checkpoint when due. */
  const confirm = (end: number, lines: number) =>
    Effect.suspend(() => {
      reader.offset = end
      stats.pending = Math.max(0, stats.pending - lines)
      unsaved = { offset: end, ino: reader.inode, target }
      return save(false)
    })

  const writeOrWarn = (checkpoint: Checkpoint) =>
    Effect.suspend(() => {
      try {
        writeCheckpoint(checkpointFile, checkpoint)
        checkpointFailing = false
        return Effect.void
      } catch (cause) {
        if (checkpointFailing) return Effect.void
        checkpointFailing = true
        return Effect.logWarning(
          "usage database checkpoint not written; a restart sends some records again",
        ).pipe(Effect.annotateLogs({ file: checkpointFile, error: errorMessage(cause) }))
      }
    })

  const skippedLines = (lines: number, end: number) =>
    Effect.logWarning(
      "usage database: lines of the usage file that are not records it can hold, skipped",
    ).pipe(Effect.annotateLogs({ file: usageFile, lines, before_offset: end }))

  /**
   * A batch the database refused as data: only the lines that are records
   * it can hold (parsed and checked here), and, should it refuse those too,
   * one at a time, each refused one skipped. `sent`, or `failed` when the
   * database stopped answering meanwhile (the batch is read again).
   */
  const sendChecked = (texts: ReadonlyArray<string>, end: number) =>
    Effect.gen(function* () {
      const records = texts.filter((text) => {
        const record = decodeRecord(text)
        return record !== undefined && insertable(record)
      })
      let refused = texts.length - records.length
      const whole = records.length === 0 ? undefined : yield* Effect.result(db.insert(records))
      if (whole?._tag === "Failure") {
        if (whole.failure.reason !== "data") {
          yield* failed(whole.failure)
          return "failed" as const
        }
        for (const text of records) {
          const one = yield* Effect.result(db.insert([text]))
          if (one._tag === "Success") continue
          if (one.failure.reason !== "data") {
            yield* failed(one.failure)
            return "failed" as const
          }
          refused++
        }
      }
      if (refused > 0) yield* skippedLines(refused, end)
      return "sent" as const
    })

  /**
   * One batch: `idle` (nothing new), `sent`, `full` (sent, and as large as
   * a batch may be: more is likely waiting), or `failed` (the batch stays in
   * the file for the next try).
   */
  const step: Effect.Effect<"idle" | "sent" | "full" | "failed"> = Effect.gen(function* () {
    if (usageBacklog !== undefined && usageBacklog.dropped !== droppedSeen) {
      stats.pending = Math.max(0, stats.pending - (usageBacklog.dropped - droppedSeen))
      droppedSeen = usageBacklog.dropped
    }
    if (!verified) {
      const version = yield* Effect.result(db.schemaVersion)
      if (version._tag === "Failure") {
        yield* failed(version.failure)
        return "failed"
      }
      const problem = schemaProblem(version.success, database.table, configPath)
      if (problem !== undefined) {
        if (!schemaLogged)
          yield* Effect.logError(`${problem}; records wait in the usage file`).pipe(
            Effect.annotateLogs({ table: database.table }),
          )
        schemaLogged = true
        stats.errors++
        return "failed"
      }
      verified = true
    }
    const read = yield* Effect.result(Effect.tryPromise(() => reader.next(BATCH_RECORDS)))
    if (read._tag === "Failure") {
      yield* failed(
        new UsageDbError({ reason: "query", message: `usage file: ${errorMessage(read.failure)}` }),
      )
      return "failed"
    }
    const batch = read.success
    if (batch === undefined) return "idle"
    if (batch.texts.length > 0) {
      const sent = yield* Effect.result(db.insert(batch.texts))
      if (sent._tag === "Failure") {
        if (sent.failure.reason !== "data") {
          yield* failed(sent.failure)
          return "failed"
        }
        // A line the database refused (torn by a crash, or not a record): the batch again without it.
        const kept = yield* sendChecked(batch.texts, batch.end)
        if (kept === "failed") return "failed"
      }
    }
    if (batch.skipped > 0) yield* skippedLines(batch.skipped, batch.end)
    yield* confirm(batch.end, batch.lines)
    yield* recovered
    return batch.lines >= BATCH_RECORDS ? "full" : "sent"
  })

  /** `step`, with a defect (a bug, or a driver that threw) logged and taken as a failed batch: the loop never dies. */
  const guardedStep = step.pipe(
    Effect.catchCause((cause) =>
      Effect.as(
        Effect.andThen(
          Effect.sync(() => {
            stats.errors++
          }),
          Effect.logError("usage database writer: unexpected failure; the batch is tried again").pipe(
            Effect.annotateLogs({ cause: Cause.pretty(cause) }),
          ),
        ),
        "failed" as const,
      ),
    ),
  )

  const loop = Effect.gen(function* () {
    let backoff = BACKOFF_FIRST_MS
    for (;;) {
      const outcome = yield* guardedStep
      if (outcome === "full") {
        backoff = BACKOFF_FIRST_MS
        continue
      }
      // A batch that was not full: wait for more records, so that a steady trickle is sent in few inserts.
      if (outcome === "sent" || outcome === "idle") {
        backoff = BACKOFF_FIRST_MS
        yield* save(false)
        yield* Effect.sleep(Duration.millis(POLL_MS))
        continue
      }
      yield* Effect.sleep(Duration.millis(backoff))
      backoff = Math.min(backoff * 2, BACKOFF_MAX_MS)
    }
  })

  // Closing: after the loop is interrupted (added first, so it runs last), what is left goes to a database
  // that answers, for up to FLUSH_AT_CLOSE_MS; the rest waits in the file for the next start.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      if (episode === undefined && verified) {
        for (;;) {
          const outcome = yield* step
          if (outcome !== "sent" && outcome !== "full") break
        }
      }
    }).pipe(
      Effect.timeout(Duration.millis(FLUSH_AT_CLOSE_MS)),
      Effect.ignore,
      Effect.andThen(save(true)),
      Effect.andThen(Effect.promise(() => reader.close())),
    ),
  )
  yield* Effect.forkScoped(loop)

  return UsageDbWriter.of({
    appended: () => {
      stats.pending++
    },
  })
})

/**
 * The writer of `usage.database`: checks the table at start (fails with
 * `UsageDbStartError` on a missing or old schema or refused credentials),
 * then sends the usage file's records from the checkpoint on, until the
 * layer closes (then what the database takes within 5 s).
 */
export const layer = (
  usageFile: string,
  database: UsageDatabaseConfig,
  configPath: string,
  url: Redacted.Redacted<string>,
): Layer.Layer<UsageDbWriter, UsageDbStartError, UsageDatabase | UsageDbStats> =>
  Layer.effect(UsageDbWriter, make(usageFile, database, configPath, Redacted.value(url)))

/** `log` with every record also counted as waiting for the database (`tollgate_usage_db_pending_records`). */
export const withWriter = <E, R>(
  log: Layer.Layer<UsageLog, E, R>,
): Layer.Layer<UsageLog, E, R | UsageDbWriter> =>
  Layer.effect(
    UsageLog,
    Effect.gen(function* () {
      const inner = yield* UsageLog
      const writer = yield* UsageDbWriter
      return {
        append: (record) => Effect.andThen(inner.append(record), Effect.sync(writer.appended)),
        queue: (record) => {
          inner.queue(record)
          writer.appended()
        },
        afterWrite: inner.afterWrite,
      } satisfies UsageLogService
    }),
  ).pipe(Layer.provide(log))
