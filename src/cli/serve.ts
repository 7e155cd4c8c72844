import { Console, Context, Effect, Layer } from "effect"
import { appLayer } from "../app.js"
import { loadConfig } from "../config/load.js"
import type { TollgateConfig } from "../config/model.js"
import { Server } from "../http/Server.js"

/** Builds the gateway for `config`, prints `listening on URL`, and runs until interrupted (SIGTERM, Ctrl-C). */
export const runGateway = (
  config: TollgateConfig,
  onListening: (url: string) => Effect.Effect<void> = () => Effect.void,
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(appLayer(config))
      const server = Context.get(context, Server)
      yield* Console.log(`listening on ${server.url}`)
      yield* onListening(server.url)
      return yield* Effect.never
    }),
  )

/** `tollgate serve`: load and check the config (serve mode: missing keys are errors), then run. */
export const serve = (path: string) =>
  Effect.gen(function* () {
    const { config, warnings } = yield* loadConfig(path, "serve").pipe(
      Effect.tapError((invalid) => Effect.forEach(invalid.problems, (problem) => Console.error(problem))),
    )
    for (const warning of warnings) yield* Effect.logWarning(warning)
    return yield* runGateway(config)
  })
