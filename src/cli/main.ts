import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { configCommand } from "./configCommand.js"
import { demo } from "./demo.js"
import { keysCommand } from "./keysCommand.js"
import { configOption, resolveConfigPath } from "./options.js"
import { serve } from "./serve.js"

const serveCommand = Command.make("serve", { config: configOption }, ({ config }) =>
  Effect.flatMap(resolveConfigPath(config), serve),
).pipe(
  Command.withDescription(
    "Run the gateway. Prints `listening on http://HOST:PORT` when ready; SIGTERM or Ctrl-C stops it.",
  ),
)

const demoCommand = Command.make(
  "demo",
  {
    listen: Flag.String("listen").pipe(
      Flag.withDescription("Address for the demo gateway (HOST:PORT)."),
      Flag.withDefault("127.0.0.1:8080"),
    ),
  },
  ({ listen }) => demo(listen),
).pipe(
  Command.withDescription(
    "Start two fake providers and the gateway on a built-in config (memory store); print a key and a ready curl command. Runs until Ctrl-C.",
  ),
)

/** `tollgate`: the root command. */
export const tollgate = Command.make("tollgate").pipe(
  Command.withDescription("Tollgate, an LLM API gateway."),
  Command.withSubcommands([serveCommand, configCommand, keysCommand, demoCommand]),
)

/** Runs `tollgate` on the process arguments (from the `Stdio` service). */
export const cli = Command.run(tollgate, { version: "0.1.0" })
