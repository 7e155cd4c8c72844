import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { baseConfig, decode, HASH_A, HASH_B, patch, problemsOf } from "./fixtures.js"

const target = (provider: string, model = "claude-sonnet-5-5") => ({ provider, model })

describe("config validate rejects", () => {
  it.effect("a route with no targets", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(patch(baseConfig(), ["routes", "claude", "targets"], []))
      assert.deepStrictEqual(problems, ["routes.claude.targets: must have 1 to 10 targets, has 0"])
    }),
  )

  it.effect("a route with more than 10 targets, but not one with 10", () =>
    Effect.gen(function* () {
      const ten = Array.from({ length: 10 }, () => target("anthropic"))
      assert.deepStrictEqual(yield* problemsOf(patch(baseConfig(), ["routes", "claude", "targets"], ten)), [])
      const eleven = [...ten, target("anthropic")]
      assert.deepStrictEqual(
        yield* problemsOf(patch(baseConfig(), ["routes", "claude", "targets"], eleven)),
        ["routes.claude.targets: must have 1 to 10 targets, has 11"],
      )
    }),
  )

  it.effect("targets whose provider does not serve the route's API", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["providers", "local"], { kind: "ollama" })
      raw = patch(raw, ["providers", "vertex"], { kind: "vertex", project: "p", region: "us-east5" })
      raw = patch(
        raw,
        ["routes", "claude", "targets"],
        [target("anthropic"), target("openai"), target("local")],
      )
      raw = patch(raw, ["routes", "gpt", "targets"], [target("openai", "gpt-5-mini"), target("vertex")])
      const problems = yield* problemsOf(raw)
      assert.deepStrictEqual(problems, [
        'routes.claude.targets[1].provider: provider "openai" is kind openai; an anthropic route takes only anthropic, vertex, bedrock providers (or set translate: true)',
        'routes.claude.targets[2].provider: provider "local" is kind ollama; an anthropic route takes only anthropic, vertex, bedrock providers (or set translate: true)',
        'routes.gpt.targets[1].provider: provider "vertex" is kind vertex; an openai route takes only openai, ollama, azure, gemini providers (or set translate: true)',
      ])
    }),
  )

  it.effect("no mix of provider kinds, unless the route says translate: true", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["routes", "claude", "targets"], [target("anthropic"), target("openai")])
      assert.strictEqual((yield* problemsOf(raw)).length, 1)
      raw = patch(raw, ["routes", "claude", "translate"], true)
      assert.deepStrictEqual(yield* problemsOf(raw), [])
      const { config } = yield* decode(raw)
      assert.strictEqual(config.routes.get("claude")!.translate, true)
      assert.strictEqual(config.routes.get("gpt")!.translate, false)
      assert.deepStrictEqual(yield* problemsOf(patch(raw, ["routes", "claude", "translate"], "yes")), [
        "routes.claude.translate: must be true or false",
      ])
    }),
  )

  it.effect("an unknown provider in a target", () =>
    Effect.gen(function* () {
      const raw = patch(
        baseConfig(),
        ["routes", "claude", "targets"],
        [target("anthropic"), target("anthropic"), target("foo")],
      )
      assert.deepStrictEqual(yield* problemsOf(raw), [
        'routes.claude.targets[2].provider: unknown provider "foo"',
      ])
    }),
  )

  it.effect("an unknown route in a tenant's routes", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["tenants", "acme", "routes"], ["claude", "gemini"])
      assert.deepStrictEqual(yield* problemsOf(raw), ['tenants.acme.routes[1]: unknown route "gemini"'])
    }),
  )

  it.effect("an unknown provider kind", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["providers", "gemini"], { kind: "google" })
      assert.deepStrictEqual(yield* problemsOf(raw), [
        'providers.gemini.kind: unknown provider kind "google" (expected one of: anthropic, openai, vertex, ollama, bedrock, azure, gemini)',
      ])
    }),
  )

  it.effect("a key hash that is not 64 hex characters", () =>
    Effect.gen(function* () {
      const raw = patch(
        baseConfig(),
        ["tenants", "acme", "keys"],
        [
          { id: "ci", sha256: HASH_A },
          { id: "laptop", sha256: "9f86d081884c7d65" },
        ],
      )
      assert.deepStrictEqual(yield* problemsOf(raw), [
        "tenants.acme.keys[1].sha256: must be 64 hex characters",
      ])
    }),
  )

  it.effect("a key hash that appears twice, across tenants and in any case", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["tenants", "beta"], {
        keys: [
          { id: "k1", sha256: HASH_B },
          { id: "k2", sha256: HASH_A.toUpperCase() },
        ],
        routes: ["gpt"],
      })
      assert.deepStrictEqual(yield* problemsOf(raw), [
        "tenants.beta.keys[1].sha256: duplicate key hash, also at tenants.acme.keys[0].sha256",
      ])
    }),
  )

  it.effect("a key hash that appears twice in one tenant, and a repeated key id", () =>
    Effect.gen(function* () {
      const raw = patch(
        baseConfig(),
        ["tenants", "acme", "keys"],
        [
          { id: "ci", sha256: HASH_A },
          { id: "ci", sha256: HASH_A },
        ],
      )
      assert.deepStrictEqual(yield* problemsOf(raw), [
        'tenants.acme.keys[1].id: duplicate key id "ci", first at keys[0]',
        "tenants.acme.keys[1].sha256: duplicate key hash, also at tenants.acme.keys[0].sha256",
      ])
    }),
  )

  it.effect("a tenant with a budget that can reach a target with no price", () =>
    Effect.gen(function* () {
      let raw = patch(
        baseConfig(),
        ["routes", "claude", "targets"],
        [target("anthropic"), target("anthropic", "claude-opus-9")],
      )
      raw = patch(raw, ["tenants", "acme", "budgets"], { month: { limit_usd: 10, mode: "hard" } })
      assert.deepStrictEqual(yield* problemsOf(raw), [
        'tenants.acme.budgets: routes.claude.targets[1] (provider "anthropic", model "claude-opus-9") has no price in /etc/tollgate/pricing.yaml',
      ])
    }),
  )

  it.effect("a key's budget needs prices too: the problem names the key's budgets", () =>
    Effect.gen(function* () {
      let raw = patch(
        baseConfig(),
        ["routes", "claude", "targets"],
        [target("anthropic"), target("anthropic", "claude-opus-9")],
      )
      raw = patch(raw, ["tenants", "acme", "keys", 0, "budgets"], { day: { limit_usd: 1, mode: "hard" } })
      assert.deepStrictEqual(yield* problemsOf(raw), [
        'tenants.acme.keys[0].budgets: routes.claude.targets[1] (provider "anthropic", model "claude-opus-9") has no price in /etc/tollgate/pricing.yaml',
      ])
    }),
  )

  it.effect("a missing price only matters to tenants with a budget that reach the target", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["routes", "opus"], {
        api: "anthropic",
        targets: [target("anthropic", "claude-opus-9")],
      })
      raw = patch(raw, ["tenants", "acme", "routes"], ["claude", "gpt"])
      raw = patch(raw, ["tenants", "acme", "budgets"], { session: { limit_usd: 1, mode: "soft" } })
      raw = patch(raw, ["tenants", "free"], { keys: [{ id: "k", sha256: HASH_B }], routes: "*" })
      assert.deepStrictEqual(yield* problemsOf(raw), [])
    }),
  )

  it.effect("Ollama targets need no price even for budgets", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["providers", "local"], { kind: "ollama" })
      raw = patch(raw, ["routes", "llama"], { api: "openai", targets: [target("local", "llama3.2")] })
      raw = patch(raw, ["tenants", "acme", "budgets"], { month: { limit_usd: 1, mode: "hard" } })
      const { config } = yield* decode(raw)
      assert.deepStrictEqual(config.routes.get("llama")!.targets, [
        { provider: "local", model: "llama3.2", weight: 0, alias: undefined },
      ])
    }),
  )
})

