/**
 * The usage file itself: its error, and reading it back line by line (the
 * memory store rebuilds spend from it at start; the usage log, ./UsageLog.ts,
 * writes it).
 */
import * as fs from "node:fs"
import { Data, Effect } from "effect"
import { decodeRecord, type UsageRecord } from "./record.js"

/** The usage file could not be opened or read. */
export class UsageFileError extends Data.TaggedError("UsageFileError")<{
  readonly file: string
  readonly operation: "open" | "read"
  readonly message: string
}> {}

export const errorMessage = (cause: unknown): string =>
  cause instanceof Error ? cause.message : String(cause)

export const isNotFound = (cause: unknown): boolean =>
  typeof cause === "object" && cause !== null && (cause as { code?: unknown }).code === "ENOENT"

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
  const { records, skippedLines, skipped } = yield* Effect.tryPromise({
    try: () => readLines(file, since),
    catch: (cause) => new UsageFileError({ file, operation: "read", message: errorMessage(cause) }),
  })
  for (const line of skippedLines) {
    yield* Effect.logWarning("skipped a usage record line that is not a whole record").pipe(
      Effect.annotateLogs({ file, line }),
    )
  }
  if (skipped > skippedLines.length) {
    yield* Effect.logWarning("skipped more usage record lines that are not whole records").pipe(
      Effect.annotateLogs({ file, more: skipped - skippedLines.length }),
    )
  }
  return { records, skipped } satisfies UsageFileContents
})

/** Longest usage file line read back; a longer one (a NUL tail, a foreign file) is skipped, not held. */
export const MAX_RECORD_LINE_BYTES = 64 * 1024

/** Skipped line numbers kept for the warnings; past this many only the count grows. */
const MAX_SKIPPED_REPORTED = 20

/**
 * The lines of `file`, each at most MAX_RECORD_LINE_BYTES (a longer one is
 * passed as undefined once its end is found), read in chunks: memory stays
 * bounded whatever the file holds.
 */
async function* boundedLines(file: string): AsyncGenerator<string | undefined> {
  const input = fs.createReadStream(file)
  let parts: Array<Buffer> = []
  let size = 0
  let tooLong = false
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      let at = 0
      while (at < chunk.length) {
        const newline = chunk.indexOf(0x0a, at)
        const end = newline < 0 ? chunk.length : newline
        if (!tooLong) {
          size += end - at
          if (size > MAX_RECORD_LINE_BYTES) {
            tooLong = true
            parts = []
          } else parts.push(chunk.subarray(at, end))
        }
        if (newline < 0) break
        yield tooLong ? undefined : Buffer.concat(parts, size).toString("utf8").replace(/\r$/, "")
        parts = []
        size = 0
        tooLong = false
        at = newline + 1
      }
    }
    if (tooLong) yield undefined
    else if (size > 0) yield Buffer.concat(parts, size).toString("utf8").replace(/\r$/, "")
  } finally {
    input.destroy()
  }
}

const readLines = async (
  file: string,
  since: string | undefined,
): Promise<{ records: Array<UsageRecord>; skippedLines: Array<number>; skipped: number }> => {
  const records: Array<UsageRecord> = []
  const skippedLines: Array<number> = []
  let skipped = 0
  let n = 0
  try {
    for await (const line of boundedLines(file)) {
      n++
      if (line !== undefined && line.length === 0) continue
      if (line !== undefined && since !== undefined && isBefore(line, since)) continue
      const record = line === undefined ? undefined : decodeRecord(line)
      if (record === undefined) {
        skipped++
        if (skippedLines.length < MAX_SKIPPED_REPORTED) skippedLines.push(n)
      } else if (since === undefined || record.ts >= since) records.push(record)
    }
  } catch (cause) {
    if (!isNotFound(cause)) throw cause
  }
  return { records, skippedLines, skipped }
}

const TS_PREFIX = '{"ts":"'

/** True when the line starts with `{"ts":"…"` (as `encodeRecord` writes it) and that time is before `since`. */
const isBefore = (line: string, since: string): boolean =>
  line.startsWith(TS_PREFIX) &&
  line.charCodeAt(TS_PREFIX.length + since.length) === 0x22 &&
  line.slice(TS_PREFIX.length, TS_PREFIX.length + since.length) < since
