/**
 * The config of route strategies and aliases (ADR 0073): `strategy`,
 * `sticky`, `weight` and `aliases:`, each with its problems by path.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { baseConfig, decode, patch, problemsOf } from "./fixtures.js"

const sonnet = "claude-sonnet-5-5"

describe("route strategies", () => {
  it.effect("default to ordered, not sticky, every weight 0", () =>
    Effect.gen(function* () {
      const { config } = yield* decode(baseConfig())
      const route = config.routes.get("claude")!
      assert.strictEqual(route.strategy, "ordered")
      assert.strictEqual(route.sticky, false)
      assert.isTrue(route.targets.every((t) => t.weight === 0 && t.alias === undefined))
      assert.strictEqual(config.aliases.size, 0)
    }),
  )

  it.effect("weighted and sticky, with weights; a target without weight is a fallback only", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["routes", "claude", "strategy"], "weighted")
      raw = patch(raw, ["routes", "claude", "sticky"], true)
      raw = patch(
        raw,
        ["routes", "claude", "targets"],
        [
          { provider: "anthropic", model: sonnet, weight: 3 },
          { provider: "anthropic", model: "claude-opus-5", weight: 1 },
          { provider: "anthropic", model: "claude-haiku-5" },
        ],
      )
      const { config } = yield* decode(raw)
      const route = config.routes.get("claude")!
      assert.strictEqual(route.strategy, "weighted")
      assert.strictEqual(route.sticky, true)
      assert.deepStrictEqual(
        route.targets.map((t) => t.weight),
        [3, 1, 0],
      )
    }),
  )

  it.effect("refuse a weight on an ordered route, a weighted route without weights, bad values", () =>
    Effect.gen(function* () {
      const weighted = patch(baseConfig(), ["routes", "claude", "targets", 0, "weight"], 2)
      assert.deepStrictEqual(yield* problemsOf(weighted), [
        "routes.claude.targets[0].weight: only a route with strategy: weighted picks by weight (this route's strategy is ordered)",
      ])
      const none = patch(baseConfig(), ["routes", "claude", "strategy"], "weighted")
      assert.deepStrictEqual(yield* problemsOf(none), [
        "routes.claude.targets: strategy weighted needs a target with weight above 0",
      ])
      let bad = patch(none, ["routes", "claude", "targets", 0, "weight"], 1.5)
      bad = patch(bad, ["routes", "claude", "sticky"], "yes")
      bad = patch(bad, ["routes", "gpt", "strategy"], "random")
      assert.deepStrictEqual([...(yield* problemsOf(bad))].sort(), [
        "routes.claude.sticky: must be true or false",
        "routes.claude.targets[0].weight: must be an integer from 0 to 1000000",
        'routes.gpt.strategy: must be "ordered" or "weighted"',
      ])
    }),
  )
})

describe("aliases", () => {
  it.effect("a route's target named by an alias gets the alias's provider and model", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["aliases"], {
        main: { provider: "anthropic", model: "claude-sonnet-6" },
      })
      raw = patch(raw, ["routes", "claude", "targets"], [{ alias: "main" }])
      raw = patch(raw, ["routes", "claude-too", "api"], "anthropic")
      raw = patch(
        raw,
        ["routes", "claude-too", "targets"],
        [{ alias: "main" }, { provider: "anthropic", model: sonnet }],
      )
      const { config } = yield* decode(raw, {
        prices: {
          prices: [
            { model: "claude-sonnet-6", input: 3, output: 10 },
            { model: sonnet, input: 3, output: 10 },
          ],
        },
      })
      for (const name of ["claude", "claude-too"]) {
        assert.deepStrictEqual(config.routes.get(name)!.targets[0], {
          provider: "anthropic",
          model: "claude-sonnet-6",
          weight: 0,
          alias: "main",
        })
      }
      assert.deepStrictEqual(config.aliases.get("main"), { provider: "anthropic", model: "claude-sonnet-6" })
    }),
  )

  it.effect(
    "refuse an unknown alias, an alias with a provider or model, an alias of an unknown provider",
    () =>
      Effect.gen(function* () {
        let raw = patch(baseConfig(), ["aliases"], {
          main: { provider: "anthropic", model: sonnet },
          lost: { provider: "nowhere", model: sonnet },
          broken: { provider: "anthropic" },
        })
        raw = patch(
          raw,
          ["routes", "claude", "targets"],
          [
            { alias: "missing" },
            { alias: "main", model: sonnet },
            { alias: "lost" },
            { alias: "broken" },
            {},
            { provider: "anthropic" },
          ],
        )
        assert.deepStrictEqual(
          [...(yield* problemsOf(raw))].sort(),
          [
            'aliases.lost.provider: unknown provider "nowhere"',
            "aliases.broken.model: is required",
            'routes.claude.targets[0].alias: unknown alias "missing"',
            "routes.claude.targets[1]: give alias, or provider and model, not both",
            "routes.claude.targets[4]: needs provider and model, or alias",
            "routes.claude.targets[5].model: is required",
          ].sort(),
        )
      }),
  )
})
