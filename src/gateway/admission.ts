import type { IncomingHttpHeaders } from "node:http"
import type { PriceEntry, RouteConfig, TargetConfig, TollgateConfig } from "../config/model.js"
import { priceFor } from "../config/pricing.js"
import { estimateInputTokens } from "../limits/estimate.js"
import { deriveSessionId, isValidSessionId } from "../limits/session.js"
import { costMicroUsd } from "../meter/cost.js"
import type { RequestContext } from "./context.js"
import { InvalidRequest } from "../domain/errors.js"
import type { ParsedRequest } from "../domain/request.js"

/** Prices by provider + model, looked up once per target instead of per request. */
export const makePriceBook = (config: TollgateConfig) => {
  const cache = new Map<string, PriceEntry | undefined>()
  return (target: TargetConfig): PriceEntry | undefined => {
    const key = `${target.provider}\u0000${target.model}`
    if (cache.has(key)) return cache.get(key)
    const provider = config.providers.get(target.provider)
    const price = provider === undefined ? undefined : priceFor(config.prices, provider, target.model)
    cache.set(key, price)
    return price
  }
}

/** What the limits are asked for one request. */
export interface Plan {
  readonly tokenCost: number
  readonly reserve: number
  readonly sessionId: string | undefined
}

/**
 * Fills the context's estimates and returns the admission plan: the session
 * (explicit header, else derived), the token cost (input estimate + reserved
 * output; 0 for count_tokens, which only counts against the request limit),
 * and the reservation — the highest estimated cost among the route's
 * targets (reliability.md "Budgets and timeouts").
 */
export const planAdmission = (
  config: TollgateConfig,
  price: (target: TargetConfig) => PriceEntry | undefined,
  ctx: RequestContext,
  request: ParsedRequest,
  json: Readonly<Record<string, unknown>>,
  route: RouteConfig,
  headers: IncomingHttpHeaders,
): Plan | InvalidRequest => {
  const explicit = headers["x-tollgate-session"]
  let sessionId: string | undefined
  if (explicit !== undefined) {
    if (typeof explicit !== "string" || !isValidSessionId(explicit)) {
      return new InvalidRequest({
        message: "x-tollgate-session: must be 1 to 128 visible ASCII characters without spaces",
      })
    }
    sessionId = explicit
  } else if (config.sessions.derive) {
    sessionId = deriveSessionId(ctx.api, ctx.principal.tenant.name, json)
  }
  ctx.session = sessionId ?? null
  if (request.endpoint === "/v1/messages/count_tokens") return { tokenCost: 0, reserve: 0, sessionId }

  const input = estimateInputTokens(json)
  const output = Math.min(
    request.maxTokens ?? config.reservation.outputTokens,
    config.reservation.outputTokens,
  )
  ctx.inputEstimate = input
  ctx.reservedOutput = output
  const estimate = { inputTokens: input, outputTokens: output, cacheReadTokens: 0, cacheWriteTokens: 0 }
  let reserve = 0
  const prices: Array<PriceEntry> = []
  for (const target of route.targets) {
    const p = price(target)
    if (p === undefined) continue
    prices.push(p)
    reserve = Math.max(reserve, costMicroUsd(estimate, p))
  }
  ctx.routePrices = prices
  return { tokenCost: input + output, reserve, sessionId }
}

/** The estimate at one target's price: the floor of an estimated or incomplete charge. */
export const targetEstimate = (ctx: RequestContext, price: PriceEntry | undefined): number =>
  price === undefined
    ? 0
    : costMicroUsd(
        {
          inputTokens: ctx.inputEstimate,
          outputTokens: ctx.reservedOutput,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
        },
        price,
      )
