import { Clock, Context, Effect, Layer } from "effect"
import { LiveConfig } from "../config/LiveConfig.js"
import { Window } from "./Window.js"

/** Extra attempts the budget always permits in the recent minute, whatever the traffic. */
export const RETRY_BUDGET_FLOOR = 10

const REQUESTS = 0
const EXTRA = 1

/**
 * The process-wide retry budget (reliability.md "Retry budget"): extra
 * attempts — retries and fallbacks alike — in the recent minute may not
 * exceed 10 + `retry.budget_ratio` × requests in the recent minute.
 * Skipped targets do not consume it. A restart clears it.
 */
export class RetryBudget extends Context.Service<
  RetryBudget,
  {
    /** Counts one request that reached the attempt loop. */
    readonly recordRequest: () => void
    /** Consumes one extra attempt if the budget permits it; false when it is spent. */
    readonly tryConsume: () => boolean
    /** Extra attempts still permitted now. */
    readonly remaining: () => number
  }
>()("tollgate/reliability/RetryBudget") {}

/** The budget arithmetic, for a given ratio; `now` in epoch ms. */
export const makeRetryBudget = (
  ratio: number | (() => number),
  now: () => number,
): RetryBudget["Service"] => {
  const window = new Window(2)
  // A reload may change the ratio (ADR 0052): read it when used.
  const ratioNow = typeof ratio === "function" ? ratio : () => ratio
  // Whole attempts; the 1e-6 absorbs float error (0.57 × 200 is 113.99999999999999, not 114).
  const allowed = (t: number) =>
    RETRY_BUDGET_FLOOR + Math.floor(ratioNow() * window.sum(t, REQUESTS) + 1e-6) - window.sum(t, EXTRA)
  return {
    recordRequest: () => window.add(now(), REQUESTS),
    tryConsume: () => {
      const t = now()
      if (allowed(t) < 1) return false
      window.add(t, EXTRA)
      return true
    },
    remaining: () => Math.max(0, Math.floor(allowed(now()))),
  }
}

export const layer = Layer.effect(
  RetryBudget,
  Effect.gen(function* () {
    const live = yield* LiveConfig
    const clock = yield* Clock.Clock
    return makeRetryBudget(
      () => live.get().retry.budgetRatio,
      () => clock.currentTimeMillisUnsafe(),
    )
  }),
)
