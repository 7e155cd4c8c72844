/** The admin API's answers, as the console reads them (docs/operations.md "The admin API"). */

export interface BudgetView {
  readonly limit_micro_usd: number
  readonly limit_usd: number
  readonly mode: "hard" | "soft"
  /** Periodic budgets (day, week, month): the current period and its spend (null: the store could not be read). */
  readonly period?: string
  readonly spend_micro_usd?: number | null
  readonly reserved_micro_usd?: number | null
  readonly remaining_micro_usd?: number | null
}

export interface WindowView {
  readonly limit: number | null
  readonly current: number
  readonly previous: number
  readonly estimate: number
}

export interface TenantView {
  readonly name: string
  readonly keys: ReadonlyArray<{
    readonly id: string
    readonly source: "config" | "runtime"
    readonly budgets: Readonly<Record<string, BudgetView | null>>
  }>
  readonly routes: "*" | ReadonlyArray<string>
  readonly limits: {
    readonly requests_per_minute: number | null
    readonly tokens_per_minute: number | null
    readonly concurrent_requests: number | null
  }
  readonly budgets: Readonly<Record<string, BudgetView | null>>
  readonly month: {
    readonly month?: string
    readonly spend_micro_usd: number
    readonly reserved_micro_usd: number
    readonly remaining_micro_usd: number | null
  } | null
  readonly sessions: ReadonlyArray<{
    readonly id: string
    readonly spend_micro_usd: number
    readonly reserved_micro_usd: number
    readonly last_request_at: string
  }> | null
  readonly rate_limits: { readonly requests: WindowView; readonly tokens: WindowView } | null
  readonly store_error?: string
}

export interface Breaker {
  readonly tenant: string | null
  readonly provider: string
  readonly model: string
  readonly region: string | null
  readonly state: "closed" | "open" | "half_open"
  readonly failure_ratio: number
  readonly attempts: number
  readonly testable_at: string | null
  readonly cooldown_until: string | null
}

export interface Totals {
  readonly requests: number
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_tokens: number
  readonly cache_write_tokens: number
  readonly cost_micro_usd: number
  /** micro-USD the prompt cache saved (ADR 0073). */
  readonly cache_saved_micro_usd: number
  /** cache read / all prompt tokens, 0..1. */
  readonly cache_hit_ratio: number
}

export interface UsageAnswer {
  readonly totals: Totals
  readonly groups?: ReadonlyArray<Totals & { readonly key: string | null }>
}

export interface Series {
  readonly resolution: "minute" | "hour" | "day"
  readonly t: ReadonlyArray<number>
  readonly requests: ReadonlyArray<number>
  readonly errors: ReadonlyArray<number>
  readonly cost_micro_usd: ReadonlyArray<number>
}

export interface KeyView {
  readonly id: string
  readonly tenant: string
  readonly source: "config" | "runtime"
  readonly created_at: string | null
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly last_used_at: string | null
}

export interface CreatedKey {
  readonly id: string
  readonly tenant: string
  readonly secret: string
  readonly expires_at: string | null
}
