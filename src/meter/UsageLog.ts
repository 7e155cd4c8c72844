/**
 * The usage-record log: appends one JSON line per request to `usage.file`,
 * keeping a bounded backlog while the file refuses writes (ADR 0070). Reading
 * the file back is in ./usageFile.ts.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Clock, Context, Duration, Effect, FiberSet, Layer, Option } from "effect"
import { UsageBacklog, type UsageBacklogCounts, zeroCounts } from "../ops/UsageBacklog.js"
import { PartialWrite, writeAllSync } from "../ops/writeAll.js"
import { encodeRecord, type UsageRecord } from "./record.js"
import { errorMessage, isNotFound, UsageFileError } from "./usageFile.js"

export { MAX_RECORD_LINE_BYTES, readUsageFile, UsageFileError, type UsageFileContents } from "./usageFile.js"

/** Appends usage records to the usage file. */
export interface UsageLogService {
  /**
   * Appends one record as one line. Completes once the line was handed to
   * the OS, so a record written before the response ends is readable by the
   * client that got the response. Concurrent appends never interleave.
   * Never fails: on a write error the line is kept in memory, in order,
   * with every record after it (up to `usage.backlog_max_bytes`; past it
   * new records are dropped and counted), the file is reopened and the
   * backlog written once a second until the file takes it; the episode is
   * logged, not each record (ADR 0070).
   */
  readonly append: (record: UsageRecord) => Effect.Effect<void>
  /**
   * Queues one record: the records queued in one event-loop turn are
   * written together, with one write(2), before the next turn's I/O
   * (`setImmediate`), and before any callback of `afterWrite` runs
   * (ADR 0037). Never fails: a write error is handled as with `append` and
   * logged by the write.
   */
  readonly queue: (record: UsageRecord) => void
  /** Runs `f` once every record queued so far is in the OS (at once when none is waiting). */
  readonly afterWrite: (f: () => void) => void
}

/** What a synchronous step leaves to run as an Effect (the logging of a step that threw), or undefined. */
type Leftover = Effect.Effect<void> | undefined

/** `a`, then `b`. */
const andThen = (a: Leftover, b: Leftover): Leftover =>
  a === undefined ? b : b === undefined ? a : Effect.andThen(a, b)

/** True when the file exists, is not empty, and its last byte is not "\n" (a line torn by a crash). */
const endsTorn = async (file: string): Promise<boolean> => {
  let handle: fs.promises.FileHandle
  try {
    handle = await fs.promises.open(file, "r")
  } catch (cause) {
    if (isNotFound(cause)) return false
    throw cause
  }
  try {
    const { size } = await handle.stat()
    if (size === 0) return false
    const last = Buffer.alloc(1)
    await handle.read(last, 0, 1, size - 1)
    return last[0] !== 0x0a
  } finally {
    await handle.close()
  }
}

/** The default of `usage.backlog_max_bytes` (ADR 0070). */
export const DEFAULT_BACKLOG_MAX_BYTES = 4 * 1024 * 1024

/** How often a backlog is written again while the file refuses writes. */
const RETRY_MS = 1_000
/** How often an episode that lasts is logged again. */
const REPORT_MS = 60_000

/** A time the file refused writes: from when, the last error, and what it did to records. */
interface Episode {
  since: number
  error: string
  /** Records kept in memory during the episode (written late once the file takes them). */
  kept: number
  /** `counts.dropped` when the episode began. */
  readonly droppedBefore: number
  /** Whether the backlog filled during the episode (logged once). */
  filled: boolean
  lastReport: number
}

export interface UsageLogOptions {
  /** `usage.backlog_max_bytes`: the most bytes of records kept in memory while the file refuses writes. */
  readonly backlogMaxBytes?: number
}

