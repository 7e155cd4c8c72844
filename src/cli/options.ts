/**
 * Options shared by Tollgate's commands.
 */
import { Config, Context, Effect, Layer, Option, References, Schema } from "effect"
import type { LogLevel } from "effect"
import { CliConfig, Command, Flag, GlobalFlag } from "effect/cli"
import { CurrentLogFormat, LOG_FORMATS, type LogFormat } from "../ops/logger.js"
import { Listen, type ListenAddress } from "../config/primitives.js"

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

/** The listen address when neither `--listen` nor `server.listen` says otherwise. */
export const defaultListen = "127.0.0.1:8080"

/** `HOST:PORT`, or `[HOST]:PORT` for an IPv6 host: the form `--listen` and `server.listen` take. */
export const formatListen = ({ host, port }: ListenAddress): string =>
  `${host.includes(":") ? `[${host}]` : host}:${port}`

/**
 * `--listen HOST:PORT`, checked as `server.listen` is (port 0 picks a free port). `serve` takes it as
 * an optional override of `server.listen`; `demo` with its default.
 */
export const listenOption = (description: string): Flag.Flag<ListenAddress> =>
  Flag.String("listen").pipe(
    Flag.withMetavar("HOST:PORT"),
    Flag.withDescription(description),
    Flag.filterMap(
      (value) => Schema.decodeUnknownOption(Listen)(value),
      () => "HOST:PORT with a port from 0 to 65535, e.g. 127.0.0.1:8080 or [::1]:8080",
    ),
  )

/** The levels `--log-level` takes, spelled as the log lines spell them (`warn`, not `warning`). */
const LOG_LEVELS: ReadonlyArray<readonly [string, LogLevel.LogLevel]> = [
  ["all", "All"],
  ["trace", "Trace"],
  ["debug", "Debug"],
  ["info", "Info"],
  ["warn", "Warn"],
  ["error", "Error"],
  ["fatal", "Fatal"],
  ["none", "None"],
]

/**
 * `--log-level LEVEL`, every command's: the least level of the log lines
 * written, request lines included. It replaces Effect's built-in flag
 * (which lists `warn` and `warning` both) so that help names each level
 * once, as the log spells it; `warning` is still accepted.
 */
export const logLevelFlag: GlobalFlag.Setting<
  "log-level",
  Option.Option<LogLevel.LogLevel>
> = GlobalFlag.Setting("log-level")({
  flag: Flag.String("log-level").pipe(
    Flag.withMetavar("LEVEL"),
    Flag.withDescription(
      `Least level of the log lines written: ${LOG_LEVELS.map(([name]) => name).join(", ")} (default info).`,
    ),
    Flag.filterMap(
      (value) => {
        const name = value.toLowerCase() === "warning" ? "warn" : value.toLowerCase()
        return Option.fromNullishOr(LOG_LEVELS.find(([n]) => n === name)?.[1])
      },
      () => `one of ${LOG_LEVELS.map(([name]) => name).join(", ")}`,
    ),
    Flag.optional,
  ),
})

/** Effect's built-in global flags with `--log-level` replaced by {@link logLevelFlag}. Provide it where the CLI runs. */
export const cliConfigLayer: Layer.Layer<never> = CliConfig.layer({
  builtIns: GlobalFlag.BuiltIns.map((flag) => (flag === GlobalFlag.LogLevel ? logLevelFlag : flag)),
})

/**
 * Applies `--log-level` to a command (the root: every subcommand) as Effect's
 * built-in flag would. Without {@link cliConfigLayer} (Effect's own flag is
 * in place, which applies itself) it does nothing.
 */
export const withLogLevel = <Name extends string, Input, E, R, ContextInput>(
  command: Command.Command<Name, Input, ContextInput, E, R>,
) =>
  command.pipe(
    Command.provide(
      Layer.effectContext(
        Effect.map(Effect.serviceOption(logLevelFlag), (level) =>
          Option.match(Option.flatten(level), {
            onNone: () => Context.empty(),
            onSome: (least) => Context.make(References.MinimumLogLevel, least),
          }),
        ),
      ),
    ),
  )

/** `--log-format json|pretty` (serve, demo): how log lines read; default pretty on a terminal, else json. */
export const logFormatOption: Flag.Flag<Option.Option<LogFormat>> = Flag.Literals(
  "log-format",
  LOG_FORMATS,
).pipe(
  Flag.withMetavar(LOG_FORMATS.join("|")),
  Flag.withDescription(
    "How log lines on stderr read: json (one JSON object per line) or pretty (time, level, message, key=value; colors on a terminal unless NO_COLOR is set). Default: pretty when stderr is a terminal, else json.",
  ),
  Flag.optional,
)

/** Runs `effect` with the log format `--log-format` chose, if any (its fibers and the gateway's request fibers). */
export const withLogFormat =
  (format: Option.Option<LogFormat>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Option.isSome(format) ? Effect.provideService(effect, CurrentLogFormat, format.value) : effect
