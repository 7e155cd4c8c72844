/**
 * `tollgate config validate [--config FILE]`: loads and checks the config and the price table
 * without starting anything (the same decoder `serve` uses).
 */
import { Console, Effect } from "effect"
import { Command } from "effect/cli"
import { loadConfig } from "../config/load.js"
import { documented } from "./help.js"
import { configOption, configPathEnv, resolveConfigPath } from "./options.js"

/**
 * Prints `ok` and then `warning: …` lines on stdout when the config is valid. Otherwise prints
 * one `path: message` line per problem on stderr and fails with `ConfigInvalid` (exit 1 at the entry point).
 */
export const validateCommand = Command.make("validate", { config: configOption }, ({ config }) =>
  Effect.gen(function* () {
    const path = yield* resolveConfigPath(config)
    const { warnings } = yield* loadConfig(path, "validate").pipe(
      Effect.tapError((invalid) => Effect.forEach(invalid.problems, (problem) => Console.error(problem))),
    )
    yield* Console.log("ok")
    yield* Effect.forEach(warnings, (warning) => Console.log(`warning: ${warning}`))
  }),
).pipe(
  Command.withDescription(
    "Load and check the config and its price table without starting anything. " +
      "Prints ok (and warnings) or one line per problem with its path.",
  ),
  documented(
    {
      command: "tollgate config validate --config config/tollgate.yaml",
      description: "Check a config before serve uses it (exit 0 valid, 1 invalid)",
    },
    [
      { name: configPathEnv, description: "The config file when --config is absent." },
      {
        name: "providers.*.api_key_env",
        description: "Each provider's upstream key (and a Vertex access_token_env): unset gives a warning.",
      },
    ],
  ),
)

/** `tollgate config …`. */
export const configCommand = Command.make("config").pipe(
  Command.withDescription("Work with the Tollgate configuration."),
  Command.withSubcommands([validateCommand]),
  documented({ command: "tollgate config validate", description: "Check config/tollgate.yaml" }),
)
