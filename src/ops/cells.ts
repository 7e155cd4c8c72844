import type { Counter, LabelValues, Registry } from "prom-client"

/**
 * Hot-path helpers for metrics. prom-client hashes the label object on every
 * `inc` (~300 ns and a string per call); the request path instead bumps a
 * plain number in a cell found through nested Maps (no key string built per
 * call), and the cells are handed to prom-client when /metrics is scraped.
 */

/** One label set of a counter: a plain number on the hot path. */
export class CounterCell {
  /** Everything counted so far. */
  value = 0
  /** The part of `value` already added to the prom-client counter. */
  exported = 0
  constructor(readonly labels: LabelValues<string>) {}

  inc(amount = 1): void {
    this.value += amount
  }
}

/** The cells of one prom-client counter. */
export class CounterCells<L extends string> {
  private readonly cells: Array<CounterCell> = []
  constructor(private readonly counter: Counter<L>) {}

  /** A new cell for `labels` (call once per label set; cache the result). */
  add(labels: LabelValues<L>): CounterCell {
    const cell = new CounterCell(labels)
    this.cells.push(cell)
    // Known label sets show up at 0 from the first scrape on, so rate() works from the first event.
    this.counter.inc(labels, 0)
    return cell
  }

  /** Adds what the cells counted since the last sync to the counter (scrape time). */
  sync(): void {
    for (const cell of this.cells) {
      if (cell.value === cell.exported) continue
      this.counter.inc(cell.labels as LabelValues<L>, cell.value - cell.exported)
      cell.exported = cell.value
    }
  }
}

/** One label set of a histogram: bucket counts in a typed array, found once per label set (no hashing per observation). */
export class HistogramCell {
  /** Observations per bucket (not cumulative): `counts[i]` holds values in (bounds[i-1], bounds[i]]. */
  readonly counts: Float64Array
  sum = 0
  count = 0
  constructor(
    readonly labels: LabelValues<string>,
    private readonly bounds: ReadonlyArray<number>,
  ) {
    this.counts = new Float64Array(bounds.length)
  }

  /** As prom-client's `observe`: the first bucket whose bound is ≥ `value`; above every bound only `+Inf`. */
  observe(value: number): void {
    if (!Number.isFinite(value)) return
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    if (i < bounds.length) this.counts[i]!++
    this.sum += value
    this.count++
  }
}

/** One sample line of a histogram, in prom-client's shape. */
interface HistogramValue {
  readonly labels: LabelValues<string>
  readonly sharedLabels?: LabelValues<string>
  readonly value: number
  readonly metricName: string
  /** prom-client's buckets carry `exemplar: null` (no exemplars here). */
  readonly exemplar?: null
}

/** A histogram's samples, in the shape prom-client's `Registry` reads from a metric. */
interface HistogramData {
  readonly name: string
  readonly help: string
  readonly type: "histogram"
  readonly values: ReadonlyArray<HistogramValue>
  readonly aggregator: "sum"
}

/**
 * A histogram read from its cells at scrape time: a metric object a
 * prom-client `Registry` exposes (`get`, `getForPromString`) with the
 * values prom-client's own `Histogram` gives for the same observations
 * (buckets cumulative with `le`, then `+Inf`, `_sum`, `_count`).
 */
export class CellHistogram<L extends string> {
  readonly type = "histogram" as const
  readonly aggregator = "sum" as const
  private readonly cells: Array<HistogramCell> = []

  constructor(
    readonly name: string,
    readonly help: string,
    readonly bounds: ReadonlyArray<number>,
    registers: ReadonlyArray<Registry>,
  ) {
    for (const registry of registers) registry.registerMetric(this as never)
  }

  /** A new cell for `labels` (call once per label set; cache the result). */
  add(labels: LabelValues<L>): HistogramCell {
    const cell = new HistogramCell(labels, this.bounds)
    this.cells.push(cell)
    return cell
  }

  /** Values with the bucket bound in `labels` and the cell's labels in `sharedLabels`, as prom-client's. */
  getForPromString(): HistogramData {
    const bucket = `${this.name}_bucket`
    const values: Array<HistogramValue> = []
    for (const cell of this.cells) {
      const shared = cell.labels
      let acc = 0
      for (let i = 0; i < this.bounds.length; i++) {
        acc += cell.counts[i]!
        values.push({
          labels: { le: this.bounds[i]! },
          sharedLabels: shared,
          value: acc,
          metricName: bucket,
          exemplar: null,
        })
      }
      values.push({
        labels: { le: "+Inf" },
        sharedLabels: shared,
        value: cell.count,
        metricName: bucket,
        exemplar: null,
      })
      values.push({ labels: {}, sharedLabels: shared, value: cell.sum, metricName: `${this.name}_sum` })
      values.push({ labels: {}, sharedLabels: shared, value: cell.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  /** The same values with each cell's labels merged into `labels` (what `Registry#getMetricsAsJSON` reads). */
  get(): Promise<HistogramData> {
    const data = this.getForPromString()
    const values = data.values.map(({ labels, sharedLabels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }))
    return Promise.resolve({ ...data, values })
  }

  /** Forgets every observation (prom-client's `reset`, for `Registry#resetMetrics`). */
  reset(): void {
    for (const cell of this.cells) {
      cell.counts.fill(0)
      cell.sum = 0
      cell.count = 0
    }
  }
}

const remember = <K, V>(map: Map<K, V>, key: K, value: V): V => {
  map.set(key, value)
  return value
}

/** `make(a)`, computed once per distinct `a`. */
export const cache1 = <A, C>(make: (a: A) => C): ((a: A) => C) => {
  const map = new Map<A, C>()
  return (a) => map.get(a) ?? remember(map, a, make(a))
}

/** `make(a, b)`, computed once per distinct pair (nested Maps, no key string). */
export const cache2 = <A, B, C>(make: (a: A, b: B) => C): ((a: A, b: B) => C) => {
  const map = new Map<A, (b: B) => C>()
  return (a, b) =>
    (
      map.get(a) ??
      remember(
        map,
        a,
        cache1((b: B) => make(a, b)),
      )
    )(b)
}

/** `make(a, b, c)`, computed once per distinct triple (nested Maps, no key string). */
export const cache3 = <A, B, C, R>(make: (a: A, b: B, c: C) => R): ((a: A, b: B, c: C) => R) => {
  const map = new Map<A, (b: B, c: C) => R>()
  return (a, b, c) =>
    (
      map.get(a) ??
      remember(
        map,
        a,
        cache2((b: B, c: C) => make(a, b, c)),
      )
    )(b, c)
}

/** `make(a, b, c, d)`, computed once per distinct quadruple (nested Maps, no key string). */
export const cache4 = <A, B, C, D, R>(
  make: (a: A, b: B, c: C, d: D) => R,
): ((a: A, b: B, c: C, d: D) => R) => {
  const map = new Map<A, (b: B, c: C, d: D) => R>()
  return (a, b, c, d) =>
    (
      map.get(a) ??
      remember(
        map,
        a,
        cache3((b: B, c: C, d: D) => make(a, b, c, d)),
      )
    )(b, c, d)
}