describe("provider key env vars", () => {
  it.effect("unset: a warning in validate, an error in serve", () =>
    Effect.gen(function* () {
      const env = { ANTHROPIC_API_KEY: "sk-ant" }
      const message = "providers.openai.api_key_env: environment variable OPENAI_API_KEY is unset or empty"
      const { warnings } = yield* decode(baseConfig(), { env, mode: "validate" })
      assert.deepStrictEqual(warnings, [message])
      assert.deepStrictEqual(yield* problemsOf(baseConfig(), { env, mode: "serve" }), [message])
    }),
  )

  it.effect("empty counts as unset", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(baseConfig(), {
        env: { ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "x" },
      })
      assert.deepStrictEqual(problems, [
        "providers.anthropic.api_key_env: environment variable ANTHROPIC_API_KEY is unset or empty",
      ])
    }),
  )

  it.effect("a Vertex provider is checked only when it names access_token_env", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["providers", "adc"], {
        kind: "vertex",
        project: "p",
        region: "us-east5",
      })
      raw = patch(raw, ["providers", "ci"], {
        kind: "vertex",
        project: "p",
        region: "us-east5",
        access_token_env: "VERTEX_TOKEN",
      })
      assert.deepStrictEqual(yield* problemsOf(raw), [
        "providers.ci.access_token_env: environment variable VERTEX_TOKEN is unset or empty",
      ])
    }),
  )
})

