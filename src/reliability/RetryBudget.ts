import { Clock, Context, Effect, Layer } from "effect"
import { fleetPart } from "./fleet.js"
import { makeSharedRetryBudget, RETRY_SCRIPTS, type RetryRedis } from "./sharedRetryBudget.js"
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
    /** Calls to Redis for the fleet's budget that failed (`breaker.shared`; 0 otherwise). */
    readonly storeErrors: () => number
  }
>()("tollgate/reliability/RetryBudget") {}

/** The budget of one process, with `consume` for an extra attempt the fleet's budget permitted. */
export interface LocalRetryBudget extends Omit<RetryBudget["Service"], "storeErrors"> {
  /** Counts one extra attempt without asking (the fleet's budget decided). */
  readonly consume: () => void
}

/** The budget arithmetic, for a given ratio; `now` in epoch ms. */
export const makeRetryBudget = (ratio: number | (() => number), now: () => number): LocalRetryBudget => {
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
    consume: () => window.add(now(), EXTRA),
  }
}

export const layer = Layer.effect(
  RetryBudget,
  Effect.gen(function* () {
    const live = yield* LiveConfig
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const ratio = () => live.get().retry.budgetRatio
    const local = makeRetryBudget(ratio, now)
    // `breaker.shared` (ADR 0055): the budget counts the fleet's requests and extra attempts, in Redis.
    const shared = yield* fleetPart<RetryRedis, RetryBudget["Service"]>(
      live.get(),
      RETRY_SCRIPTS,
      {
        down: "retry budget: redis unavailable; this copy uses its own budget until it answers",
        up: "retry budget: redis answers again; the fleet's budget decides",
      },
      (redis, onStore) => makeSharedRetryBudget({ local, redis, ratio, now, onStore }),
    )
    return shared ?? { ...local, storeErrors: () => 0 }
  }),
)
