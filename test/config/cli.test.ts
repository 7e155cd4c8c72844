import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option, Result } from "effect"
import { Command } from "effect/cli"
import { TestConsole } from "effect/testing"
import { configCommand } from "../../src/cli/configCommand.js"
import * as Help from "../../src/cli/help.js"
import { keysCommand } from "../../src/cli/keysCommand.js"
import { defaultConfigPath, resolveConfigPath } from "../../src/cli/options.js"
import { hashKey } from "../../src/keys/keys.js"
import { tempDir } from "../support/tempDirs.js"

const run = <Name extends string, Input, ContextInput, E>(
  command: Command.Command<Name, Input, ContextInput, E>,
  args: ReadonlyArray<string>,
) =>
  Command.runWith(command, { version: "test" })(args).pipe(
    Effect.provide(Layer.merge(NodeServices.layer, Help.layer)),
  )

/** What the test has printed so far with `Console.log` (`out`) and `Console.error` (`err`): `it.effect` provides a `TestConsole`. */
const printed = Effect.all({
  out: Effect.map(TestConsole.logLines, (lines) => lines.map(String)),
  err: Effect.map(TestConsole.errorLines, (lines) => lines.map(String)),
})

const writeConfig = (text: string) => {
  const dir = tempDir("tollgate-cli-")
  writeFileSync(join(dir, "pricing.yaml"), "prices: []\n")
  writeFileSync(join(dir, "tollgate.yaml"), `pricing: { file: pricing.yaml }\n${text}`)
  return join(dir, "tollgate.yaml")
}

describe("resolveConfigPath", () => {
  it.effect("prefers --config, then TOLLGATE_CONFIG, then config/tollgate.yaml", () =>
    Effect.gen(function* () {
      const env = (map: Record<string, string>) =>
        Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: map }))
      const fromEnv = { TOLLGATE_CONFIG: "/etc/tg.yaml" }
      assert.strictEqual(yield* resolveConfigPath(Option.some("a.yaml")).pipe(env(fromEnv)), "a.yaml")
      assert.strictEqual(yield* resolveConfigPath(Option.none()).pipe(env(fromEnv)), "/etc/tg.yaml")
      assert.strictEqual(
        yield* resolveConfigPath(Option.none()).pipe(env({ TOLLGATE_CONFIG: "" })),
        defaultConfigPath,
      )
      assert.strictEqual(yield* resolveConfigPath(Option.none()).pipe(env({})), "config/tollgate.yaml")
    }),
  )
})

describe("tollgate config validate", () => {
  it.effect("prints ok then each warning", () =>
    Effect.gen(function* () {
      const path = writeConfig("providers: { openai: { kind: openai, api_key_env: TG_CLI_UNSET_KEY } }\n")
      yield* run(configCommand, ["validate", "--config", path])
      const { out, err } = yield* printed
      assert.deepStrictEqual(out, [
        "ok",
        "warning: providers.openai.api_key_env: environment variable TG_CLI_UNSET_KEY is unset or empty",
        "warning: routes: none configured: the gateway will refuse every request (no route to serve it)",
        "warning: tenants: none configured: the gateway will refuse every request (no tenant holds a key)",
      ])
      assert.deepStrictEqual(err, [])
    }),
  )

  it.effect("prints one line per problem on stderr and fails with ConfigInvalid", () =>
    Effect.gen(function* () {
      const path = writeConfig(
        "routes:\n  claude: { api: anthropic, targets: [{ provider: foo, model: m }] }\nserver: { listen: nope }\n",
      )
      const result = yield* Effect.result(run(configCommand, ["validate", "--config", path]))
      assert.isTrue(Result.isFailure(result) && result.failure._tag === "ConfigInvalid")
      const { out, err } = yield* printed
      assert.deepStrictEqual(err, [
        "server.listen: must be host:port with a port from 0 to 65535, e.g. 127.0.0.1:8080 or [::1]:8080",
        'routes.claude.targets[0].provider: unknown provider "foo"',
      ])
      assert.deepStrictEqual(out, [])
    }),
  )
})

describe("tollgate config validate --config other/dir/tollgate.yaml", () => {
  it.effect(
    "reads the price table beside that config when pricing.file is absent, and warns of an unpriced target",
    () =>
      Effect.gen(function* () {
        const dir = tempDir("tollgate-cli-beside-")
        writeFileSync(join(dir, "pricing.yaml"), "prices:\n  - { model: priced, input: 1, output: 2 }\n")
        writeFileSync(
          join(dir, "tollgate.yaml"),
          [
            "providers: { local: { kind: ollama }, openai: { kind: openai, api_key_env: TG_CLI_BESIDE_KEY } }",
            "routes:",
            "  a: { api: openai, targets: [{ provider: openai, model: priced }, { provider: openai, model: free }] }",
            "  b: { api: openai, targets: [{ provider: local, model: llama3.2 }] }",
            `tenants: { acme: { keys: [{ id: ci, sha256: ${"a".repeat(64)} }], routes: "*" } }`,
            "",
          ].join("\n"),
        )
        yield* run(configCommand, ["validate", "--config", join(dir, "tollgate.yaml")]).pipe(
          Effect.provideService(
            ConfigProvider.ConfigProvider,
            ConfigProvider.fromEnv({ env: { TG_CLI_BESIDE_KEY: "sk" } }),
          ),
        )
        const { out, err } = yield* printed
        assert.deepStrictEqual(err, [])
        // Run from the repository, whose config/pricing.yaml is another table: that is said too (ADR 0051).
        assert.deepStrictEqual(out, [
          "ok",
          `warning: pricing.file: not set; using ${join(dir, "pricing.yaml")} (beside the config), while ${join(process.cwd(), "config/pricing.yaml")} also exists with other content; set pricing.file to the table you mean`,
          `warning: routes.a.targets[1]: provider "openai" model "free" has no price in ${join(dir, "pricing.yaml")}: its requests will be recorded at cost 0 (add a row for it to the price table)`,
        ])
      }),
  )
})

describe("tollgate keys create", () => {
  it.effect("prints a new secret and the entry with its hash", () =>
    Effect.gen(function* () {
      yield* run(keysCommand, ["create", "--tenant", "acme", "--id", "ci"])
      const { out } = yield* printed
      const text = out.join("\n")
      const secret = /tg_[0-9A-Za-z]{32}/.exec(text)?.[0]
      assert.isDefined(secret)
      assert.isTrue(text.endsWith(`- id: ci\n  sha256: ${hashKey(secret!)}`))
    }),
  )

  it.effect("makes a key id when --id is absent", () =>
    Effect.gen(function* () {
      yield* run(keysCommand, ["create", "--tenant", "acme"])
      const { out } = yield* printed
      assert.match(out.join("\n"), /\n- id: key-[0-9a-z]{8}\n {2}sha256: [0-9a-f]{64}$/)
    }),
  )

  it.effect("--help names the options and what the command does", () =>
    Effect.gen(function* () {
      yield* run(keysCommand, ["create", "--help"])
      const { out } = yield* printed
      const help = out.join("\n")
      assert.include(help, "create --tenant NAME [--id ID]")
      assert.include(help, "prints the secret once")
    }),
  )

  it.effect("refuses a run without --tenant", () =>
    Effect.gen(function* () {
      const result = yield* Effect.result(run(keysCommand, ["create"]))
      assert.isTrue(Result.isFailure(result))
      const { out } = yield* printed
      assert.notMatch(out.join("\n"), /tg_/)
    }),
  )
})
