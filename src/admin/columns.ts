/**
 * The usage index's storage: rows in chunks of a fixed number of rows, one
 * typed array per field in each chunk (columnar), strings interned to small
 * integer ids in tables shared by every chunk, the rows of a chunk sorted by
 * `ts` so a time range is two binary searches in it.
 *
 * A row is 46 bytes — ts Float64 (8), cost Float64 (8), four token counts
 * Uint32 (16), session id Uint32 (4), two Uint32 ids (4 each): the key
 * (tenant and key id together) and the target (route, provider and model
 * together), and the HTTP status Uint16 (2). Those combinations are few (they
 * come from the config), so a record pays for five names with two ids. Full
 * chunks leave memory for a file (`chunks.ts`); the columns of a chunk are
 * laid out in the file as in memory. Each distinct string (tenant, key id,
 * route, provider, model, session) and each combination costs one table
 * entry once, ~100 bytes for a derived session id; only sessions (and the
 * unknown route names clients send, answered 404) grow with traffic.
 */

/** Id 0 of every string table: a null field (no route, provider, model or session). */
export const NULL_ID = 0

/** Largest token count one record can hold; larger counts saturate (no request comes near 4.29 billion tokens). */
const MAX_TOKENS = 0xffff_ffff

/** Largest status one record can hold (HTTP statuses are 100–599). */
const MAX_STATUS = 0xffff

/** Strings ↔ dense ids; id 0 is null. */
export class Interner {
  private readonly ids = new Map<string, number>()
  readonly names: Array<string | null> = [null]

  /** The id of `name`, adding it when new. */
  intern(name: string | null): number {
    if (name === null) return NULL_ID
    let id = this.ids.get(name)
    if (id === undefined) {
      id = this.names.length
      this.ids.set(name, id)
      this.names.push(name)
    }
    return id
  }

  /** The id of `name`, or undefined when it never occurred. */
  find(name: string): number | undefined {
    return this.ids.get(name)
  }
}

/**
 * Combinations of ids (a key: tenant and key id; a target: route, provider
 * and model) ↔ dense ids from 0, found through nested Maps (no key string
 * per record). `parts[k][id]` is part `k` of combination `id`.
 */
export class Combinations {
  private readonly ids = new Map<number, Map<number, Map<number, number>>>()
  readonly parts: ReadonlyArray<Array<number>>

  constructor(width: 2 | 3) {
    this.parts = Array.from({ length: width }, () => [])
  }

  get size(): number {
    return this.parts[0]!.length
  }

  /** The id of the combination (`a`, `b`, `c`; `c` is 0 for a pair), adding it when new. */
  intern(a: number, b: number, c = 0): number {
    let byA = this.ids.get(a)
    if (byA === undefined) this.ids.set(a, (byA = new Map()))
    let byB = byA.get(b)
    if (byB === undefined) byA.set(b, (byB = new Map()))
    let id = byB.get(c)
    if (id === undefined) {
      id = this.size
      byB.set(c, id)
      const values = [a, b, c]
      this.parts.forEach((part, k) => part.push(values[k]!))
    }
    return id
  }
}

/** One record as the columns hold it (ids from {@link Tables}). */
export interface Row {
  /** Epoch ms. */
  readonly ts: number
  /** A {@link Tables.keys} id (tenant and key id). */
  readonly key: number
  /** A {@link Tables.targets} id (route, provider and model). */
  readonly target: number
  readonly session: number
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  /** micro-USD. */
  readonly cost: number
  /** micro-USD the prompt cache saved (`cache_saved_micro_usd`). */
  readonly saved: number
  /** The HTTP status sent to the client. */
  readonly status: number
}

/** The string tables and combinations every chunk's ids refer to. */
export class Tables {
  readonly tenants = new Interner()
  readonly keyIds = new Interner()
  readonly routes = new Interner()
  readonly providers = new Interner()
  readonly models = new Interner()
  readonly sessions = new Interner()
  /** (tenant, key id) of each `key` id. */
  readonly keys = new Combinations(2)
  /** (route, provider, model) of each `target` id. */
  readonly targets = new Combinations(3)

  /** The `key` id of a record's tenant and key id. */
  keyOf(tenant: string, keyId: string): number {
    return this.keys.intern(this.tenants.intern(tenant), this.keyIds.intern(keyId))
  }

  /** The `target` id of a record's route (`""`: none), provider and model. */
  targetOf(route: string, provider: string | null, model: string | null): number {
    return this.targets.intern(
      this.routes.intern(route === "" ? null : route),
      this.providers.intern(provider),
      this.models.intern(model),
    )
  }

  /** Per key id: 1 when the key is `tenant`'s. Undefined when the tenant never occurred. */
  keysOf(tenant: string): Uint8Array | undefined {
    const id = this.tenants.find(tenant)
    if (id === undefined) return undefined
    const owners = this.keys.parts[0]!
    const mine = new Uint8Array(owners.length)
    for (let k = 0; k < owners.length; k++) mine[k] = owners[k] === id ? 1 : 0
    return mine
  }
}

/** Rows to read: `size` rows of each column, sorted by `ts`. */
export interface Rows {
  readonly size: number
  readonly ts: Float64Array
  readonly cost: Float64Array
  readonly saved: Float64Array
  readonly input: Uint32Array
  readonly output: Uint32Array
  readonly cacheRead: Uint32Array
  readonly cacheWrite: Uint32Array
  readonly session: Uint32Array
  readonly key: Uint32Array
  readonly target: Uint32Array
  readonly status: Uint16Array
}

/** Bytes of one row, in memory and in the chunk file. */
export const ROW_BYTES = 54

