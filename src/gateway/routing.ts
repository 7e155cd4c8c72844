/**
 * Route strategies (ADR 0073): the order a request tries its route's
 * targets in. `ordered` is the file's order; `weighted` picks the first
 * target by weight and falls back down the rest in the file's order; a
 * `sticky` route starts with the target that served the session's last
 * request, when the store remembers one that is still a target of the
 * route. Every order is made once per route (config objects are replaced,
 * never changed, on reload), so choosing one allocates nothing.
 */
import { Effect, type Random } from "effect"
import type { RouteConfig, TargetConfig } from "../config/model.js"
import type { Limits } from "../limits/Limits.js"
import { sessionTargetId, sessionTargetLabel } from "../limits/Store.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import type { Progress, RequestInfo } from "./stages.js"

export interface RoutePlan {
  /** `orders[i]`: target i first, then the others in the file's order (`orders[0]` is the file's order). */
  readonly orders: ReadonlyArray<ReadonlyArray<TargetConfig>>
  /** Running sums of the weights, by target. */
  readonly cumulative: ReadonlyArray<number>
  readonly totalWeight: number
  /** Target index by store name (the first, should a route list a target twice). */
  readonly byId: ReadonlyMap<string, number>
  /** Store name by target. */
  readonly idOf: ReadonlyMap<TargetConfig, string>
}

const plans = new WeakMap<RouteConfig, RoutePlan>()

export const routePlan = (route: RouteConfig): RoutePlan => {
  let plan = plans.get(route)
  if (plan !== undefined) return plan
  const targets = route.targets
  const orders = targets.map((first, i) =>
    i === 0 ? targets : [first, ...targets.filter((_, j) => j !== i)],
  )
  const cumulative: Array<number> = []
  let total = 0
  for (const t of targets) cumulative.push((total += t.weight))
  const ids = targets.map((t) => sessionTargetId(t.provider, t.model))
  const byId = new Map<string, number>()
  ids.forEach((id, i) => {
    if (!byId.has(id)) byId.set(id, i)
  })
  plan = { orders, cumulative, totalWeight: total, byId, idOf: new Map(targets.map((t, i) => [t, ids[i]!])) }
  plans.set(route, plan)
  return plan
}

/**
 * The index of the target a weighted pick lands on for `u` in [0, 1): target
 * i with probability weight(i) / total. A route without weights picks 0.
 */
export const pickWeighted = (plan: RoutePlan, u: number): number => {
  if (plan.totalWeight <= 0) return 0
  const at = u * plan.totalWeight
  const cumulative = plan.cumulative
  for (let i = 0; i < cumulative.length; i++) if (at < cumulative[i]!) return i
  return cumulative.length - 1
}

export interface RoutingDeps {
  readonly limits: Limits["Service"]
  readonly telemetry: TelemetryService
  /** Weighted picks (the layer's `Random`: seeded in tests). */
  readonly random: Random.Random
}

/**
 * A request's order of targets, and what a sticky route remembers once a
 * target served it. An ordered route that is not sticky costs nothing: its
 * order is the route's own array, no lookup, no allocation.
 */
export const makeRouting = ({ limits, telemetry, random }: RoutingDeps) => {
  const pick = (route: RouteConfig, plan: RoutePlan, first: number): ReadonlyArray<TargetConfig> => {
    if (first < 0) first = route.strategy === "weighted" ? pickWeighted(plan, random.nextDoubleUnsafe()) : 0
    return plan.orders[first]!
  }

  /**
   * The order to try a weighted or sticky `route`'s targets in (the pipeline takes an ordered route's own
   * array without asking); on a sticky route with a session it sets `progress.sticky`.
   */
  const order = (
    route: RouteConfig,
    tenant: string,
    session: string | undefined,
    progress: Progress,
  ): Effect.Effect<ReadonlyArray<TargetConfig>> => {
    const plan = routePlan(route)
    if (!route.sticky || session === undefined) return Effect.succeed(pick(route, plan, -1))
    const key = { tenant, route: route.name, session }
    return Effect.map(limits.sessionTarget(key), (remembered) => {
      progress.sticky = { key, remembered, moved: undefined }
      return pick(route, plan, remembered === undefined ? -1 : (plan.byId.get(remembered) ?? -1))
    })
  }

  /**
   * A sticky request was served by `target`: remembered when it is not the
   * session's target already; a session that left its target says why (the
   * first target's outcome, or `not_a_target` after a reload took it out).
   */
  const served = (
    route: RouteConfig,
    target: TargetConfig,
    info: RequestInfo,
    progress: Progress,
  ): Effect.Effect<void> => {
    const sticky = progress.sticky!
    const plan = routePlan(route)
    const id = plan.idOf.get(target)!
    if (id === sticky.remembered) return Effect.void
    if (sticky.remembered !== undefined) {
      const moved = {
        from: sessionTargetLabel(sticky.remembered),
        reason: plan.byId.has(sticky.remembered) ? (progress.tally.firstReason ?? "unknown") : "not_a_target",
      }
      sticky.moved = moved
      telemetry.sessionMoved(route.name, target.provider, target.model)
      info.trace?.sessionMoved(moved.from, target, moved.reason)
    }
    return limits.rememberSessionTarget(sticky.key, id)
  }

  return { order, served }
}
