import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger, Result } from "effect"
import { Config, makeTestConfig } from "../../src/config/Config.js"
import { decodeConfig, loadConfig } from "../../src/config/load.js"
import { HASH_A } from "./fixtures.js"
import { tempDir } from "../support/tempDirs.js"

const PRICING = "prices:\n  - { model: claude-sonnet-5-5, input: 3, output: 10 }\n"

const CONFIG = `
providers:
  anthropic: { kind: anthropic, api_key_env: TG_LOAD_TEST_KEY }
routes:
  claude:
    api: anthropic
    targets: [{ provider: anthropic, model: claude-sonnet-5-5 }]
tenants:
  acme:
    keys: [{ id: ci, sha256: ${HASH_A} }]
    routes: "*"
    budgets: { month: { limit_usd: 5, mode: hard } }
`

/** A fresh folder holding `etc/tollgate.yaml` (with `extra` prepended) and `etc/pricing.yaml`. */
const setup = (extra: string, files: Record<string, string> = { "etc/pricing.yaml": PRICING }) => {
  const dir = tempDir("tollgate-config-")
  mkdirSync(join(dir, "etc"), { recursive: true })
  writeFileSync(join(dir, "etc/tollgate.yaml"), extra + CONFIG)
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true })
    writeFileSync(join(dir, name), text)
  }
  return { dir, path: join(dir, "etc/tollgate.yaml") }
}

const withEnv = (env: Record<string, string>) =>
  Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
const KEY_ENV = { TG_LOAD_TEST_KEY: "sk-test" }

const problemsOf = <A>(effect: Effect.Effect<A, { readonly problems: ReadonlyArray<string> }>) =>
  Effect.map(
    Effect.result(effect),
    Result.match({ onFailure: (e) => e.problems, onSuccess: () => [] as ReadonlyArray<string> }),
  )