/** First row index of `rows` whose `ts` is ≥ `ms` (`size` when none). */
export const lowerBound = (rows: Rows, ms: number): number => {
  let lo = 0
  let hi = rows.size
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (rows.ts[mid]! < ms) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** First row index of `rows` whose `ts` is > `ms` (`size` when none). */
export const upperBound = (rows: Rows, ms: number): number => {
  let lo = 0
  let hi = rows.size
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (rows.ts[mid]! <= ms) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * The `ts` of the first row of `rows` before `until` whose key is marked in
 * `mine` (every key when undefined); undefined when there is none.
 */
export const firstBefore = (rows: Rows, mine: Uint8Array | undefined, until: number): number | undefined => {
  const { ts, key } = rows
  for (let i = 0; i < rows.size && ts[i]! < until; i++) {
    if (mine === undefined || mine[key[i]!] === 1) return ts[i]!
  }
  return undefined
}

/**
 * Views of the columns of `rows` rows laid out from byte 0 of `buffer`
 * (8-byte columns first, so every view is aligned): how a chunk is written
 * to the chunk file and read back.
 */
export const viewRows = (buffer: ArrayBuffer, rows: number, capacity = rows): Rows => {
  let at = 0
  const take = <T>(make: new (b: ArrayBuffer, offset: number, length: number) => T, bytes: number): T => {
    const view = new make(buffer, at, capacity)
    at += bytes * capacity
    return view
  }
  return {
    size: rows,
    ts: take(Float64Array, 8),
    cost: take(Float64Array, 8),
    saved: take(Float64Array, 8),
    input: take(Uint32Array, 4),
    output: take(Uint32Array, 4),
    cacheRead: take(Uint32Array, 4),
    cacheWrite: take(Uint32Array, 4),
    session: take(Uint32Array, 4),
    key: take(Uint32Array, 4),
    target: take(Uint32Array, 4),
    status: take(Uint16Array, 2),
  }
}

const tokens = (n: number): number => (n <= 0 ? 0 : n >= MAX_TOKENS ? MAX_TOKENS : Math.round(n))

const httpStatus = (n: number): number => (n <= 0 ? 0 : n >= MAX_STATUS ? MAX_STATUS : Math.round(n))

type Column = Float64Array | Uint32Array | Uint16Array

/**
 * One chunk being filled: `capacity` rows allocated once (54 bytes each),
 * `size` of them valid, sorted by `ts` unless `sorted` is false (bulk load
 * only). Reused after it has been written out (`clear`), so filling chunks
 * allocates nothing. Its columns are the `Rows` ones (this interface), set
 * by the constructor as views of one buffer in the chunk file's layout.
 */
export interface Chunk extends Omit<Rows, "size"> {}
export class Chunk implements Rows {
  size = 0
  /** False after an out-of-order `push`; `sort()` restores it. */
  sorted = true

  constructor(readonly capacity: number) {
    const { size: _, ...columns } = viewRows(new ArrayBuffer(ROW_BYTES * capacity), 0, capacity)
    Object.assign(this, columns)
  }

  get full(): boolean {
    return this.size === this.capacity
  }

  /** Empties the chunk for reuse. */
  clear(): void {
    this.size = 0
    this.sorted = true
  }

  /** Appends at the end (the chunk must not be full); with a `ts` earlier than the last row it clears `sorted` (call `sort()` before reading). */
  push(row: Row): void {
    if (this.size > 0 && row.ts < this.ts[this.size - 1]!) this.sorted = false
    this.write(this.size++, row)
  }

  /** Inserts keeping `ts` order (the chunk must not be full): after every row with the same or an earlier `ts` (cost: the rows after it move). */
  insert(row: Row): void {
    if (this.size === 0 || row.ts >= this.ts[this.size - 1]!) return this.push(row)
    const at = upperBound(this, row.ts)
    for (const column of this.all()) column.copyWithin(at + 1, at, this.size)
    this.size++
    this.write(at, row)
  }

  /** Restores `ts` order after out-of-order pushes (stable: equal `ts` keep push order), in place. */
  sort(): void {
    if (this.sorted) return
    const ts = this.ts
    const n = this.size
    const order = new Uint32Array(n)
    for (let i = 0; i < n; i++) order[i] = i
    order.sort((a, b) => ts[a]! - ts[b]! || a - b)
    const scratch = new Float64Array(n)
    for (const column of this.all()) {
      for (let i = 0; i < n; i++) scratch[i] = column[order[i]!]!
      column.set(scratch.subarray(0, n))
    }
    this.sorted = true
  }

  /** The valid rows as bytes in the file layout (views of this chunk's columns, no copy). */
  fileViews(): Array<Uint8Array> {
    return this.all().map(
      (column) => new Uint8Array(column.buffer, column.byteOffset, this.size * column.BYTES_PER_ELEMENT),
    )
  }

  private all(): Array<Column> {
    return [
      this.ts,
      this.cost,
      this.saved,
      this.input,
      this.output,
      this.cacheRead,
      this.cacheWrite,
      this.session,
      this.key,
      this.target,
      this.status,
    ]
  }

  private write(i: number, row: Row): void {
    this.ts[i] = row.ts
    this.cost[i] = row.cost
    this.saved[i] = row.saved
    this.input[i] = tokens(row.input)
    this.output[i] = tokens(row.output)
    this.cacheRead[i] = tokens(row.cacheRead)
    this.cacheWrite[i] = tokens(row.cacheWrite)
    this.session[i] = row.session
    this.key[i] = row.key
    this.target[i] = row.target
    this.status[i] = httpStatus(row.status)
  }
}
