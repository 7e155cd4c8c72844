import { Clock, Context, Data, Effect, FiberSet, Layer, Result } from "effect"
import { dirname } from "node:path"
import { UsageFileError, UsageLog, type UsageLogService } from "../meter/UsageLog.js"
import type { UsageRecord } from "../meter/record.js"
import { ChunkedRows, openChunkFile } from "./chunks.js"
import { loadRows, toRow } from "./load.js"
import { startQuery, type UsageQuery, type UsageResult } from "./query.js"
import { startSeries, type Series, type SeriesQuery, type TooManyBuckets } from "./series.js"

/** The usage records could not be read (the usage database did not answer): 503 in the admin API. */
export class UsageUnavailable extends Data.TaggedError("UsageUnavailable")<{ readonly message: string }> {}

/** Size of the index, for logs and the admin API. */
export interface UsageIndexStats {
  readonly records: number
  /** Bytes of rows in memory (a few chunks; string tables not included). */
  readonly memoryBytes: number
  /** Bytes of the chunk file (46 per record written out). */
  readonly diskBytes: number
  readonly sessions: number
}

/**
 * The usage records of this process, for `/admin/usage`: the usage file as
 * it was at start plus every record appended since, kept in compact sorted
 * columns (46 bytes per record; see `columns.ts`) in chunks, of which only a
 * few are in memory and the others in a chunk file beside the usage file
 * (`chunks.ts`), so memory does not grow with the records and a query never
 * parses the usage file. Records written to the same file by other copies
 * after this one started are not seen until it restarts.
 */
export interface UsageIndexService {
  /** Adds one record (plain function: it runs once per request). A record with an unparsable `ts` is ignored. */
  readonly add: (record: UsageRecord) => void
  /** Totals (and groups) of the records matching `query`. */
  readonly query: (query: UsageQuery) => Effect.Effect<UsageResult, UsageUnavailable>
  /** The time series of `query` (`until` defaults to the clock's now), for `/admin/usage/series`. */
  readonly series: (query: SeriesQuery) => Effect.Effect<Series, TooManyBuckets | UsageUnavailable>
  readonly stats: () => UsageIndexStats
}

export class UsageIndex extends Context.Service<UsageIndex, UsageIndexService>()(
  "tollgate/admin/UsageIndex",
) {}

/** The index over `rows` (tests, and `layer`). */
export const make = (rows: ChunkedRows): UsageIndexService => ({
  add: (record) => {
    const row = toRow(rows.tables, record)
    // Records arrive in near-`ts` order (a record is written when its request ends): the insert moves only the newer rows.
    if (row !== undefined) rows.add(row)
  },
  query: Effect.fn("UsageIndex.query")(function* (query: UsageQuery) {
    const run = startQuery(rows.tables, query)
    yield* rows.scan(query.since, query.until, run.visit)
    return run.result()
  }),
  series: Effect.fn("UsageIndex.series")(function* (query: SeriesQuery) {
    const now = yield* Clock.currentTimeMillis
    const started = startSeries(rows.tables, query, now, (mine, until) => rows.firstBefore(mine, until))
    if (Result.isFailure(started)) return yield* started.failure
    const run = started.success
    yield* rows.scan(run.since, run.until, run.visit)
    return run.result()
  }),
  stats: () => ({
    records: rows.size,
    memoryBytes: rows.memoryBytes(),
    diskBytes: rows.diskBytes(),
    sessions: rows.tables.sessions.names.length - 1,
  }),
})

const errorMessage = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const load = Effect.fn("UsageIndex.load")(function* (file: string) {
  const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  // Logs a chunk that could not be written (it stays in memory) with the layer's logger.
  const runFork = yield* FiberSet.makeRuntime<never>()
  const chunkFile = yield* openChunkFile(dirname(file)).pipe(
    Effect.mapError(
      (cause) =>
        new UsageFileError({ file, operation: "open", message: `usage index file: ${errorMessage(cause)}` }),
    ),
  )
  const rows = new ChunkedRows({
    file: chunkFile,
    onWriteError: (cause) =>
      runFork(
        Effect.logError("usage index chunk not written; it stays in memory").pipe(
          Effect.annotateLogs({ file, error: errorMessage(cause) }),
        ),
      ),
  })
  const loaded = yield* Effect.tryPromise({
    try: () => loadRows(file, rows),
    catch: (cause) => new UsageFileError({ file, operation: "read", message: errorMessage(cause) }),
  })
  const end = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  if (loaded.skipped > 0) {
    yield* Effect.logWarning("usage index skipped lines that are not whole records").pipe(
      Effect.annotateLogs({ file, skipped: loaded.skipped, lines: loaded.skippedLines.join(",") }),
    )
  }
  const service = make(rows)
  yield* Effect.logInfo("usage index loaded").pipe(
    Effect.annotateLogs({ file, ...service.stats(), ms: end - start }),
  )
  return service
})

/**
 * The index of `file` (absolute path), read once while the layer is built
 * (a missing file is empty; torn lines are skipped with a warning; an
 * unreadable file, or a directory where the chunk file cannot be created,
 * fails the layer with `UsageFileError`). The chunk file is closed (and
 * gone) when the layer's scope closes.
 */
export const layer = (file: string): Layer.Layer<UsageIndex, UsageFileError> =>
  Layer.effect(UsageIndex, load(file))

/**
 * `log` with every appended or queued record also added to the index, in
 * the same step (after it, so an index failure cannot cost the record), so
 * a client that got its response always finds its record in `/admin/usage`.
 */
export const withIndex = <E, R>(log: Layer.Layer<UsageLog, E, R>): Layer.Layer<UsageLog, E, R | UsageIndex> =>
  Layer.effect(
    UsageLog,
    Effect.gen(function* () {
      const inner = yield* UsageLog
      const index = yield* UsageIndex
      // Logs an index failure with the layer's logger, from the request's synchronous step.
      const runFork = yield* FiberSet.makeRuntime<never>()
      /** Adds the record to the index; a failure there is logged (the record is in the file, or queued for it). */
      const addToIndex = (record: UsageRecord): void => {
        try {
          index.add(record)
        } catch (cause) {
          // Only /admin/usage misses the record until a restart.
          runFork(
            Effect.logError("usage record not added to the usage index").pipe(
              Effect.annotateLogs({ request_id: record.request_id, error: String(cause) }),
            ),
          )
        }
      }
      return {
        append: (record) =>
          Effect.andThen(
            inner.append(record),
            Effect.sync(() => addToIndex(record)),
          ),
        queue: (record) => {
          inner.queue(record)
          addToIndex(record)
        },
        afterWrite: inner.afterWrite,
      } satisfies UsageLogService
    }),
  ).pipe(Layer.provide(log))