describe("no silent $0", () => {
  const unpriced =
    'routes.claude.targets[1]: provider "anthropic" model "claude-opus-9" has no price in /etc/tollgate/pricing.yaml: its requests will be recorded at cost 0 (add a row for it to the price table)'

  it.effect(
    "a target without a price is a warning in validate and in serve (no tenant with a budget reaches it)",
    () =>
      Effect.gen(function* () {
        const raw = patch(
          baseConfig(),
          ["routes", "claude", "targets"],
          [target("anthropic"), target("anthropic", "claude-opus-9")],
        )
        for (const mode of ["validate", "serve"] as const) {
          const { warnings } = yield* decode(raw, { mode })
          assert.deepStrictEqual(warnings, [unpriced])
        }
      }),
  )

  it.effect("an Ollama target without a row and a priced target are no warning", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["providers", "local"], { kind: "ollama" })
      raw = patch(raw, ["routes", "llama"], { api: "openai", targets: [target("local", "llama3.2")] })
      const { warnings } = yield* decode(raw)
      assert.deepStrictEqual(warnings, [])
    }),
  )

  it.effect("a config without routes or tenants warns that every request will be refused", () =>
    Effect.gen(function* () {
      const routes = "routes: none configured: the gateway will refuse every request (no route to serve it)"
      const tenants =
        "tenants: none configured: the gateway will refuse every request (no tenant holds a key)"
      assert.deepStrictEqual((yield* decode(null)).warnings, [routes, tenants])
      assert.deepStrictEqual((yield* decode(patch(baseConfig(), ["tenants"], undefined))).warnings, [tenants])
      assert.deepStrictEqual((yield* decode(patch(baseConfig(), ["routes"], undefined))).warnings, [routes])
    }),
  )
})

describe("problems", () => {
  it.effect("are all collected, across sections and entries", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["server", "listen"], "8080")
      raw = patch(raw, ["providers", "openai", "base_url"], "api.openai.com")
      raw = patch(raw, ["routes", "claude", "retry"], { max_attempts: 0 })
      raw = patch(raw, ["routes", "claude", "targets", 1], target("foo"))
      raw = patch(raw, ["routes", "gpt", "targets"], [])
      raw = patch(raw, ["tenants", "acme", "routes"], ["claude", "nope"])
      raw = patch(raw, ["tenants", "acme", "limits"], { requests_per_minute: -5 })
      const problems = yield* problemsOf(raw, { env: { ANTHROPIC_API_KEY: "x" } })
      assert.deepStrictEqual(problems, [
        "server.listen: must be host:port with a port from 0 to 65535, e.g. 127.0.0.1:8080 or [::1]:8080",
        "providers.openai.base_url: must be an http:// or https:// URL, e.g. https://api.anthropic.com",
        "routes.claude.retry.max_attempts: must be a positive integer",
        "tenants.acme.limits.requests_per_minute: must be a positive integer",
        'routes.claude.targets[1].provider: unknown provider "foo"',
        "routes.gpt.targets: must have 1 to 10 targets, has 0",
        'tenants.acme.routes[1]: unknown route "nope"',
      ])
    }),
  )

  it.effect("quote names that are not plain words", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["routes", "gpt-4.1"], { api: "openai", targets: [target("nope")] })
      assert.deepStrictEqual(yield* problemsOf(raw), [
        'routes["gpt-4.1"].targets[0].provider: unknown provider "nope"',
      ])
    }),
  )

  it.effect("a config that is not a mapping is one problem", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* problemsOf(["server"]), [
        "/etc/tollgate/tollgate.yaml: must be a mapping of sections",
      ])
    }),
  )

  it.effect("a route name in a failed entry is still known to tenants", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["routes", "claude", "api"], "gemini")
      assert.deepStrictEqual(yield* problemsOf(patch(raw, ["tenants", "acme", "routes"], ["claude"])), [
        'routes.claude.api: must be "anthropic" or "openai"',
      ])
    }),
  )
})
