import type { IncomingHttpHeaders } from "node:http"
import type { PriceEntry, RouteConfig, TargetConfig, TollgateConfig } from "../config/model.js"
import { priceFor } from "../config/pricing.js"
import { estimateInputTokens } from "../domain/estimate.js"
import { deriveSessionId, isValidSessionId } from "../limits/session.js"
import { costMicroUsd } from "../meter/cost.js"
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

/** What the limits are asked for one request, and the estimates behind it (the plan stage's value). */
export interface Plan {
  readonly tokenCost: number
  readonly reserve: number
  readonly sessionId: string | undefined
  /** Estimated input tokens of the request (ADR 0003); 0 for count_tokens. */
  readonly inputEstimate: number
  /** Output tokens reserved: the smaller of max_tokens and reservation.output_tokens (ADR 0018). */
  readonly reservedOutput: number
  /** Most output tokens the request may generate: `max_tokens` or its equivalent, 0 for embeddings; undefined: unbounded. */
  readonly maxOutput: number | undefined
  /** Prices of the route's targets (unpriced targets left out): the reservation and the overspend bound use the highest. */
  readonly routePrices: ReadonlyArray<PriceEntry>
}

/**
 * The admission plan: the session (explicit header, else derived), the
 * token cost (input estimate + reserved output; 0 for count_tokens, which
 * only counts against the request limit; embeddings reserve no output), and the reservation — the
 * highest estimated cost among the route's targets (reliability.md
 * "Budgets and timeouts").
 */
export const planAdmission = (
  config: TollgateConfig,
  price: (target: TargetConfig) => PriceEntry | undefined,
  tenant: string,
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
    sessionId = deriveSessionId(request.endpoint, tenant, json)
  }
  if (request.endpoint === "/v1/messages/count_tokens") {
    return {
      tokenCost: 0,
      reserve: 0,
      sessionId,
      inputEstimate: 0,
      reservedOutput: 0,
      maxOutput: 0,
      routePrices: [],
    }
  }
  const inputEstimate = estimateInputTokens(json)
  // Embeddings generate no output tokens.
  const reservedOutput =
    request.endpoint === "/v1/embeddings"
      ? 0
      : Math.min(request.maxTokens ?? config.reservation.outputTokens, config.reservation.outputTokens)
  const estimate = {
    inputTokens: inputEstimate,
    outputTokens: reservedOutput,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  }
  let reserve = 0
  // Sized to the route (`map`), not grown by `push`: a stream holds its plan while it is open.
  const prices = route.targets.map(price)
  const routePrices = (
    prices.includes(undefined) ? prices.filter((p) => p !== undefined) : prices
  ) as Array<PriceEntry>
  for (const p of routePrices) reserve = Math.max(reserve, costMicroUsd(estimate, p))
  return {
    tokenCost: inputEstimate + reservedOutput,
    reserve,
    sessionId,
    inputEstimate,
    reservedOutput,
    maxOutput: request.endpoint === "/v1/embeddings" ? 0 : request.maxTokens,
    routePrices,
  }
}

/** The estimate at one target's price: the floor of an estimated or incomplete charge. */
export const targetEstimate = (plan: Plan, price: PriceEntry | undefined): number =>
  price === undefined
    ? 0
    : costMicroUsd(
        {
          inputTokens: plan.inputEstimate,
          outputTokens: plan.reservedOutput,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
        },
        price,
      )

/** The output part of the seed's worst-case overspend of one request, micro-USD × 1,000,000; undefined when unbounded. */
export const overspendExcess = (plan: Plan): number | undefined => {
  const maxTokens = plan.maxOutput
  if (maxTokens === undefined) return undefined
  let price = 0
  // The reservation was made at the most expensive target; so is the bound.
  for (const p of plan.routePrices) price = Math.max(price, p.output)
  return Math.max(0, maxTokens - plan.reservedOutput) * price
}
