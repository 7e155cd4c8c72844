/**
 * The `Config` service: the decoded `tollgate.yaml` and price table, immutable after start.
 */
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { decodeConfig, type LoadMode } from "./decode.js"
import { loadConfig } from "./load.js"
import type { TollgateConfig } from "./model.js"
import type { ConfigInvalid } from "./problems.js"

/**
 * The decoded configuration (see `model.ts`). Provide it with {@link Config.layer} at the entry
 * point, or {@link Config.layerFrom} / {@link Config.layerTest} in tests.
 */
export class Config extends Context.Service<Config, TollgateConfig>()("tollgate/config/Config") {
  /** Loads the file at `path` once; logs each warning with `Effect.logWarning`. */
  static layer(path: string, mode: LoadMode): Layer.Layer<Config, ConfigInvalid> {
    return Layer.effect(
      Config,
      Effect.gen(function* () {
        const { config, warnings } = yield* loadConfig(path, mode)
        yield* Effect.forEach(warnings, (warning) => Effect.logWarning(warning), { discard: true })
        return config
      }),
    )
  }

  /** A ready config value, e.g. one built by {@link makeTestConfig}. */
  static layerFrom(config: TollgateConfig): Layer.Layer<Config> {
    return Layer.succeed(Config, config)
  }

  /** {@link makeTestConfig} as a layer. */
  static layerTest(raw: unknown, options?: TestConfigOptions): Layer.Layer<Config, ConfigInvalid> {
    return Layer.effect(Config, makeTestConfig(raw, options))
  }
}

export interface TestConfigOptions {
  /** Environment seen by the env-var checks. Default: none set. */
  readonly env?: Readonly<Record<string, string>>
  /** Price table content (`{ prices }` or the list). Default: no prices. */
  readonly prices?: unknown
  /** Default `validate`, so unset key env vars only warn. */
  readonly mode?: LoadMode
  /** Config file path that relative paths resolve against. Default `tollgate.yaml` in the working directory. */
  readonly path?: string
}

/**
 * Builds a config in memory from a plain object shaped like `tollgate.yaml` (snake_case keys,
 * duration strings, USD), with the same decoder and checks as `loadConfig`. Reads no file.
 */
export const makeTestConfig = (
  raw: unknown,
  options: TestConfigOptions = {},
): Effect.Effect<TollgateConfig, ConfigInvalid> =>
  decodeConfig(raw, {
    path: options.path ?? "tollgate.yaml",
    mode: options.mode ?? "validate",
    prices: options.prices ?? [],
  }).pipe(
    Effect.map(({ config }) => config),
    Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: options.env ?? {} })),
  )
