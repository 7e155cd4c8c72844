import type { Counter, LabelValues } from "prom-client"

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
