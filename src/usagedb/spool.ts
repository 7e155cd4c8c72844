/**
 * The usage file as the database writer's spool: a reader that takes whole
 * records from a byte offset of the file, in order, a bounded batch at a
 * time, and the checkpoint beside the file that says up to which offset the
 * database has confirmed them (ADR 0069). Memory is bounded by one batch
 * whatever the file holds. The reader hands on the lines as the file holds
 * them (JSON text, not parsed: the database parses them, ADR 0069); a line
 * longer than any record is skipped and counted.
 */
import * as fs from "node:fs"
import { MAX_RECORD_LINE_BYTES } from "../meter/UsageLog.js"

/** Where the database stands in the usage file. */
export interface Checkpoint {
  /** Bytes of the file whose records the database has confirmed. */
  readonly offset: number
  /** The file's inode when the offset was taken: another file (rotated, replaced) starts again at 0. */
  readonly ino: number
  /** The database and table the records went to (no credentials): another one starts again at 0. */
  readonly target: string
}

/** The checkpoint file of `usageFile`. */
export const checkpointPath = (usageFile: string): string => `${usageFile}.db-sent`

/** The checkpoint in `path`, or undefined when there is none or it is not one. */
export const readCheckpoint = (path: string): Checkpoint | undefined => {
  let text: string
  try {
    text = fs.readFileSync(path, "utf8")
  } catch {
    return undefined
  }
  try {
    const value = JSON.parse(text) as Partial<Checkpoint>
    if (
      Number.isSafeInteger(value.offset) &&
      (value.offset ?? -1) >= 0 &&
      Number.isSafeInteger(value.ino) &&
      typeof value.target === "string"
    )
      return value as Checkpoint
  } catch {
    // not a checkpoint: start again
  }
  return undefined
}

/** Writes `checkpoint` to `path` (a temp file renamed over it, so a crash leaves the old or the new one). */
export const writeCheckpoint = (path: string, checkpoint: Checkpoint): void => {
  const temp = `${path}.tmp`
  fs.writeFileSync(temp, JSON.stringify(checkpoint))
  fs.renameSync(temp, path)
}

/** Lines read from the spool. */
export interface Batch {
  /** The lines that may be records (not empty, not longer than a record), without their line ends. */
  readonly texts: ReadonlyArray<string>
  /** Lines consumed: the texts and the skipped lines. */
  readonly lines: number
  /** Lines that cannot be records (longer than any). */
  readonly skipped: number
  /** The offset just after the batch's last line (what a confirmed batch moves the checkpoint to). */
  readonly end: number
}

/** Bytes read from the file at a time. */
const READ_BYTES = 256 * 1024

/**
 * Reads whole lines of `file` from an offset. `next` returns at most
 * `maxLines` lines after the current offset (undefined when there is no
 * whole line yet); the writer moves `offset` past a batch once it is
 * confirmed, so a batch that could not be sent is read again.
 */
export class SpoolReader {
  private handle: fs.promises.FileHandle | undefined
  private ino = -1
  private readonly buffer = Buffer.allocUnsafe(READ_BYTES)

  constructor(
    readonly file: string,
    /** The offset of the next line to read. */
    public offset: number,
  ) {}

  /** The open file, reopened when it was replaced (another inode) or shrank below the offset: then from 0. */
  private async open(): Promise<fs.promises.FileHandle | undefined> {
    // One stat of the path per read: its inode says whether the open handle is still the file's.
    let stat: fs.Stats
    try {
      stat = fs.statSync(this.file)
    } catch {
      return undefined
    }
    if (this.handle !== undefined && stat.ino !== this.ino) {
      await this.close()
      this.offset = 0
    }
    if (this.handle === undefined) {
      this.handle = await fs.promises.open(this.file, "r")
      this.ino = (await this.handle.stat()).ino
      if (this.ino !== stat.ino) return this.open()
    }
    if (stat.size < this.offset) this.offset = 0
    return this.handle
  }

  /** Opens the file (when it exists); returns its inode, -1 when there is no file yet. */
  async start(): Promise<number> {
    await this.open()
    return this.ino
  }

  /** The inode of the file being read (-1 before the first read). */
  get inode(): number {
    return this.ino
  }

  async next(maxLines: number): Promise<Batch | undefined> {
    const handle = await this.open()
    if (handle === undefined) return undefined
    const texts: Array<string> = []
    let lines = 0
    let skipped = 0
    let position = this.offset
    /** Start of a line longer than the buffer that is being skipped (its end not found yet). */
    let skipping = false
    while (lines < maxLines) {
      const { bytesRead } = await handle.read(this.buffer, 0, READ_BYTES, position)
      if (bytesRead === 0) break
      const chunk = this.buffer.subarray(0, bytesRead)
      let at = 0
      while (at < chunk.length && lines < maxLines) {
        const newline = chunk.indexOf(0x0a, at)
        if (newline < 0) break
        if (skipping) {
          skipping = false
          skipped++
        } else if (newline - at > MAX_RECORD_LINE_BYTES) skipped++
        else {
          const end = newline > at && chunk[newline - 1] === 0x0d ? newline - 1 : newline
          if (end > at) texts.push(chunk.toString("utf8", at, end))
        }
        lines++
        at = newline + 1
      }
      if (at === 0 && chunk.length === READ_BYTES) {
        // No line end in a full buffer: a line longer than any record; skip to its end.
        skipping = true
        position += chunk.length
        continue
      }
      position += at
      // The end of the file (what follows is a line still being written); else the next read goes on from
      // the start of the line this one cut, so a batch is up to `maxLines` lines whatever their length.
      if (bytesRead < READ_BYTES) break
    }
    if (lines === 0) return undefined
    return { texts, lines, skipped, end: position }
  }

  /** Counts the whole lines from the offset to the end of the file (the backlog at start). */
  async countLines(): Promise<number> {
    const handle = await this.open()
    if (handle === undefined) return 0
    let count = 0
    let position = this.offset
    for (;;) {
      const { bytesRead } = await handle.read(this.buffer, 0, READ_BYTES, position)
      if (bytesRead === 0) return count
      let at = 0
      for (;;) {
        const newline = this.buffer.indexOf(0x0a, at)
        if (newline < 0 || newline >= bytesRead) break
        count++
        at = newline + 1
      }
      position += bytesRead
    }
  }

  async close(): Promise<void> {
    const handle = this.handle
    this.handle = undefined
    await handle?.close()
  }
}
