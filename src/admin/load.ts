/**
 * Builds the usage index's rows from the usage file in one streamed pass:
 * 1 MiB reads split into lines, each line decoded with `decodeRecord` and
 * folded into the rows at once, so no record object outlives its line
 * (`readUsageFile` would hold every record in memory at the same time), and
 * full chunks go to the chunk file as they fill.
 */
import * as fs from "node:fs"
import { StringDecoder } from "node:string_decoder"
import { decodeRecord, type UsageRecord } from "../meter/record.js"
import { parseIsoTime } from "../ops/jsonText.js"
import type { ChunkedRows } from "./chunks.js"
import type { Row, Tables } from "./columns.js"

/** The columns row of `record`, or undefined when its `ts` is not a date. */
export const toRow = (tables: Tables, record: UsageRecord): Row | undefined => {
  const ts = parseIsoTime(record.ts)
  if (Number.isNaN(ts)) return undefined
  return {
    ts,
    key: tables.keyOf(record.tenant, record.key_id),
    // A route no config had (a 404 for the client's own `model` string) is not kept by name: the index would
    // grow with whatever names clients send. The file keeps it.
    target: tables.targetOf(
      record.error === "route_not_found" ? "" : record.route,
      record.provider,
      record.model,
    ),
    session: tables.sessions.intern(record.session),
    input: record.input_tokens,
    output: record.output_tokens,
    cacheRead: record.cache_read_tokens,
    cacheWrite: record.cache_write_tokens,
    cost: record.cost_micro_usd,
    saved: record.cache_saved_micro_usd,
    status: record.status,
  }
}

/** What `loadRows` read. */
export interface Loaded {
  /** Records added. */
  readonly records: number
  /** Lines that are not whole records or whose `ts` is not a date (a torn last line after a crash). */
  readonly skipped: number
  /** Line numbers (1-based) of the first skipped lines, at most 10. */
  readonly skippedLines: ReadonlyArray<number>
}

const CHUNK_BYTES = 1 << 20

const isNotFound = (cause: unknown): boolean =>
  typeof cause === "object" && cause !== null && (cause as { code?: unknown }).code === "ENOENT"

/**
 * Reads `file` into `rows` (waiting for each full chunk's write before
 * reading on, so memory holds a few chunks at most). A missing file reads
 * as empty; a line that is not a whole record is counted in `skipped`.
 * Rejects when the file exists but cannot be read.
 */
export const loadRows = async (file: string, rows: ChunkedRows): Promise<Loaded> => {
  const before = rows.size
  const skippedLines: Array<number> = []
  let skipped = 0
  let lineNumber = 0
  const line = (text: string): void => {
    lineNumber++
    if (text.length === 0) return
    const record = decodeRecord(text)
    const row = record === undefined ? undefined : toRow(rows.tables, record)
    if (row !== undefined) return rows.push(row)
    skipped++
    if (skippedLines.length < 10) skippedLines.push(lineNumber)
  }
  const input = fs.createReadStream(file, { highWaterMark: CHUNK_BYTES })
  // One UTF-8 decode per chunk (the decoder keeps a character split across chunks for the next one).
  const decoder = new StringDecoder("utf8")
  let rest = ""
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      const text = rest + decoder.write(chunk)
      let start = 0
      let end = text.indexOf("\n", start)
      while (end >= 0) {
        line(text.slice(start, end > start && text.charCodeAt(end - 1) === 0x0d ? end - 1 : end))
        start = end + 1
        end = text.indexOf("\n", start)
      }
      rest = text.slice(start)
      await rows.flushed()
    }
    rest += decoder.end()
    if (rest.length > 0) line(rest)
  } catch (cause) {
    if (!isNotFound(cause)) throw cause
  } finally {
    input.destroy()
  }
  rows.sort()
  await rows.flushed()
  return { records: rows.size - before, skipped, skippedLines }
}
