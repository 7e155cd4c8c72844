import { Clock, Context, Effect, FiberSet, Layer } from "effect"
import { UsageFileError, UsageLog, type UsageLogService } from "../meter/UsageLog.js"
import type { UsageRecord } from "../meter/record.js"
import type { Columns } from "./columns.js"
import { loadColumns, toRow } from "./load.js"
import { runQuery, type UsageQuery, type UsageResult } from "./query.js"
import { runSeries, type Series, type SeriesQuery, type TooManyBuckets } from "./series.js"

/** Size of the index, for logs and the admin API. */
export interface UsageIndexStats {
  readonly records: number
  /** Bytes of the columns (allocated capacity; string tables not included). */
  readonly columnBytes: number
  readonly sessions: number
}

/**
 * The usage records of this process in memory, for `/admin/usage`: the
 * usage file as it was at start plus every record appended since, kept in
 * compact sorted columns (42 bytes per record; see `columns.ts`), so a query
 * reads memory, never the file. Records written to the same file by other
 * copies after this one started are not seen until it restarts.
 */
export interface UsageIndexService {
  /** Adds one record (plain function: it runs once per request). A record with an unparsable `ts` is ignored. */
  readonly add: (record: UsageRecord) => void
  /** Totals (and groups) of the records matching `query`. */
  readonly query: (query: UsageQuery) => Effect.Effect<UsageResult>
  /** The time series of `query` (`until` defaults to the clock's now), for `/admin/usage/series`. */
  readonly series: (query: SeriesQuery) => Effect.Effect<Series, TooManyBuckets>
  readonly stats: () => UsageIndexStats
}

export class UsageIndex extends Context.Service<UsageIndex, UsageIndexService>()(
  "tollgate/admin/UsageIndex",
) {}

/** The index over already built columns (tests, and `layer`). */
export const make = (columns: Columns): UsageIndexService => ({
  add: (record) => {
    const row = toRow(columns, record)
    // Records arrive in near-`ts` order (a record is written when its request ends): the insert moves only the newer rows.
    if (row !== undefined) columns.insert(row)
  },
  query: Effect.fn("UsageIndex.query")((query: UsageQuery) => Effect.sync(() => runQuery(columns, query))),
  series: Effect.fn("UsageIndex.series")((query: SeriesQuery) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fromResult(runSeries(columns, query, now))),
  ),
  stats: () => ({
    records: columns.size,
    columnBytes: columns.bytes(),
    sessions: columns.sessions.names.length - 1,
  }),
})

const errorMessage = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const load = Effect.fn("UsageIndex.load")(function* (file: string) {
  const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const loaded = yield* Effect.tryPromise({
    try: () => loadColumns(file),
    catch: (cause) => new UsageFileError({ file, operation: "read", message: errorMessage(cause) }),
  })
  const end = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  if (loaded.skipped > 0) {
    yield* Effect.logWarning("usage index skipped lines that are not whole records").pipe(
      Effect.annotateLogs({ file, skipped: loaded.skipped, lines: loaded.skippedLines.join(",") }),
    )
  }
  const service = make(loaded.columns)
  yield* Effect.logInfo("usage index loaded").pipe(
    Effect.annotateLogs({ file, ...service.stats(), ms: end - start }),
  )
  return service
})

/**
 * The index of `file` (absolute path), read once while the layer is built
 * (a missing file is empty; torn lines are skipped with a warning; an
 * unreadable file fails the layer with `UsageFileError`).
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
