import { Context, Layer } from "effect"

/**
 * How far the usage database is behind (SPEC Part 3), for `/metrics`: the
 * writer (src/usagedb/Writer.ts) keeps these counts, the metrics read them
 * at scrape time. Zeros when no database is configured.
 */
export interface UsageDbCounts {
  /** Records in the usage file (or waiting to be written to it) that the database has not confirmed. */
  pending: number
  /** Batches the database did not take (refused, failed, timed out) since start. */
  errors: number
}

export class UsageDbStats extends Context.Service<UsageDbStats, UsageDbCounts>()(
  "tollgate/ops/UsageDbStats",
) {
  /** Fresh zero counts. */
  static readonly layer: Layer.Layer<UsageDbStats> = Layer.sync(UsageDbStats, () => ({
    pending: 0,
    errors: 0,
  }))
}
