import { Context, Effect, Exit, Layer, References, Scope } from "effect"
import type { LogLevel } from "effect"
import { afterAll, beforeAll } from "vitest"
import { readFileSync, existsSync } from "node:fs"
import { join } from "node:path"
import {
  startFakeProvider,
  type FakeProviderHandle,
  type FakeProviderOptions,
} from "../../fakeprovider/server.js"
import { appLayer } from "../../src/app.js"
import { decodeConfig } from "../../src/config/load.js"
import type { TollgateConfig } from "../../src/config/model.js"
import { Server } from "../../src/http/Server.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { Store } from "../../src/limits/Store.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { withEnv } from "./env.js"
import { tempDir } from "./tempDirs.js"

export const UPSTREAM_KEY = "sk-upstream-test-secret"
export const UPSTREAM_KEY_ENV = "TG_TEST_UPSTREAM_KEY"

export const PRICES = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 },
    { model: "gpt-5-mini", input: 0.25, output: 2, cache_read: 0.025, cache_write: 0 },
  ],
}

export interface Harness {
  readonly url: string
  readonly key: string
  readonly dir: string
  readonly config: TollgateConfig
  readonly fakes: ReadonlyArray<FakeProviderHandle>
  /** The usage records written so far. */
  readonly records: () => Array<UsageRecord>
  readonly close: () => Promise<void>
}

export interface HarnessOptions {
  /** One fake provider per entry (default: one). */
  readonly fakes?: ReadonlyArray<FakeProviderOptions>
  /** Already running fakes to use instead (not closed by this harness). */
  readonly sharedFakes?: ReadonlyArray<FakeProviderHandle>
  /** The same key for several copies. */
  readonly key?: string
  /** A store shared with other copies. */
  readonly store?: Layer.Layer<Store, unknown>
  /** A folder to use (several copies may share one). */
  readonly dir?: string
  /** The raw config; receives the fake URLs and the key hash. Default: one anthropic and one openai route on fake 0. */
  readonly config?: (fakes: ReadonlyArray<string>, keyHash: string, dir: string) => Record<string, unknown>
  readonly prices?: unknown
  /** Least level the gateway logs at (default Warning: the per-request info lines stay out of test output). */
  readonly logLevel?: LogLevel.LogLevel
  /** Extra env vars seen by the gateway's Effect `Config` (e.g. the admin token). */
  readonly env?: Readonly<Record<string, string>>
}

/** A single tenant `acme` (key `ci`) that may use every route; routes `claude` and `gpt` on the first fake. */
export const defaultConfig = (fakes: ReadonlyArray<string>, keyHash: string, dir: string) => ({
  server: { listen: "127.0.0.1:0" },
  usage: { file: join(dir, "usage.jsonl") },
  providers: {
    anthropic: { kind: "anthropic", base_url: fakes[0], api_key_env: UPSTREAM_KEY_ENV },
    openai: { kind: "openai", base_url: fakes[0], api_key_env: UPSTREAM_KEY_ENV },
  },
  routes: {
    claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
    gpt: { api: "openai", targets: [{ provider: "openai", model: "gpt-5-mini" }] },
  },
  tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
})

const withUpstreamKey = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  extra: Readonly<Record<string, string>> = {},
) => withEnv({ [UPSTREAM_KEY_ENV]: UPSTREAM_KEY, ...extra })(effect)

/** Starts fake providers and an in-process gateway on a free port. */
export const startHarness = async (options: HarnessOptions = {}): Promise<Harness> => {
  const ownFakes = options.sharedFakes === undefined
  const fakes =
    options.sharedFakes ?? (await Promise.all((options.fakes ?? [{}]).map((o) => startFakeProvider(o))))
  const key = options.key ?? generateKey()
  const dir = options.dir ?? tempDir("tollgate-test-")
  const raw = (options.config ?? defaultConfig)(
    fakes.map((f) => f.url),
    hashKey(key),
    dir,
  )
  const { config } = await Effect.runPromise(
    withUpstreamKey(
      decodeConfig(raw, {
        path: join(dir, "tollgate.yaml"),
        mode: "serve",
        prices: options.prices ?? PRICES,
      }),
      options.env,
    ),
  )
  const scope = Effect.runSync(Scope.make())
  // In-process gateways leave SIGHUP alone (a test process may run many): tests reload over the admin API.
  const layer = appLayer(config, {
    reloadOnSignal: false,
    ...(options.store === undefined ? {} : { store: options.store }),
  })
  const context = await Effect.runPromise(
    withUpstreamKey(Layer.buildWithScope(layer, scope), options.env).pipe(
      Effect.provideService(References.MinimumLogLevel, options.logLevel ?? "Warn"),
    ),
  )
  const server = Context.get(context, Server)
  return {
    url: server.url,
    key,
    dir,
    config,
    fakes,
    records: () =>
      existsSync(config.usageFile)
        ? readFileSync(config.usageFile, "utf8")
            .split("\n")
            .filter((line) => line.length > 0)
            .map((line) => JSON.parse(line) as UsageRecord)
        : [],
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      if (ownFakes) await Promise.all(fakes.map((f) => f.close()))
    },
  }
}

/**
 * One harness for the tests of the enclosing `describe` (or file): started
 * before the first, closed after the last. The object returned stands for it
 * once started (reading it earlier throws).
 */
export const harnessForSuite = (options: HarnessOptions = {}): Harness => {
  let started: Harness | undefined
  beforeAll(async () => {
    started = await startHarness(options)
  })
  afterAll(async () => {
    await started?.close()
  })
  return new Proxy({} as Harness, {
    get: (_target, key) => {
      if (started === undefined) throw new Error("the suite's harness is used before it started")
      return started[key as keyof Harness]
    },
  })
}

/** Polls `check` until it returns true or `timeoutMs` passes (generous bounds, never a tuned sleep). */
export const eventually = async (
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> => {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`condition not met within ${timeoutMs} ms`)
}