const make = Effect.fnUntraced(function* (file: string, options: UsageLogOptions) {
  const maxBytes = options.backlogMaxBytes ?? DEFAULT_BACKLOG_MAX_BYTES
  const counts: UsageBacklogCounts = Option.getOrElse(yield* Effect.serviceOption(UsageBacklog), zeroCounts)
  const needsNewline = yield* Effect.tryPromise({
    try: async () => {
      await fs.promises.mkdir(path.dirname(file), { recursive: true })
      return endsTorn(file)
    },
    catch: (cause) => new UsageFileError({ file, operation: "open", message: errorMessage(cause) }),
  })
  /** The open file, or -1 after a write error (the next write reopens it). */
  let fd = yield* Effect.try({
    try: () => fs.openSync(file, "a"),
    catch: (cause) => new UsageFileError({ file, operation: "open", message: errorMessage(cause) }),
  })
  /** Lines the OS has not taken yet (after a write error), in order: the backlog. */
  let unwritten: Array<Buffer> = []
  let unwrittenBytes = 0
  /** Bytes of `unwritten[0]` already in the file (a write that stopped inside it): the rest continues it. */
  let headWritten = 0
  /** "\n" when the file may end in a torn line (after a crash). */
  let prefix = needsNewline ? "\n" : ""
  /** The episode while the file refuses writes; undefined while it takes them. */
  let episode: Episode | undefined
  /** True once the layer closes: a failure then is logged by the finalizer, no episode begins. */
  let closing = false
  // Runs the episode's logging and its retries, with the layer's context (its logger, its clock).
  const runFork = yield* FiberSet.makeRuntime<never>()

  const publish = (): void => {
    counts.records = unwritten.length
    counts.bytes = unwrittenBytes
    // Full from the first record dropped until the backlog is down to three quarters.
    if (counts.full && unwrittenBytes <= (maxBytes * 3) / 4) counts.full = false
  }

  /** Closes the file after a write error (the next write reopens it, in append mode). */
  const closeAfterError = (): void => {
    if (fd === -1) return
    try {
      fs.closeSync(fd)
    } catch {
      // already unusable
    }
    fd = -1
  }

  /**
   * Writes the backlog (after the prefix a torn file needs). On an error the
   * bytes not yet in the file stay in the backlog and the file is closed
   * (reopened by the next write, in append mode, so what is kept continues
   * where the file stopped). Returns why it failed, or undefined.
   */
  const writeBacklog = (): unknown => {
    if (unwritten.length === 0) return undefined
    const first = headWritten > 0 ? unwritten[0]!.subarray(headWritten) : unwritten[0]!
    const parts =
      prefix === "" ? [first, ...unwritten.slice(1)] : [Buffer.from(prefix), first, ...unwritten.slice(1)]
    const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts)
    try {
      if (fd === -1) fd = fs.openSync(file, "a")
      writeAllSync(fd, data)
      unwritten = []
      unwrittenBytes = 0
      headWritten = 0
      prefix = ""
      counts.full = false
      publish()
      return undefined
    } catch (cause) {
      // Drop what reached the file: the prefix, whole lines, and the start of the next line.
      let done = cause instanceof PartialWrite ? cause.written : 0
      if (prefix !== "") {
        if (done < prefix.length) done = 0
        else {
          done -= prefix.length
          prefix = ""
        }
      }
      while (unwritten.length > 0 && done >= unwritten[0]!.length - headWritten) {
        done -= unwritten[0]!.length - headWritten
        unwrittenBytes -= unwritten.shift()!.length
        headWritten = 0
      }
      if (unwritten.length > 0) headWritten += done
      publish()
      closeAfterError()
      return cause instanceof PartialWrite ? cause.reason : cause
    }
  }

  /**
   * Writes `line` (one or more whole lines) after the backlog. While the
   * file refuses writes (an episode), `line` only joins the backlog and the
   * episode's retry writes it: a full disk costs a request no write and no
   * copy of the backlog. A failed write begins the episode. No line is
   * written twice and none is torn while the file stays the same.
   */
  const writeOut = (line: string): void => {
    if (episode !== undefined) {
      keep(line, 0)
      return
    }
    if (unwritten.length === 0 && prefix === "" && fd !== -1) {
      // The usual case: one string, one write, no Buffer.
      try {
        writeAllSync(fd, line)
        return
      } catch (cause) {
        // Kept, from where the file stopped; the file is reopened by the retry.
        keep(line, cause instanceof PartialWrite ? cause.written : 0)
        closeAfterError()
        failed(cause instanceof PartialWrite ? cause.reason : cause)
        return
      }
    }
    keep(line, 0)
    const error = writeBacklog()
    if (error !== undefined) failed(error)
  }

  /** A write failed: the episode begins (logged once, its backlog retried every RETRY_MS). */
  const failed = (reason: unknown): void => {
    if (closing || episode !== undefined) return
    const current: Episode = {
      since: 0,
      error: errorMessage(reason),
      kept: unwritten.length,
      droppedBefore: counts.dropped,
      filled: false,
      lastReport: 0,
    }
    episode = current
    runFork(
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        current.since = now
        current.lastReport = now
        yield* Effect.logError(
          "usage file refuses writes; records are kept in memory until it takes them",
        ).pipe(
          Effect.annotateLogs({
            file,
            error: current.error,
            backlog_records: unwritten.length,
            backlog_bytes: unwrittenBytes,
            backlog_max_bytes: maxBytes,
          }),
        )
        yield* retry(current)
      }),
    )
  }

  /** The episode's retries: the backlog written every RETRY_MS until the file takes it; a line each minute. */
  const retry = (current: Episode): Effect.Effect<void> =>
    Effect.gen(function* () {
      for (;;) {
        yield* Effect.sleep(Duration.millis(RETRY_MS))
        if (closing || episode !== current) return
        const error = writeBacklog()
        const now = yield* Clock.currentTimeMillis
        if (error === undefined) {
          episode = undefined
          const dropped = counts.dropped - current.droppedBefore
          yield* (dropped > 0 ? Effect.logError : Effect.logWarning)(
            "usage file takes writes again; the records kept in memory are written",
          ).pipe(
            Effect.annotateLogs({ file, down_ms: now - current.since, written_late: current.kept, dropped }),
          )
          return
        }
        current.error = errorMessage(error)
        if (now - current.lastReport >= REPORT_MS) {
          current.lastReport = now
          yield* Effect.logWarning("usage file still refuses writes").pipe(
            Effect.annotateLogs({
              file,
              error: current.error,
              backlog_records: unwritten.length,
              backlog_bytes: unwrittenBytes,
              dropped: counts.dropped - current.droppedBefore,
              since_ms: now - current.since,
            }),
          )
        }
      }
    })

  /**
   * Keeps `lines` (one or more whole lines) for the next write, one Buffer
   * per line, less the first `written` bytes, which are in the file (whole
   * lines dropped, a line begun continued from where it stopped). A line
   * that would take the backlog past `maxBytes` is dropped and counted
   * (never one the file holds the start of).
   */
  const keep = (lines: string, written: number): void => {
    let start = 0
    while (start < lines.length) {
      const end = lines.indexOf("\n", start) + 1 || lines.length
      const length = Buffer.byteLength(lines.slice(start, end))
      if (written >= length) {
        written -= length
        start = end
        continue
      }
      if (written === 0 && unwritten.length > 0 && unwrittenBytes + length > maxBytes) {
        counts.dropped++
        if (!counts.full) {
          counts.full = true
          const current = episode
          if (current !== undefined && !current.filled) {
            current.filled = true
            runFork(
              Effect.logError(
                "usage backlog full: new records are dropped and counted, tenants with hard budgets refused, /readyz not ready",
              ).pipe(
                Effect.annotateLogs({
                  file,
                  backlog_records: unwritten.length,
                  backlog_bytes: unwrittenBytes,
                  backlog_max_bytes: maxBytes,
                }),
              ),
            )
          }
        }
        start = end
        continue
      }
      const data = Buffer.from(lines.slice(start, end))
      start = end
      if (unwritten.length === 0) headWritten = written
      written = 0
      unwritten.push(data)
      unwrittenBytes += data.length
      if (episode !== undefined) episode.kept++
    }
    publish()
  }

  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      closing = true
      const error = writeBacklog()
      if (fd !== -1) fs.closeSync(fd)
      fd = -1
      const current = episode
      episode = undefined
      const dropped = current === undefined ? 0 : counts.dropped - current.droppedBefore
      if (error === undefined) {
        if (current === undefined) return Effect.void
        return Effect.logWarning("usage file took the records kept in memory at shutdown").pipe(
          Effect.annotateLogs({ file, written_late: current.kept, dropped }),
        )
      }
      // The last chance for these records: their lines go to the log, where an operator can recover them.
      return Effect.logError("usage records not written at shutdown").pipe(
        Effect.annotateLogs({
          file,
          error: errorMessage(error),
          dropped,
          records: unwritten.map((b) => b.toString("utf8")),
        }),
      )
    }),
  )

  // Lines queued in this event-loop turn, written together on the check phase (ADR 0037), and what waits
  // for them. The request fibers queue their records; their responses end in `afterWrite`.
  let queued = ""
  let waiting: Array<() => void> = []
  let scheduled = false

  /** Writes what is queued (after the backlog, or into it while the file refuses writes). */
  const writeQueued = (): void => {
    const lines = queued
    queued = ""
    if (lines !== "") writeOut(lines)
  }

  /**
   * The turn's write: the queued lines (after the backlog, or into it while
   * the file refuses writes), then everything that waited for them — also
   * when the write failed. Returns the logging of a waiting step that threw.
   */
  const writeTurn = (): Leftover => {
    scheduled = false
    let thrown: Leftover
    try {
      writeQueued()
    } finally {
      const run = waiting
      waiting = []
      for (const f of run) {
        try {
          f()
        } catch (cause) {
          thrown = andThen(
            thrown,
            Effect.logError("a step after the usage write failed").pipe(
              Effect.annotateLogs({ error: String(cause) }),
            ),
          )
        }
      }
    }
    return thrown
  }

  /** `writeTurn` on the check phase, its logging forked in the layer's scope. */
  const writeTurnLater = (): void => {
    const failed = writeTurn()
    if (failed !== undefined) runFork(failed)
  }

  const queue = (record: UsageRecord): void => {
    queued += encodeRecord(record)
    if (!scheduled) {
      scheduled = true
      setImmediate(writeTurnLater)
    }
  }

  const afterWrite = (f: () => void): void => {
    if (!scheduled) f()
    else waiting.push(f)
  }

  // A record written at once goes after the queued ones, so the file keeps the order of the calls.
  const appendNow = (record: UsageRecord): void => {
    queued += encodeRecord(record)
    writeQueued()
  }

  // Closing: the queued lines and everything waiting for them, then the file (its finalizer, above).
  yield* Effect.addFinalizer(() => Effect.suspend(() => writeTurn() ?? Effect.void))

  return {
    append: (record: UsageRecord) => Effect.sync(() => appendNow(record)),
    queue,
    afterWrite,
  } satisfies UsageLogService
})

/** The usage-record log of this process. */
export class UsageLog extends Context.Service<UsageLog, UsageLogService>()("tollgate/meter/UsageLog") {
  /**
   * Appends to `file` (absolute path; the parent folder is created). If the
   * file's last byte is not "\n" (a line torn by a crash), the first append
   * starts with "\n". Closing the layer flushes and closes the file.
   * Fails with `UsageFileError` when the file cannot be opened.
   */
  static readonly layer = (
    file: string,
    options: UsageLogOptions = {},
  ): Layer.Layer<UsageLog, UsageFileError> => Layer.effect(UsageLog, make(file, options))
}
