/**
 * The usage index's rows, bounded in memory: records fill one chunk of
 * {@link ROWS_PER_CHUNK} rows; a full chunk is sorted, summarised (its time
 * range, the first `ts` of each key) and written to the chunk file, and its
 * memory is reused for the next chunk once the write is done. A query reads
 * the chunks its range overlaps: the one being filled (and any not yet
 * written) from memory, the others from the file, one at a time into one
 * buffer. So memory stays at a few chunks (~0.75 MB each) however many
 * records the index holds, and the file grows by 46 bytes per record.
 *
 * Chunks may overlap in time (a record can arrive after newer ones, and the
 * usage file need not be in `ts` order): every chunk whose range meets the
 * query's is read, and within it two binary searches find the rows.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as fsp from "node:fs/promises"
import { join } from "node:path"
import { Chunk, firstBefore, ROW_BYTES, Tables, viewRows, type Row, type Rows } from "./columns.js"

/** Rows per chunk: 16,384 × 46 bytes = 736 KiB, a chunk a minute at 270 requests per second. */
export const ROWS_PER_CHUNK = 16_384

/** Where full chunks go: positioned writes and reads of one file (`file.ts`). */
export interface ChunkFile {
  /** Writes `views` one after another from byte `position`. */
  readonly write: (views: ReadonlyArray<Uint8Array>, position: number) => Promise<void>
  /** Fills `into` from byte `position`. */
  readonly read: (into: Uint8Array, position: number) => Promise<void>
}

/** A full chunk: its summary, and its rows in memory until they are in the file. */
interface Sealed {
  readonly rows: number
  readonly minTs: number
  readonly maxTs: number
  /** Per key id (of the tables when it was sealed): the `ts` of the key's first row, Infinity when none. */
  readonly firstTs: Float64Array
  readonly position: number
  /** The rows, until the file has them (for ever without a file, or when the write failed). */
  memory: Chunk | undefined
}

export interface ChunkedRowsOptions {
  /** Undefined: full chunks stay in memory (tests). */
  readonly file?: ChunkFile | undefined
  readonly rowsPerChunk?: number
  /** A chunk that could not be written (it stays in memory; queries still see it). */
  readonly onWriteError?: (cause: unknown) => void
}

export class ChunkedRows {
  readonly tables = new Tables()
  readonly rowsPerChunk: number
  private active: Chunk
  private readonly sealed: Array<Sealed> = []
  /** A written chunk's memory, kept for the next chunk. */
  private spare: Chunk | undefined
  private fileBytes = 0
  private readonly pending = new Set<Promise<void>>()
  private readonly file: ChunkFile | undefined
  private readonly onWriteError: (cause: unknown) => void

  constructor(options: ChunkedRowsOptions = {}) {
    this.rowsPerChunk = options.rowsPerChunk ?? ROWS_PER_CHUNK
    this.file = options.file
    this.onWriteError = options.onWriteError ?? (() => {})
    this.active = new Chunk(this.rowsPerChunk)
  }

  /** Records held. */
  get size(): number {
    let size = this.active.size
    for (const chunk of this.sealed) size += chunk.rows
    return size
  }

  /** Bytes of rows in memory (the chunk being filled, chunks not yet written, the spare). */
  memoryBytes(): number {
    let chunks = 1 + (this.spare === undefined ? 0 : 1)
    for (const chunk of this.sealed) if (chunk.memory !== undefined) chunks++
    return chunks * this.rowsPerChunk * ROW_BYTES
  }

  /** Bytes of the chunk file. */
  diskBytes(): number {
    return this.fileBytes
  }

  /** Adds a row in `ts` order within the current chunk (records arrive nearly in `ts` order). */
  add(row: Row): void {
    this.active.insert(row)
    if (this.active.full) this.seal()
  }

  /** Appends a row without ordering (loading a file); the chunk is sorted when it is full. */
  push(row: Row): void {
    this.active.push(row)
    if (this.active.full) this.seal()
  }

