/**
 * The usage index's storage: one typed array per field (columnar), strings
 * interned to small integer ids, rows kept sorted by `ts` so a time range
 * is two binary searches.
 *
 * Memory per record: 42 bytes at full capacity — ts Float64 (8), cost
 * Float64 (8), four token counts Uint32 (16), session id Uint32 (4), the
 * HTTP status Uint16 (2), and two Uint16 ids (2 each; widened to Uint32
 * only if a table passes 65,535 entries): the key (tenant and key id
 * together) and the target (route, provider and model together). Those
 * combinations are few (they come from the config), so a record pays for
 * five names with two ids. Arrays grow by 1.5× (after loading the file
 * they are fitted to the records plus 1/8), so allocated memory is 42–63
 * bytes per record (up to 105 for the moment a growth copies). Each distinct string (tenant, key id, route, provider,
 * model, session) and each combination costs one table entry once, ~100
 * bytes for a derived session id; only sessions (and the unknown route
 * names clients send, answered 404) grow with traffic.
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

/** One record as the columns hold it (ids from the tables of {@link Columns}). */
export interface Row {
  /** Epoch ms. */
  readonly ts: number
  /** A {@link Columns.keys} id (tenant and key id). */
  readonly key: number
  /** A {@link Columns.targets} id (route, provider and model). */
  readonly target: number
  readonly session: number
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  /** micro-USD. */
  readonly cost: number
  /** The HTTP status sent to the client. */
  readonly status: number
}

type Ids = Uint16Array | Uint32Array

const tokens = (n: number): number => (n <= 0 ? 0 : n >= MAX_TOKENS ? MAX_TOKENS : Math.round(n))

const httpStatus = (n: number): number => (n <= 0 ? 0 : n >= MAX_STATUS ? MAX_STATUS : Math.round(n))

const grow = <T extends Float64Array | Uint32Array | Uint16Array>(array: T, capacity: number): T => {
  const next = new (array.constructor as new (n: number) => T)(capacity)
  next.set(array.length <= capacity ? array : array.subarray(0, capacity))
  return next
}

/** The columns; `size` rows are valid, sorted by `ts` unless `sorted` is false (bulk load only). */
export class Columns {
  size = 0
  /** False after an out-of-order `push`; `sort()` restores it. */
  sorted = true
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
  ts: Float64Array
  cost: Float64Array
  input: Uint32Array
  output: Uint32Array
  cacheRead: Uint32Array
  cacheWrite: Uint32Array
  session: Uint32Array
  /** HTTP status of each record. */
  status: Uint16Array
  key: Ids
  target: Ids

  constructor(capacity = 1024) {
    this.ts = new Float64Array(capacity)
    this.cost = new Float64Array(capacity)
    this.input = new Uint32Array(capacity)
    this.output = new Uint32Array(capacity)
    this.cacheRead = new Uint32Array(capacity)
    this.cacheWrite = new Uint32Array(capacity)
    this.session = new Uint32Array(capacity)
    this.status = new Uint16Array(capacity)
    this.key = new Uint16Array(capacity)
    this.target = new Uint16Array(capacity)
  }

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

  /** Appends at the end; with a `ts` earlier than the last row it clears `sorted` (call `sort()` before querying). */
  push(row: Row): void {
    this.reserve()
    if (this.size > 0 && row.ts < this.ts[this.size - 1]!) this.sorted = false
    this.write(this.size++, row)
  }

  /** Inserts keeping `ts` order: after every row with the same or an earlier `ts` (cost: the rows after it move). */
  insert(row: Row): void {
    if (this.size === 0 || row.ts >= this.ts[this.size - 1]!) return this.push(row)
    this.reserve()
    const at = this.upperBound(row.ts)
    for (const column of this.all()) column.copyWithin(at + 1, at, this.size)
    this.size++
    this.write(at, row)
  }

  /** First row index whose `ts` is ≥ `ms` (`size` when none). */
  lowerBound(ms: number): number {
    let lo = 0
    let hi = this.size
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.ts[mid]! < ms) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** First row index whose `ts` is > `ms` (`size` when none). */
  upperBound(ms: number): number {
    let lo = 0
    let hi = this.size
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.ts[mid]! <= ms) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Restores `ts` order after out-of-order pushes (stable: equal `ts` keep file order). O(n log n), one column copy at a time. */
  sort(): void {
    if (this.sorted) return
    const ts = this.ts
    const order = new Uint32Array(this.size)
    for (let i = 0; i < order.length; i++) order[i] = i
    order.sort((a, b) => ts[a]! - ts[b]! || a - b)
    const permute = <T extends Float64Array | Uint32Array | Uint16Array>(column: T): T => {
      const next = new (column.constructor as new (n: number) => T)(column.length)
      for (let i = 0; i < order.length; i++) next[i] = column[order[i]!]!
      return next
    }
    this.ts = permute(this.ts)
    this.cost = permute(this.cost)
    this.input = permute(this.input)
    this.output = permute(this.output)
    this.cacheRead = permute(this.cacheRead)
    this.cacheWrite = permute(this.cacheWrite)
    this.session = permute(this.session)
    this.status = permute(this.status)
    this.key = permute(this.key)
    this.target = permute(this.target)
    this.sorted = true
  }

  /** Shrinks (or grows) the capacity to `size` plus 1/8 (at least 1,024 rows): after a bulk load, 42 × 1.125 bytes per record. */
  fit(): void {
    this.resize(Math.ceil(this.size * 1.125) + 1024)
  }

  /** Bytes allocated by the columns (string tables not included). */
  bytes(): number {
    return this.all().reduce((sum, column) => sum + column.byteLength, 0)
  }

  private all(): Array<Float64Array | Uint32Array | Uint16Array> {
    return [
      this.ts,
      this.cost,
      this.input,
      this.output,
      this.cacheRead,
      this.cacheWrite,
      this.session,
      this.status,
      this.key,
      this.target,
    ]
  }

  private reserve(): void {
    if (this.size < this.ts.length) return
    this.resize(Math.max(1024, Math.ceil(this.ts.length * 1.5)))
  }

  private resize(capacity: number): void {
    this.ts = grow(this.ts, capacity)
    this.cost = grow(this.cost, capacity)
    this.input = grow(this.input, capacity)
    this.output = grow(this.output, capacity)
    this.cacheRead = grow(this.cacheRead, capacity)
    this.cacheWrite = grow(this.cacheWrite, capacity)
    this.session = grow(this.session, capacity)
    this.status = grow(this.status, capacity)
    this.key = grow(this.key, capacity)
    this.target = grow(this.target, capacity)
  }

  private write(i: number, row: Row): void {
    if (row.key > 0xffff && this.key instanceof Uint16Array) this.key = Uint32Array.from(this.key)
    if (row.target > 0xffff && this.target instanceof Uint16Array) this.target = Uint32Array.from(this.target)
    this.ts[i] = row.ts
    this.cost[i] = row.cost
    this.input[i] = tokens(row.input)
    this.output[i] = tokens(row.output)
    this.cacheRead[i] = tokens(row.cacheRead)
    this.cacheWrite[i] = tokens(row.cacheWrite)
    this.session[i] = row.session
    this.status[i] = httpStatus(row.status)
    this.key[i] = row.key
    this.target[i] = row.target
  }
}
