/**
 * Event counts over the recent minute in six 10-second buckets
 * (reliability.md: "The window uses six 10-second buckets. A bucket expires
 * between 50 and 60 seconds after an event."). An event at time t lands in
 * bucket floor(t / 10 s) and counts until the clock reaches the start of the
 * sixth bucket after it, i.e. for 50 to 60 seconds.
 *
 * Plain and synchronous: callers pass `now` (epoch ms) from their `Clock`.
 * Memory is fixed: six slots of `width` counters, whatever the traffic.
 */

export const BUCKET_MS = 10_000
export const BUCKETS = 6

export class Window {
  private readonly index: Array<number>
  private readonly counts: Array<Float64Array>

  /** `width`: how many independent counters each bucket holds. */
  constructor(readonly width: number) {
    this.index = Array.from({ length: BUCKETS }, () => Number.NEGATIVE_INFINITY)
    this.counts = Array.from({ length: BUCKETS }, () => new Float64Array(width))
  }

  private slot(now: number): Float64Array {
    const bucket = Math.floor(now / BUCKET_MS)
    const at = ((bucket % BUCKETS) + BUCKETS) % BUCKETS
    if (this.index[at] !== bucket) {
      this.index[at] = bucket
      this.counts[at]!.fill(0)
    }
    return this.counts[at]!
  }

  /** Adds `n` to counter `counter` at time `now`. */
  add(now: number, counter: number, n = 1): void {
    this.slot(now)[counter]! += n
  }

  /** The sum of counter `counter` over the buckets that have not expired at `now`. */
  sum(now: number, counter: number): number {
    const current = Math.floor(now / BUCKET_MS)
    let total = 0
    for (let i = 0; i < BUCKETS; i++) {
      const bucket = this.index[i]!
      if (bucket > current - BUCKETS && bucket <= current) total += this.counts[i]![counter]!
    }
    return total
  }

  /** Forgets every event. */
  clear(): void {
    this.index.fill(Number.NEGATIVE_INFINITY)
    for (const counts of this.counts) counts.fill(0)
  }
}