  /** Resolves when every chunk write started so far has ended. */
  async flushed(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending)
  }

  /** Sorts the chunk being filled (after loading). */
  sort(): void {
    this.active.sort()
  }

  /**
   * The `ts` of the first row before `until` whose key is marked in `mine`
   * (every key when undefined): from the chunks' summaries, no reads.
   */
  firstBefore(mine: Uint8Array | undefined, until: number): number | undefined {
    let first = firstBefore(this.active, mine, until)
    for (const chunk of this.sealed) {
      if (chunk.minTs >= until || (first !== undefined && chunk.minTs >= first)) continue
      const ts = chunk.firstTs
      for (let k = 0; k < ts.length; k++) {
        const at = ts[k]!
        if (at < until && (mine === undefined || mine[k] === 1) && (first === undefined || at < first))
          first = at
      }
    }
    return first
  }

  /**
   * Calls `visit` with every chunk holding rows in [`since`, `until`)
   * (undefined: open), as the rows were when the scan started: the chunks
   * in memory at once, then the others read from the file one at a time
   * (`visit` must not keep a chunk it is given).
   */
  scan(
    since: number | undefined,
    until: number | undefined,
    visit: (rows: Rows) => void,
  ): Effect.Effect<void> {
    return Effect.suspend(() => {
      const overlaps = (minTs: number, maxTs: number) =>
        (since === undefined || maxTs >= since) && (until === undefined || minTs < until)
      if (this.active.size > 0) visit(this.active)
      const onDisk: Array<Sealed> = []
      for (const chunk of this.sealed) {
        if (!overlaps(chunk.minTs, chunk.maxTs)) continue
        if (chunk.memory !== undefined) visit(chunk.memory)
        else onDisk.push(chunk)
      }
      const file = this.file
      if (onDisk.length === 0 || file === undefined) return Effect.void
      // One buffer for the whole scan, as large as the largest chunk it reads.
      const buffer = new ArrayBuffer(Math.max(...onDisk.map((chunk) => chunk.rows)) * ROW_BYTES)
      return Effect.forEach(
        onDisk,
        (chunk) =>
          Effect.promise(() =>
            file.read(new Uint8Array(buffer, 0, chunk.rows * ROW_BYTES), chunk.position),
          ).pipe(Effect.map(() => visit(viewRows(buffer, chunk.rows)))),
        { discard: true },
      )
    })
  }

  private seal(): void {
    const chunk = this.active
    chunk.sort()
    const firstTs = new Float64Array(this.tables.keys.size).fill(Infinity)
    for (let i = chunk.size - 1; i >= 0; i--) firstTs[chunk.key[i]!] = chunk.ts[i]!
    const sealed: Sealed = {
      rows: chunk.size,
      minTs: chunk.ts[0]!,
      maxTs: chunk.ts[chunk.size - 1]!,
      firstTs,
      position: this.fileBytes,
      memory: chunk,
    }
    this.sealed.push(sealed)
    const next = this.spare ?? new Chunk(this.rowsPerChunk)
    this.spare = undefined
    next.clear()
    this.active = next
    const file = this.file
    if (file === undefined) return
    this.fileBytes += chunk.size * ROW_BYTES
    const write = file.write(chunk.fileViews(), sealed.position).then(
      () => {
        sealed.memory = undefined
        this.spare ??= chunk
      },
      (cause: unknown) => this.onWriteError(cause),
    )
    this.pending.add(write)
    void write.finally(() => this.pending.delete(write))
  }
}

/**
 * A chunk file in `dir` (the usage file's directory: the operator sized its
 * volume for the usage file, which takes ~10 times more per record): created
 * with a unique name and removed from the directory at once, so the open
 * descriptor is its only name and the system frees it when the process ends,
 * however it ends. Closed when the scope closes. Creates `dir` when missing
 * (the usage log would create it next).
 */
export const openChunkFile = (dir: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        await fsp.mkdir(dir, { recursive: true })
        const path = join(dir, `.tollgate-usage-index-${process.pid}-${randomBytes(6).toString("hex")}`)
        const handle = await fsp.open(path, "wx+", 0o600)
        // A system that cannot remove an open file keeps it until the scope closes.
        await fsp.unlink(path).catch(() => undefined)
        return { handle, path }
      },
      catch: (cause) => cause,
    }),
    ({ handle, path }) =>
      Effect.promise(async () => {
        await handle.close().catch(() => undefined)
        await fsp.unlink(path).catch(() => undefined)
      }),
  ).pipe(
    Effect.map(({ handle }): ChunkFile => ({
      write: async (views, position) => {
        const bytes = views.reduce((sum, view) => sum + view.byteLength, 0)
        const { bytesWritten } = await handle.writev(views as Array<Uint8Array>, position)
        if (bytesWritten !== bytes) throw new Error(`short write: ${bytesWritten} of ${bytes} bytes`)
      },
      read: async (into, position) => {
        let done = 0
        while (done < into.byteLength) {
          const { bytesRead } = await handle.read(into, done, into.byteLength - done, position + done)
          if (bytesRead === 0)
            throw new Error(`chunk file ends at ${position + done}, ${into.byteLength - done} bytes early`)
          done += bytesRead
        }
      },
    })),
  )
