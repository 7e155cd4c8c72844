import { Context, Layer } from "effect"
import type { RequestContext } from "../gateway/context.js"

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
 */
export class OpenRequests extends Context.Service<
  OpenRequests,
  {
    readonly admitted: (ctx: RequestContext) => void
    readonly done: (ctx: RequestContext) => void
    readonly bound: (tenant: string) => OverspendBound
    readonly tenants: () => ReadonlyArray<string>
  }
>()("tollgate/ops/OpenRequests") {}

const EMPTY: OverspendBound = { open: 0, microUsd: 0, unbounded: 0 }

/** The output part of the worst case of one request, micro-USD × 1,000,000; undefined when unbounded. */
const excessOf = (ctx: RequestContext): number | undefined => {
  const maxTokens = ctx.request?.maxTokens
  if (maxTokens === undefined) return undefined
  let price = 0
  // The reservation was made at the most expensive target; so is the bound.
  for (const p of ctx.routePrices) price = Math.max(price, p.output)
  return Math.max(0, maxTokens - ctx.reservedOutput) * price
}

export const make = () => {
  const byTenant = new Map<string, TenantOpen>()
  return {
    admitted: (ctx: RequestContext) => {
      if (ctx.endpoint === "/v1/messages/count_tokens") return
      const name = ctx.principal.tenant.name
      let t = byTenant.get(name)
      if (t === undefined) byTenant.set(name, (t = { open: 0, scaled: 0, unbounded: 0 }))
      const excess = excessOf(ctx)
      t.open++
      if (excess === undefined) t.unbounded++
      else t.scaled += excess
      // A flag on the request rather than a WeakSet: weak collections cost the garbage collector extra
      // work for every young object they hold.
      ctx.openCounted = true
    },
    done: (ctx: RequestContext) => {
      if (!ctx.openCounted) return
      ctx.openCounted = false
      const t = byTenant.get(ctx.principal.tenant.name)
      if (t === undefined) return
      const excess = excessOf(ctx)
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
