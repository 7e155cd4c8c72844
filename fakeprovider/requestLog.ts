/**
 * The fake provider's record of what reached it (`GET /_fake/requests`), so a test can see what the gateway
 * sent upstream and whether it went away early.
 */
import type { FakeRequest } from "./exchange.js"

export type { FakeRequest } from "./exchange.js"

/** The answer of `GET /_fake/requests`. */
export interface FakeRequestLog {
  /** Requests recorded since the start or the last reset (not capped). */
  readonly count: number
  /** The last {@link recentLimit} requests, oldest first, newest last. */
  readonly recent: ReadonlyArray<FakeRequest>
}

/** How many requests the log keeps. */
export const recentLimit = 100

/** A bounded log of requests; entries stay live (their `aborted` and `bytes_sent` change) until they drop out. */
export class RequestLog {
  private entries: Array<FakeRequest> = []
  private total = 0

  /** Records a request; the entry is updated in place while its response runs. */
  add(entry: FakeRequest): void {
    this.total++
    this.entries.push(entry)
    if (this.entries.length > recentLimit) this.entries.shift()
  }

  /** A copy of the current state. */
  snapshot(): FakeRequestLog {
    return { count: this.total, recent: this.entries.map((entry) => ({ ...entry })) }
  }

  /** Forgets every request. */
  reset(): void {
    this.entries = []
    this.total = 0
  }
}
