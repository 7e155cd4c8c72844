import { Config, Console, ConfigProvider, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startFakeProvider } from "../../fakeprovider/server.js"
import { decodeConfig } from "../config/load.js"
import type { ListenAddress } from "../config/primitives.js"
import { generateKey, hashKey } from "../keys/keys.js"
import { formatListen } from "./options.js"
import { runGateway } from "./serve.js"

const UPSTREAM_KEY_ENV = "TOLLGATE_DEMO_UPSTREAM_KEY"
const ADMIN_TOKEN_ENV = "TOLLGATE_ADMIN_TOKEN"

/**
 * The fake providers' upstream key and the admin token (for the console and the admin API), seen by the
 * config check, the provider clients and the admin API; other env stays.
 */
const demoEnv = (adminToken: string) =>
  ConfigProvider.layerAdd(
    ConfigProvider.fromEnv({
      env: { [UPSTREAM_KEY_ENV]: "demo-upstream-key", [ADMIN_TOKEN_ENV]: adminToken },
    }),
    { asPrimary: true },
  )

const demoConfig = (listen: string, primary: string, backup: string, keyHash: string, usageFile: string) => ({
  server: { listen },
  admin: { token_env: ADMIN_TOKEN_ENV },
  usage: { file: usageFile },
  providers: {
    primary: { kind: "anthropic", base_url: primary, api_key_env: UPSTREAM_KEY_ENV },
    backup: { kind: "anthropic", base_url: backup, api_key_env: UPSTREAM_KEY_ENV },
    openai: { kind: "openai", base_url: primary, api_key_env: UPSTREAM_KEY_ENV },
  },
  routes: {
    "claude-demo": {
      api: "anthropic",
      targets: [
        { provider: "primary", model: "claude-sonnet-5-5" },
        { provider: "backup", model: "claude-sonnet-5-5" },
      ],
    },
    "gpt-demo": { api: "openai", targets: [{ provider: "openai", model: "gpt-5-mini" }] },
  },
  tenants: {
    demo: {
      keys: [{ id: "demo", sha256: keyHash }],
      routes: "*",
      limits: { requests_per_minute: 600, tokens_per_minute: 400000 },
      budgets: { month: { limit_usd: 5, mode: "hard" } },
    },
  },
})

const demoPrices = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 },
    { model: "gpt-5-mini", input: 0.25, output: 2, cache_read: 0.025, cache_write: 0 },
  ],
}

/**
 * A fresh temporary folder for the demo's usage records and runtime keys, removed with everything in it
 * when the demo ends (Ctrl-C, SIGTERM, a failed start), after the gateway has closed its files.
 */
const demoFolder = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "tollgate-demo-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

/**
 * `tollgate demo`: two fake providers and the gateway on a built-in config
 * (memory store), a fresh key, a ready curl line, and the web console with a
 * fresh admin token. Runs until Ctrl-C.
 */
export const demo = (listen: ListenAddress) =>
  Effect.flatMap(
    // The operator's token when `TOLLGATE_ADMIN_TOKEN` is set, else a fresh one (printed).
    Effect.orElseSucceed(Config.option(Config.String(ADMIN_TOKEN_ENV)), () => Option.none<string>()),
    (given) =>
      run(
        listen,
        Option.getOrElse(given, () => randomBytes(24).toString("base64url")),
        Option.isSome(given),
      ),
  )

const run = (listen: ListenAddress, adminToken: string, given: boolean) =>
  Effect.gen(function* () {
    const fakes = yield* Effect.acquireRelease(
      Effect.promise(() =>
        Promise.all([startFakeProvider({ name: "primary" }), startFakeProvider({ name: "backup" })]),
      ),
      (started) => Effect.promise(() => Promise.all(started.map((fake) => fake.close()))),
    )
    const key = generateKey()
    const dir = yield* demoFolder
    const usageFile = join(dir, "usage.jsonl")
    const raw = demoConfig(formatListen(listen), fakes[0].url, fakes[1].url, hashKey(key), usageFile)
    const { config, warnings } = yield* decodeConfig(raw, {
      path: join(dir, "tollgate.yaml"),
      mode: "serve",
      prices: demoPrices,
    })
    return yield* runGateway(config, {
      warnings,
      prices: "built in (claude-sonnet-5-5, gpt-5-mini)",
      // Its config is built in memory: there is no file to read again (SIGHUP is ignored).
      reloadOnSignal: "ignore",
      listenHint: "pass --listen HOST:PORT (npm run demo -- --listen 127.0.0.1:9000)",
      onListening: (url) =>
        Console.log(
          [
            "",
            `Tollgate demo: fake providers at ${fakes[0].url} (primary) and ${fakes[1].url} (backup).`,
            `Client key (shown once): ${key}`,
            `Usage records: ${usageFile} (removed when the demo stops)`,
            `Web console: ${url}/admin/ui (admin token: ${given ? `$${ADMIN_TOKEN_ENV}` : `${adminToken}, shown once`})`,
            "",
            "Try:",
            `  curl -s ${url}/v1/messages -H "x-api-key: ${key}" -H "content-type: application/json" \\`,
            `    -d '{"model":"claude-demo","max_tokens":16,"messages":[{"role":"user","content":"Hello, Tollgate!"}]}'`,
            "",
            `  curl -s ${url}/v1/chat/completions -H "authorization: Bearer ${key}" -H "content-type: application/json" \\`,
            `    -d '{"model":"gpt-demo","stream":true,"messages":[{"role":"user","content":"Hello, Tollgate!"}]}'`,
            "",
            "Press Ctrl-C to stop.",
          ].join("\n"),
        ),
    })
  }).pipe(Effect.scoped, Effect.provide(demoEnv(adminToken)))
