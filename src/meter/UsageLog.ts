/**
 * The usage-record log: appends one JSON line per request to `usage.file`,
 * and reads the file back (the memory store rebuilds spend from it at start).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { Context, Data, Effect, Layer } from "effect"
import { decodeRecord, encodeRecord, type UsageRecord } from "./record.js"

/** The usage file could not be opened or read. */
export class UsageFileError extends Data.TaggedError("UsageFileError")<{
  readonly file: string
  readonly operation: "open" | "read"
  readonly message: string
}> {}

/** Appends usage records to the usage file. */
export interface UsageLogService {
  /**
   * Appends one record as one line. Completes once the line was handed to
   * the OS, so a record written before the response ends is readable by the
   * client that got the response. Concurrent appends never interleave.
   * Never fails: a write error is logged (and the next append reopens the file).
   */
  readonly append: (record: UsageRecord) => Effect.Effect<void>
}

const errorMessage = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const isNotFound = (cause: unknown): boolean =>
  typeof cause === "object" && cause !== null && (cause as { code?: unknown }).code === "ENOENT"

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

/** Opens the file for appending; errors after open are seen by the write callbacks. */
const openAppend = (file: string): fs.WriteStream => {
  const stream = fs.createWriteStream(file, { flags: "a" })
  stream.on("error", () => {})
  return stream
}

const make = Effect.fnUntraced(function* (file: string) {
  const needsNewline = yield* Effect.tryPromise({
    try: async () => {
      await fs.promises.mkdir(path.dirname(file), { recursive: true })
      return endsTorn(file)
    },
    catch: (cause) => new UsageFileError({ file, operation: "open", message: errorMessage(cause) }),
  })
  let stream = yield* Effect.acquireRelease(
    Effect.async<fs.WriteStream, UsageFileError>((resume) => {
      const opened = fs.createWriteStream(file, { flags: "a" })
      opened.once("error", (cause) =>
        resume(Effect.fail(new UsageFileError({ file, operation: "open", message: cause.message }))),
      )
      opened.once("open", () => {
        opened.removeAllListeners("error")
        opened.on("error", () => {})
        resume(Effect.succeed(opened))
      })
    }),
    () =>
      Effect.async<void>((resume) => {
        const current = stream
        if (current.closed) return resume(Effect.void)
        current.once("close", () => resume(Effect.void))
        if (current.destroyed) return
        current.end()
      }),
  )
  let prefix = needsNewline ? "\n" : ""
  // Appends within one event-loop turn go to the OS as one writev: one syscall and one thread-pool
  // hand-off for many records instead of one each (the per-record cost was ~100 µs of CPU under load).
  let corked: fs.WriteStream | undefined
  const uncork = () => {
    const current = corked
    corked = undefined
    current?.uncork()
  }

  const append = (record: UsageRecord): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      if (stream.destroyed) {
        stream = openAppend(file)
        // A failed write may have left part of a line behind.
        prefix = "\n"
      }
      const line = prefix === "" ? encodeRecord(record) : prefix + encodeRecord(record)
      prefix = ""
      if (corked === undefined) {
        corked = stream
        stream.cork()
        setImmediate(uncork)
      }
      stream.write(line, (cause) => {
        if (cause == null) return resume(Effect.void)
        resume(
          Effect.logError("usage record not written").pipe(
            Effect.annotateLogs({ file, request_id: record.request_id, error: cause.message }),
          ),
        )
      })
    })

  return UsageLog.of({ append })
})

/** The usage-record log of this process. */
export class UsageLog extends Context.Tag("tollgate/UsageLog")<UsageLog, UsageLogService>() {
  /**
   * Appends to `file` (absolute path; the parent folder is created). If the
   * file's last byte is not "\n" (a line torn by a crash), the first append
   * starts with "\n". Closing the layer flushes and closes the file.
   * Fails with `UsageFileError` when the file cannot be opened.
   */
  static readonly layer = (file: string): Layer.Layer<UsageLog, UsageFileError> =>
    Layer.scoped(UsageLog, make(file))
}

/** What `readUsageFile` found. */
export interface UsageFileContents {
  readonly records: ReadonlyArray<UsageRecord>
  /** Lines that were not whole records (torn or corrupt); each logged as a warning. */
  readonly skipped: number
}

/**
 * Reads the usage file line by line (streamed, never the whole file as one
 * string). Lines that are not whole records are skipped with a warning; empty
 * lines are ignored. A missing file reads as empty.
 * With `since` (an ISO timestamp), lines whose `ts` is earlier are skipped
 * before JSON parsing — cheap for large files whose old records no longer count.
 */
export const readUsageFile = Effect.fn("UsageLog.readUsageFile")(function* (
  file: string,
  options?: { readonly since?: string },
) {
  const since = options?.since
  const { records, skippedLines } = yield* Effect.tryPromise({
    try: () => readLines(file, since),
    catch: (cause) => new UsageFileError({ file, operation: "read", message: errorMessage(cause) }),
  })
  for (const line of skippedLines) {
    yield* Effect.logWarning("skipped a usage record line that is not a whole record").pipe(
      Effect.annotateLogs({ file, line }),
    )
  }
  return { records, skipped: skippedLines.length } satisfies UsageFileContents
})

const readLines = async (
  file: string,
  since: string | undefined,
): Promise<{ records: Array<UsageRecord>; skippedLines: Array<number> }> => {
  const records: Array<UsageRecord> = []
  const skippedLines: Array<number> = []
  const input = fs.createReadStream(file, { encoding: "utf8" })
  const lines = readline.createInterface({ input, crlfDelay: Infinity })
  let n = 0
  try {
    for await (const line of lines) {
      n++
      if (line.length === 0) continue
      if (since !== undefined && isBefore(line, since)) continue
      const record = decodeRecord(line)
      if (record === undefined) skippedLines.push(n)
      else if (since === undefined || record.ts >= since) records.push(record)
    }
  } catch (cause) {
    if (!isNotFound(cause)) throw cause
  } finally {
    lines.close()
    input.destroy()
  }
  return { records, skippedLines }
}

const TS_PREFIX = '{"ts":"'

/** True when the line starts with `{"ts":"…"` (as `encodeRecord` writes it) and that time is before `since`. */
const isBefore = (line: string, since: string): boolean =>
  line.startsWith(TS_PREFIX) &&
  line.charCodeAt(TS_PREFIX.length + since.length) === 0x22 &&
  line.slice(TS_PREFIX.length, TS_PREFIX.length + since.length) < since
