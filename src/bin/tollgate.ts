import { ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, Console, Effect, Exit } from "effect"
import { cli } from "../cli/main.js"
import * as JsonLogs from "../ops/logger.js"

/** Exit codes (SPEC): 0 ok, 1 invalid config or usage, 2 runtime failure. */
const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "Some") {
    const error = failure.value
    if (ValidationError.isValidationError(error)) return 1
    if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "ConfigInvalid") return 1
  }
  return 2
}

const program = cli(process.argv).pipe(
  Effect.tapErrorCause((cause) => {
    const failure = Cause.failureOption(cause)
    if (Cause.isInterruptedOnly(cause)) return Effect.void
    if (failure._tag === "Some") {
      const error = failure.value
      if (ValidationError.isValidationError(error)) return Effect.void // @effect/cli printed it
      // The commands print their own config problems, one line each.
      if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "ConfigInvalid") {
        return Effect.void
      }
      return Console.error(`tollgate: ${error instanceof Error ? error.message : JSON.stringify(error)}`)
    }
    return Console.error(`tollgate: ${Cause.pretty(cause)}`)
  }),
  Effect.provide(NodeContext.layer),
  Effect.provide(JsonLogs.layer),
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  // Logs go through the JSON logger provided above, not runMain's pretty console logger as well.
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(exitCode(exit)),
})
