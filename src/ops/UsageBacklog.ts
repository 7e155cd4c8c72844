import { Context, Layer } from "effect"

/**
 * The usage records held in memory because the usage file refuses writes (a
 * full disk, ADR 0070): the usage log (src/meter/UsageLog.ts) keeps these
 * counts; `/metrics`, `/readyz`, the admission of tenants with hard budgets
 * and the database writer read them.
 */
export interface UsageBacklogCounts {
  /** Records waiting in memory for the file (`tollgate_usage_backlog_records`). */
  records: number
  /** Their bytes (`tollgate_usage_backlog_bytes`). */
  bytes: number
  /** Records given up since start because the backlog was full (`tollgate_usage_records_dropped_total`). */
  dropped: number
  /** True while the backlog is full: new records are dropped, `/readyz` is not ready, hard budgets refused. */
  full: boolean
}

/** Zero counts: nothing held, nothing dropped. */
export const zeroCounts = (): UsageBacklogCounts => ({ records: 0, bytes: 0, dropped: 0, full: false })

export class UsageBacklog extends Context.Service<UsageBacklog, UsageBacklogCounts>()(
  "tollgate/ops/UsageBacklog",
) {
  /** Fresh zero counts. */
  static readonly layer: Layer.Layer<UsageBacklog> = Layer.sync(UsageBacklog, zeroCounts)
}
