import { Context, Effect, Layer } from "effect"
import { Config } from "../config/Config.js"
import { LiveConfig } from "../config/LiveConfig.js"

/**
 * The request bodies held in memory, counted (issue #16, ADR 0049): all
 * requests together may hold `server.max_buffered_bytes`, and one tenant at
 * most half of it (when more than one is configured), so no tenant can take
 * the memory the others' requests need. A body holds its bytes from the moment they are taken until its
 * request's record is written (its attempts may resend it).
 */
export interface BufferBudget {
  /** Takes `bytes` for `tenant`; false (nothing taken) when the total or the tenant's share would pass its cap. */
  readonly take: (tenant: string, bytes: number) => boolean
  /** Gives back bytes taken for `tenant`. */
  readonly give: (tenant: string, bytes: number) => void
  /** Bytes held now by every request. */
  readonly held: () => number
}

/** `tenants`: how many tenants are configured (now); with one, it may hold the whole budget. */
export const makeBufferBudget = (maxBytes: number, tenants: () => number = () => 2): BufferBudget => {
  const half = Math.floor(maxBytes / 2)
  // One counter per tenant that ever sent a body (tenants come from the config): no map churn per request.
  const byTenant = new Map<string, { held: number }>()
  let total = 0
  return {
    take: (tenant, bytes) => {
      let mine = byTenant.get(tenant)
      if (mine === undefined) byTenant.set(tenant, (mine = { held: 0 }))
      if (total + bytes > maxBytes || mine.held + bytes > (tenants() > 1 ? half : maxBytes)) return false
      total += bytes
      mine.held += bytes
      return true
    },
    give: (tenant, bytes) => {
      const mine = byTenant.get(tenant)
      if (bytes <= 0 || mine === undefined) return
      total -= bytes
      mine.held -= bytes
    },
    held: () => total,
  }
}

/** The process's buffer budget: the Gateway takes and gives bytes, Metrics reads `held` at scrape time. */
export class BodyBuffers extends Context.Service<BodyBuffers, BufferBudget>()("tollgate/ops/BodyBuffers") {}

/** Sized once from `server.max_buffered_bytes` (restart-only, ADR 0052); the tenant count is read live. */
export const layer: Layer.Layer<BodyBuffers, never, Config | LiveConfig> = Layer.effect(
  BodyBuffers,
  Effect.gen(function* () {
    const config = yield* Config
    const live = yield* LiveConfig
    return makeBufferBudget(config.server.maxBufferedBytes, () => live.get().tenants.size)
  }),
)
