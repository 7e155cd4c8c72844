/**
 * `tollgate usage migrate [--config FILE]`: creates or upgrades the usage
 * database's table and its indexes (SPEC Part 3), then exits 0. `serve`
 * refuses a table older than it needs, so this runs first, once per
 * upgrade, from one place (a deploy step), not from every copy.
 */
import { Config as EffectConfig, Console, Data, Effect, Layer } from "effect"
import { Command } from "effect/cli"
import { loadConfig } from "../config/load.js"
import { UsageDatabase, layer as databaseLayer } from "../usagedb/Database.js"
import { SCHEMA_VERSION } from "../usagedb/table.js"
import { documented } from "./help.js"
import { configOption, configPathEnv, resolveConfigPath } from "./options.js"

/** `usage migrate` could not run: no `usage.database`, or the database refused (exit 2, one line). */
export class MigrateFailed extends Data.TaggedError("MigrateFailed")<{ readonly message: string }> {}

const migrateCommand = Command.make("migrate", { config: configOption }, ({ config }) =>
  Effect.gen(function* () {
    const path = yield* resolveConfigPath(config)
    const { config: loaded } = yield* loadConfig(path, "validate").pipe(
      Effect.tapError((invalid) => Effect.forEach(invalid.problems, (problem) => Console.error(problem))),
    )
    const database = loaded.usageDatabase
    if (database === undefined)
      return yield* new MigrateFailed({ message: `no usage.database in ${path}: nothing to migrate` })
    const url = yield* EffectConfig.Redacted(database.urlEnv).pipe(
      Effect.mapError(
        () =>
          new MigrateFailed({
            message: `usage.database.url_env: environment variable ${database.urlEnv} is unset`,
          }),
      ),
    )
    const from = yield* Effect.gen(function* () {
      const db = yield* UsageDatabase
      return yield* db.migrate
    }).pipe(
      Effect.provide(Layer.fresh(databaseLayer(url, database.table))),
      Effect.mapError((error) =>
        error.reason === "authentication"
          ? new MigrateFailed({
              message: `usage database: the database refused the credentials in ${database.urlEnv} (${error.message})`,
            })
          : new MigrateFailed({ message: `usage database: ${error.message}` }),
      ),
    )
    yield* Console.log(
      from === SCHEMA_VERSION
        ? `table ${database.table} is at schema ${SCHEMA_VERSION}: nothing to do`
        : from === 0
          ? `created table ${database.table} (schema ${SCHEMA_VERSION}) and its indexes`
          : `upgraded table ${database.table} from schema ${from} to ${SCHEMA_VERSION}`,
    )
  }),
).pipe(
  Command.withDescription(
    "Create or upgrade the usage database's table and indexes (usage.database), then exit. " +
      "Safe to run again; serve refuses a table older than it needs.",
  ),
  documented(
    {
      command: "tollgate usage migrate --config config/tollgate.yaml",
      description: "Make the usage table before the first serve with usage.database, and after upgrades",
    },
    [
      { name: configPathEnv, description: "The config file when --config is absent." },
      {
        name: "usage.database.url_env",
        description: "The postgres:// URL, from the variable it names (default TOLLGATE_USAGE_DATABASE_URL).",
      },
    ],
  ),
)

/** `tollgate usage …`. */
export const usageCommand = Command.make("usage").pipe(
  Command.withDescription("Work with the usage database (usage.database)."),
  Command.withSubcommands([migrateCommand]),
  documented({ command: "tollgate usage migrate", description: "Create or upgrade the usage table" }),
)