describe("loadConfig", () => {
  it.effect("resolves explicit relative paths against the config file's folder", () =>
    Effect.gen(function* () {
      const { dir, path } = setup("usage: { file: ../data/usage.jsonl }\npricing: { file: pricing.yaml }\n")
      const { config } = yield* loadConfig(path, "serve").pipe(withEnv(KEY_ENV))
      assert.strictEqual(config.path, path)
      assert.strictEqual(config.usageFile, join(dir, "data/usage.jsonl"))
      assert.strictEqual(config.pricingFile, join(dir, "etc/pricing.yaml"))
      assert.deepStrictEqual(
        config.prices.map((price) => price.model),
        ["claude-sonnet-5-5"],
      )
    }),
  )

  it.effect("keeps absolute paths and resolves an absent usage.file against the working directory", () =>
    Effect.gen(function* () {
      const { dir, path } = setup("", { "etc/pricing.yaml": PRICING, "config/pricing.yaml": "prices: []\n" })
      const absolute = yield* decodeConfig(
        {
          usage: { file: "/var/lib/tollgate/usage.jsonl" },
          pricing: { file: join(dir, "etc/pricing.yaml") },
        },
        { path, mode: "validate", cwd: "/elsewhere" },
      )
      assert.strictEqual(absolute.config.usageFile, "/var/lib/tollgate/usage.jsonl")
      assert.strictEqual(absolute.config.pricingFile, join(dir, "etc/pricing.yaml"))
      const defaults = yield* decodeConfig({}, { path, mode: "validate", cwd: dir })
      assert.strictEqual(defaults.config.usageFile, join(dir, "data/usage.jsonl"))
    }),
  )

  it.effect(
    "an absent pricing.file is looked for beside the config, then in the working directory's config/ (ADR 0051)",
    () =>
      Effect.gen(function* () {
        // Both exist: the one beside the config wins.
        const both = setup("", { "etc/pricing.yaml": PRICING, "config/pricing.yaml": "prices: []\n" })
        const beside = yield* decodeConfig({}, { path: both.path, mode: "validate", cwd: both.dir })
        assert.strictEqual(beside.config.pricingFile, join(both.dir, "etc/pricing.yaml"))
        assert.deepStrictEqual(
          beside.config.prices.map((price) => price.model),
          ["claude-sonnet-5-5"],
        )
        // …and since the two differ, a warning names both (an older setup may have meant the other).
        assert.isTrue(
          beside.warnings.some(
            (w) =>
              w.includes(join(both.dir, "etc/pricing.yaml")) &&
              w.includes(join(both.dir, "config/pricing.yaml")) &&
              w.includes("set pricing.file"),
          ),
        )
        // The same content in both: nothing to warn about.
        const same = setup("", { "etc/pricing.yaml": PRICING, "config/pricing.yaml": PRICING })
        const quiet = yield* decodeConfig({}, { path: same.path, mode: "validate", cwd: same.dir })
        assert.isFalse(quiet.warnings.some((w) => w.includes("also exists")))
        // Only the old default: still read (configs that relied on it keep working).
        const old = setup("", { "config/pricing.yaml": "prices: []\n" })
        const fallback = yield* decodeConfig({}, { path: old.path, mode: "validate", cwd: old.dir })
        assert.strictEqual(fallback.config.pricingFile, join(old.dir, "config/pricing.yaml"))
        assert.deepStrictEqual(fallback.config.prices, [])
        // The default layout (config/tollgate.yaml run from its parent): one path, tried once.
        const layout = setup("", { "config/pricing.yaml": PRICING })
        const standard = yield* decodeConfig(
          {},
          { path: join(layout.dir, "config/tollgate.yaml"), mode: "validate", cwd: layout.dir },
        )
        assert.strictEqual(standard.config.pricingFile, join(layout.dir, "config/pricing.yaml"))
      }),
  )

  it.effect("no price table anywhere: the problem names both paths tried and says to set pricing.file", () =>
    Effect.gen(function* () {
      const { dir, path } = setup("", {})
      const problems = yield* problemsOf(decodeConfig({}, { path, mode: "validate", cwd: dir }))
      assert.deepStrictEqual(problems, [
        `pricing.file: not set, and no price table at ${join(dir, "etc/pricing.yaml")} nor ${join(dir, "config/pricing.yaml")}; set pricing.file in ${path} to the price table's path (a relative path is read from ${join(dir, "etc")})`,
      ])
    }),
  )

  it.effect("a price table beside the config that is broken is reported, not passed over", () =>
    Effect.gen(function* () {
      const { dir, path } = setup("", { "etc/pricing.yaml": "prices: [\n", "config/pricing.yaml": PRICING })
      const problems = yield* problemsOf(decodeConfig({}, { path, mode: "validate", cwd: dir }))
      assert.strictEqual(problems.length, 1)
      assert.match(problems[0]!, new RegExp(`^pricing\\.file: ${join(dir, "etc/pricing.yaml")}:\\d+:\\d+: `))
    }),
  )

  it.effect("reports a YAML syntax error with its line and column", () =>
    Effect.gen(function* () {
      const { path } = setup("server:\n  listen: 127.0.0.1:8080\n  listen: 127.0.0.1:9090\n")
      const problems = yield* problemsOf(loadConfig(path, "validate"))
      assert.strictEqual(problems.length, 1)
      assert.match(problems[0]!, new RegExp(`^${path}:3:3: Map keys must be unique$`))
    }),
  )

  it.effect("reports a config file it cannot read", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(loadConfig("/nonexistent/tollgate.yaml", "validate"))
      assert.strictEqual(problems.length, 1)
      assert.match(
        problems[0]!,
        /^\/nonexistent\/tollgate\.yaml: cannot read \(ENOENT: no such file or directory/,
      )
    }),
  )

  it.effect("reports a missing price table under pricing.file", () =>
    Effect.gen(function* () {
      const { dir, path } = setup("pricing: { file: prices.yaml }\n")
      const problems = yield* problemsOf(loadConfig(path, "serve").pipe(withEnv(KEY_ENV)))
      assert.strictEqual(problems.length, 1)
      assert.match(
        problems[0]!,
        new RegExp(`^pricing\\.file: cannot read ${join(dir, "etc/prices.yaml")} \\(ENOENT: `),
      )
      // …and how to point at the right file.
      assert.isTrue(
        problems[0]!.endsWith(
          `; set pricing.file in ${path} to the price table's path (a relative path is read from ${join(dir, "etc")})`,
        ),
      )
    }),
  )

  it.effect("reports a price table's YAML error and its invalid rows", () =>
    Effect.gen(function* () {
      const broken = setup("pricing: { file: pricing.yaml }\n", { "etc/pricing.yaml": "prices: [\n" })
      const syntax = yield* problemsOf(loadConfig(broken.path, "serve").pipe(withEnv(KEY_ENV)))
      assert.strictEqual(syntax.length, 1)
      assert.match(
        syntax[0]!,
        new RegExp(`^pricing\\.file: ${join(broken.dir, "etc/pricing.yaml")}:\\d+:\\d+: `),
      )
      const invalid = setup("pricing: { file: pricing.yaml }\n", {
        "etc/pricing.yaml": PRICING + "  - { model: x, input: 1, output: ten }\n",
      })
      assert.deepStrictEqual(yield* problemsOf(loadConfig(invalid.path, "serve").pipe(withEnv(KEY_ENV))), [
        `pricing.file: ${join(invalid.dir, "etc/pricing.yaml")}: prices[1].output: must be a non-negative number of USD, e.g. 5 or 0.25`,
      ])
    }),
  )

  it.effect("warns in validate and fails in serve when a key env var is unset", () =>
    Effect.gen(function* () {
      const { path } = setup("pricing: { file: pricing.yaml }\n")
      const message =
        "providers.anthropic.api_key_env: environment variable TG_LOAD_TEST_KEY is unset or empty"
      const { warnings } = yield* loadConfig(path, "validate").pipe(withEnv({}))
      assert.deepStrictEqual(warnings, [message])
      assert.deepStrictEqual(yield* problemsOf(loadConfig(path, "serve").pipe(withEnv({}))), [message])
    }),
  )
})

