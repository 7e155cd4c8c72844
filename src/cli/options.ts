/**
 * Options shared by Tollgate's commands.
 */
import { Options } from "@effect/cli"
import { Config, Effect, Option } from "effect"

/** Config path when neither `--config` nor `$TOLLGATE_CONFIG` is given. */
export const defaultConfigPath = "config/tollgate.yaml"

/** Env var naming the config file when `--config` is absent. */
export const configPathEnv = "TOLLGATE_CONFIG"

/** `--config FILE`: the config file (see {@link resolveConfigPath} for the fallbacks). */
export const configOption: Options.Options<Option.Option<string>> = Options.file("config").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription(
    `Path of the config file. Default: $${configPathEnv} when set, else ${defaultConfigPath}.`,
  ),
  Options.optional,
)

/**
 * The config path to use: `--config`, else `$TOLLGATE_CONFIG` (through Effect's `Config`,
 * ignored when empty), else `config/tollgate.yaml`. Relative paths are relative to the working directory.
 */
export const resolveConfigPath = (option: Option.Option<string>): Effect.Effect<string> =>
  Option.match(option, {
    onSome: Effect.succeed,
    onNone: () =>
      Config.option(Config.string(configPathEnv)).pipe(
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
export const nameOption = (name: string, pseudoName: string, description: string): Options.Options<string> =>
  Options.text(name).pipe(
    Options.withPseudoName(pseudoName),
    Options.withDescription(description),
    Options.filterMap(
      (value) => (/^\S(.*\S)?$/.test(value) ? Option.some(value) : Option.none()),
      `--${name} must be non-empty, without leading or trailing spaces`,
    ),
  )
