/**
 * Options shared by Tollgate's commands.
 */
import { Config, Effect, Option } from "effect"
import { Flag } from "effect/cli"

/** Config path when neither `--config` nor `$TOLLGATE_CONFIG` is given. */
export const defaultConfigPath = "config/tollgate.yaml"

/** Env var naming the config file when `--config` is absent. */
export const configPathEnv = "TOLLGATE_CONFIG"

/** `--config FILE`: the config file (see {@link resolveConfigPath} for the fallbacks). */
export const configOption: Flag.Flag<Option.Option<string>> = Flag.File("config").pipe(
  Flag.withMetavar("FILE"),
  Flag.withDescription(
    `Path of the config file. Default: $${configPathEnv} when set, else ${defaultConfigPath}.`,
  ),
  Flag.optional,
)

/**
 * The config path to use: `--config`, else `$TOLLGATE_CONFIG` (through Effect's `Config`,
 * ignored when empty), else `config/tollgate.yaml`. Relative paths are relative to the working directory.
 */
export const resolveConfigPath = (option: Option.Option<string>): Effect.Effect<string> =>
  Option.match(option, {
    onSome: (path) => Effect.succeed(path),
    onNone: () =>
      Config.option(Config.String(configPathEnv)).pipe(
        Effect.map((value) =>
          Option.getOrElse(
            Option.filter(value, (path) => path.trim() !== ""),
            () => defaultConfigPath,
          ),
        ),
        Effect.orElseSucceed(() => defaultConfigPath),
      ),
  })

/** A required `--name VALUE` option whose value must be non-empty, without surrounding spaces. */
export const nameOption = (name: string, metavar: string, description: string): Flag.Flag<string> =>
  Flag.String(name).pipe(
    Flag.withMetavar(metavar),
    Flag.withDescription(description),
    Flag.filterMap(
      (value) => (/^\S(.*\S)?$/.test(value) ? Option.some(value) : Option.none()),
      () => `--${name} must be non-empty, without leading or trailing spaces`,
    ),
  )
