import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { configCommand } from "./configCommand.js"
import { demo } from "./demo.js"
import { documented, type EnvVarDoc } from "./help.js"
import { keysCommand } from "./keysCommand.js"
import { configOption, configPathEnv, defaultListen, listenOption, resolveConfigPath } from "./options.js"
import { logFormatOption, withLogFormat, withLogLevel } from "./options.js"
import { serve } from "./serve.js"
import { usageCommand } from "./usageCommand.js"
import { VERSION } from "../version.js"

/** The variables a gateway reads (serve; demo reads the admin one only, and makes one when it is unset). */
const adminTokenEnv: EnvVarDoc = {
  name: "TOLLGATE_ADMIN_TOKEN",
  description:
    "Bearer token of /admin/* (the variable admin.token_env names); the admin API is off when unset.",
}

const serveCommand = Command.make(
  "serve",
  {
    config: configOption,
    listen: listenOption(
      `Address to listen on, over the config's server.listen (default ${defaultListen}). Port 0 picks a free port.`,
    ).pipe(Flag.optional),
    logFormat: logFormatOption,
  },
  ({ config, listen, logFormat }) =>
    Effect.flatMap(resolveConfigPath(config), (path) => serve(path, Option.getOrUndefined(listen))).pipe(
      withLogFormat(logFormat),
    ),
).pipe(
  Command.withDescription(
    "Run the gateway. Prints `listening on http://HOST:PORT` when ready; SIGTERM or Ctrl-C stops it (open requests drain).",
  ),
  documented(
    {
      command: "tollgate serve --config config/tollgate.yaml --listen 0.0.0.0:8080",
      description: "Run on every interface, port 8080",
    },
    [
      { name: configPathEnv, description: "The config file when --config is absent." },
      {
        name: "providers.*.api_key_env",
        description:
          "Each provider's upstream key, from the variable it names (e.g. ANTHROPIC_API_KEY); unset refuses the start.",
      },
      {
        name: "providers.*.access_token_env",
        description:
          "A Vertex provider's static token; without it, Google ADC (GOOGLE_APPLICATION_CREDENTIALS).",
      },
      adminTokenEnv,
      {
        name: "usage.database.url_env",
        description:
          "With usage.database: the postgres:// URL of the usage database (default TOLLGATE_USAGE_DATABASE_URL).",
      },
    ],
  ),
)

const demoCommand = Command.make(
  "demo",
  {
    listen: listenOption(
      `Address of the demo gateway. Default: ${defaultListen}. Port 0 picks a free port.`,
    ).pipe(Flag.withDefault({ host: "127.0.0.1", port: 8080 })),
    logFormat: logFormatOption,
  },
  ({ listen, logFormat }) => demo(listen).pipe(withLogFormat(logFormat)),
).pipe(
  Command.withDescription(
    "Start two fake providers and the gateway on a built-in config (memory store, a temporary folder removed on exit); print a key, a ready curl command and the web console's address. Runs until Ctrl-C.",
  ),
  documented({ command: "tollgate demo --listen 127.0.0.1:9000", description: "Run the demo on port 9000" }, [
    {
      name: adminTokenEnv.name,
      description:
        "Admin token of the demo's web console (/admin/ui) and /admin/*; default: a fresh one, printed.",
    },
  ]),
)

/** `tollgate`: the root command. */
export const tollgate = Command.make("tollgate").pipe(
  Command.withDescription("Tollgate, an LLM API gateway."),
  Command.withSubcommands([serveCommand, configCommand, keysCommand, usageCommand, demoCommand]),
  withLogLevel,
  documented({
    command: "tollgate serve --help",
    description: "What a command does, its flags and variables",
  }),
)

/** Runs `tollgate` on the process arguments (from the `Stdio` service). */
export const cli = Command.run(tollgate, { version: VERSION })
