import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer, Option, Predicate } from "effect"
import { CliError } from "effect/cli"
import * as Help from "../cli/help.js"
import { cli } from "../cli/main.js"
import { cliConfigLayer } from "../cli/options.js"
import * as JsonLogs from "../ops/logger.js"

/** A usage error (the CLI printed it with the help) or an invalid config (the command printed its problems). */
const isReported = (error: unknown): boolean =>
  CliError.isCliError(error) || Predicate.isTagged(error, "ConfigInvalid")

/** Exit codes (SPEC): 0 ok, 1 invalid config or usage, 2 runtime failure. */
const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return 0
  return Option.exists(Cause.findErrorOption(exit.cause), isReported) ? 1 : 2
}

const program = cli.pipe(
  Effect.tapCause((cause) => {
    if (Cause.hasInterruptsOnly(cause)) return Effect.void
    const failure = Cause.findErrorOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value
      if (isReported(error)) return Effect.void
      return Console.error(`tollgate: ${error instanceof Error ? error.message : JSON.stringify(error)}`)
    }
    return Console.error(`tollgate: ${Cause.pretty(cause)}`)
  }),
  Effect.provide(Layer.mergeAll(NodeServices.layer, Help.layer, JsonLogs.layer, cliConfigLayer)),
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(exitCode(exit)),
})
