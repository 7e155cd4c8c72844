/**
 * Route strategies (ADR 0073): the order a request tries its route's
 * targets in. `ordered` is the file's order; `weighted` picks the first
 * target by weight and falls back down the rest in the file's order; a
 * `sticky` route starts with the target that served the session's last
 * request, when the store remembers one that is still a target of the
 * route. Every order is made once per route (config objects are replaced,
 * never changed, on reload), so choosing one allocates nothing.
 */
import type { RouteConfig, TargetConfig } from "../config/model.js"
import { sessionTargetId } from "../limits/Store.js"

export interface RoutePlan {
  /** `orders[i]`: target i first, then the others in the file's order (`orders[0]` is the file's order). */
  readonly orders: ReadonlyArray<ReadonlyArray<TargetConfig>>
  /** Running sums of the weights, by target. */
  readonly cumulative: ReadonlyArray<number>
  readonly totalWeight: number
  /** Each target's name in the store (`sessionTargetId`), by index. */
  readonly ids: ReadonlyArray<string>
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
  plan = {
    orders,
    cumulative,
    totalWeight: total,
    ids,
    byId,
    idOf: new Map(targets.map((t, i) => [t, ids[i]!])),
  }
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
