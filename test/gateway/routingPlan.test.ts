/**
 * Route strategies in-process (ADR 0073): the orders a route's plan holds,
 * and weighted picks over 10,000 requests within 2 % of the weights, drawn
 * from a seeded `Random` (the gateway's picks read the layer's `Random`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Random } from "effect"
import type { RouteConfig, TargetConfig } from "../../src/config/model.js"
import { pickWeighted, routePlan } from "../../src/gateway/routing.js"

const target = (provider: string, weight: number): TargetConfig => ({
  provider,
  model: "claude-sonnet-5-5",
  weight,
  alias: undefined,
})

const route = (targets: ReadonlyArray<TargetConfig>): RouteConfig => ({
  name: "claude",
  api: "anthropic",
  translate: false,
  retry: { maxAttempts: 3, budgetRatio: 0.1 },
  timeouts: { connectMs: 5_000, firstTokenMs: 60_000, idleMs: 60_000, totalMs: 600_000 },
  targets,
  strategy: "weighted",
  sticky: false,
})

describe("route plans", () => {
  it("hold, for each target, the order that starts with it and goes on in the file's order", () => {
    const targets = [target("a", 1), target("b", 0), target("c", 2)]
    const plan = routePlan(route(targets))
    assert.deepStrictEqual(
      plan.orders.map((order) => order.map((t) => t.provider)),
      [
        ["a", "b", "c"],
        ["b", "a", "c"],
        ["c", "a", "b"],
      ],
    )
    assert.strictEqual(plan.orders[0], targets)
    assert.strictEqual(plan.byId.get("c\nclaude-sonnet-5-5"), 2)
    assert.strictEqual(plan.idOf.get(targets[1]!), "b\nclaude-sonnet-5-5")
  })

  it("are made once per route", () => {
    const r = route([target("a", 1)])
    assert.strictEqual(routePlan(r), routePlan(r))
  })

  it("never pick a target of weight 0, and pick by the running sums at their edges", () => {
    const plan = routePlan(route([target("a", 1), target("fallback", 0), target("c", 3)]))
    assert.strictEqual(pickWeighted(plan, 0), 0)
    assert.strictEqual(pickWeighted(plan, 0.2499), 0)
    assert.strictEqual(pickWeighted(plan, 0.25), 2)
    assert.strictEqual(pickWeighted(plan, 0.9999999), 2)
  })

  it.effect("pick within 2 % of the weights over 10,000 requests (seeded Random)", () =>
    Effect.gen(function* () {
      const weights = [5, 3, 0, 2]
      const plan = routePlan(route(weights.map((w, i) => target(`t${i}`, w))))
      const counts = [0, 0, 0, 0]
      for (let i = 0; i < 10_000; i++) counts[pickWeighted(plan, yield* Random.next)]!++
      weights.forEach((w, i) => {
        assert.isBelow(Math.abs(counts[i]! / 10_000 - w / 10), 0.02, `target ${i}: ${counts[i]}`)
      })
      assert.strictEqual(counts[2], 0)
    }).pipe(Random.withSeed("tollgate-weighted")),
  )
})
