import { Context, Layer } from "effect"

/** The seed's worst-case overspend, summed over a tenant's requests open right now. */
export interface OverspendBound {
  /** Admitted requests not yet settled. */
  readonly open: number
  /**
   * Σ (max_tokens − reserved output tokens) × output price over open requests,
   * micro-USD (rounded up). The input-estimate error adds to this and is only
   * known when the provider reports usage (limits-and-budgets.md "Worst-case overspend").
   */
  readonly microUsd: number
  /** Open requests with no output limit (OpenAI permits this): their output has no bound. */
  readonly unbounded: number
}

interface TenantOpen {
  open: number
  /** micro-USD × 1,000,000 (exact integer sum before the one rounding). */
  scaled: number
  unbounded: number
}

/**
 * The requests admitted and not yet settled, per tenant — what the live
 * overspend bound is made of. Plain counters, updated twice per request.
 * `excess` is a request's output part of the bound, micro-USD × 1,000,000
 * (undefined: the request has no output limit, so no bound).
 */
export class OpenRequests extends Context.Service<
  OpenRequests,
  {
    readonly admitted: (tenant: string, excess: number | undefined) => void
    readonly done: (tenant: string, excess: number | undefined) => void
    readonly bound: (tenant: string) => OverspendBound
    readonly tenants: () => ReadonlyArray<string>
  }
>()("tollgate/ops/OpenRequests") {}

const EMPTY: OverspendBound = { open: 0, microUsd: 0, unbounded: 0 }

export const make = () => {
  const byTenant = new Map<string, TenantOpen>()
  return {
    admitted: (tenant: string, excess: number | undefined) => {
      let t = byTenant.get(tenant)
      if (t === undefined) byTenant.set(tenant, (t = { open: 0, scaled: 0, unbounded: 0 }))
      t.open++
      if (excess === undefined) t.unbounded++
      else t.scaled += excess
    },
    done: (tenant: string, excess: number | undefined) => {
      const t = byTenant.get(tenant)
      if (t === undefined) return
      t.open--
      if (excess === undefined) t.unbounded--
      else t.scaled -= excess
    },
    bound: (tenant: string): OverspendBound => {
      const t = byTenant.get(tenant)
      if (t === undefined) return EMPTY
      return { open: t.open, microUsd: Math.ceil(t.scaled / 1_000_000), unbounded: t.unbounded }
    },
    tenants: () => [...byTenant.keys()],
  }
}

export const layer = Layer.sync(OpenRequests, make)