describe("the example config", () => {
  it.effect("decodes with its key env vars set, and every budget target has a price", () =>
    Effect.gen(function* () {
      const env = { ANTHROPIC_API_KEY: "a", BACKUP_ANTHROPIC_API_KEY: "b", OPENAI_API_KEY: "o" }
      const { config, warnings } = yield* loadConfig("config/tollgate.example.yaml", "serve").pipe(
        withEnv(env),
      )
      assert.deepStrictEqual(warnings, [])
      assert.deepStrictEqual([...config.routes.keys()], ["claude-sonnet", "gpt", "llama"])
      assert.deepStrictEqual(
        [...config.providers.values()].map((p) => p.kind),
        ["anthropic", "anthropic", "vertex", "openai", "ollama"],
      )
      assert.deepStrictEqual([...config.tenants.keys()], ["acme", "lab"])
      assert.deepStrictEqual(config.tenants.get("acme")!.budgets.month, {
        limitMicroUsd: 200_000_000,
        mode: "hard",
      })
      assert.isTrue(config.pricingFile.endsWith("/config/pricing.yaml"))
      assert.isTrue(config.prices.length >= 2)
    }),
  )
})

describe("Config service", () => {
  it.effect("layer logs each warning", () =>
    Effect.gen(function* () {
      const { path } = setup("pricing: { file: pricing.yaml }\n")
      const logged: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        logged.push(`${logLevel.toUpperCase()} ${String(message)}`)
      })
      const config = yield* Config.pipe(
        Effect.provide(Config.layer(path, "validate")),
        Effect.provide(Logger.layer([logger])),
        withEnv({}),
      )
      assert.strictEqual(config.routes.size, 1)
      assert.deepStrictEqual(logged, [
        "WARN providers.anthropic.api_key_env: environment variable TG_LOAD_TEST_KEY is unset or empty",
      ])
    }),
  )

  it.effect("layerFrom and makeTestConfig provide an in-memory config", () =>
    Effect.gen(function* () {
      const built = yield* makeTestConfig(
        {
          routes: { local: { api: "openai", targets: [{ provider: "local", model: "llama3.2" }] } },
          providers: { local: { kind: "ollama" } },
        },
        { mode: "serve" },
      )
      const seen = yield* Config.pipe(Effect.provide(Config.layerFrom(built)))
      assert.strictEqual(seen, built)
      const viaLayer = yield* Config.pipe(
        Effect.provide(Layer.fresh(Config.layerTest({ sessions: { derive: false } }))),
      )
      assert.deepStrictEqual(viaLayer.sessions, { derive: false, maxPerTenant: 10_000 })
    }),
  )

  it.effect("makeTestConfig reads env from its options", () =>
    Effect.gen(function* () {
      const raw = { providers: { a: { kind: "anthropic", api_key_env: "TG_X" } } }
      const failed = yield* problemsOf(makeTestConfig(raw, { mode: "serve" }))
      assert.deepStrictEqual(failed, ["providers.a.api_key_env: environment variable TG_X is unset or empty"])
      const config = yield* makeTestConfig(raw, { mode: "serve", env: { TG_X: "secret" } })
      assert.strictEqual(config.providers.get("a")?.kind, "anthropic")
    }),
  )
})
