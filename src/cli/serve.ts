import { Console, Context, Effect, Layer } from "effect"
import { appLayer } from "../app.js"
import { loadConfig } from "../config/load.js"
import type { ListenAddress } from "../config/primitives.js"
import type { TollgateConfig } from "../config/model.js"
import { ConfigInvalid } from "../config/problems.js"
import { ListenError, Server } from "../http/Server.js"
import * as OpenRequests from "../ops/OpenRequests.js"
import { formatListen } from "./options.js"

/** How a command runs the gateway: what it adds to the startup and what it says on a busy port. */
export interface RunOptions {
  /** Decode warnings, logged at `warn` after the startup summary. */
  readonly warnings?: ReadonlyArray<string>
  /** Where the prices come from, for the summary. Default: the config's `pricing.file`. */
  readonly prices?: string
  /** How to pick another address, after `ADDRESS is in use; `. */
  readonly listenHint: string
  /** Runs once the server listens, after the startup lines. */
  readonly onListening?: (url: string) => Effect.Effect<void>
  /** Reload on SIGHUP (default true; `"ignore"` for the demo, whose config is not a file to read again). */
  readonly reloadOnSignal?: boolean | "ignore"
}

/** A URL as the summary shows it: without credentials. */
const withoutCredentials = (text: string, otherwise: string): string => {
  try {
    const url = new URL(text)
    url.username = ""
    url.password = ""
    return url.toString()
  } catch {
    return otherwise
  }
}

/** The store as the summary names it: `memory`, or the Redis URL without its credentials. */
const describeStore = (store: TollgateConfig["store"]): string =>
  store.kind === "memory" ? "memory" : withoutCredentials(store.url, "redis")

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/**
 * The one startup line after `listening on`: what this gateway serves (names in the fields, counts in the
 * message), the store, the usage file and the price table.
 */
export const logStartupSummary = (config: TollgateConfig, prices: string) => {
  const providers = [...config.providers.keys()]
  const routes = [...config.routes.keys()]
  const tenants = [...config.tenants.keys()]
  const store = describeStore(config.store)
  const { otlpEndpoint, sampleRatio } = config.telemetry
  const tracing =
    otlpEndpoint === undefined
      ? undefined
      : `${withoutCredentials(otlpEndpoint, "on")} (sample ${sampleRatio})`
  return Effect.logInfo(
    `ready: ${plural(providers.length, "provider")}, ${plural(routes.length, "route")}, ` +
      `${plural(tenants.length, "tenant")}; store ${store}; prices ${prices}` +
      (tracing === undefined ? "" : `; tracing to ${tracing}`),
    {
      providers,
      routes,
      tenants,
      store,
      usage_file: config.usageFile,
      prices,
      ...(tracing === undefined ? {} : { tracing }),
    },
  )
}

/**
 * One line for a server that could not listen, naming the way out, then exit 1 (like an invalid
 * config: the address is configuration). `listen EADDRINUSE: address already in use …` is the usual case.
 */
const cannotListen = (address: ListenAddress, error: ListenError, hint: string) => {
  const shown = formatListen(address)
  const reason = /^listen (E[A-Z]+: .*?)(?: \S+:\d+)?$/.exec(error.message)?.[1] ?? error.message
  const line = reason.startsWith("EADDRINUSE")
    ? `tollgate: ${shown} is in use; ${hint}`
    : `tollgate: cannot listen on ${shown} (${reason}); ${hint}`
  return Effect.andThen(Console.error(line), Effect.fail(new ConfigInvalid({ problems: [line] })))
}

/**
 * Builds the gateway for `config`, prints `listening on URL` (the first line on stdout: tests and scripts
 * wait for it), logs the startup summary and the warnings, and runs until interrupted (SIGTERM, Ctrl-C).
 * On the way out it logs `stopped` with the requests that were open when the shutdown began (the drain
 * lets them finish, up to `server.shutdown_grace`).
 */
export const runGateway = (config: TollgateConfig, options: RunOptions) =>
  Effect.scoped(
    Effect.gen(function* () {
      let openAtStop: number | undefined
      // Added first, so it runs last: after the server has drained and closed.
      yield* Effect.addFinalizer(() =>
        openAtStop === undefined ? Effect.void : Effect.logInfo("stopped", { drained: openAtStop }),
      )
      // `OpenRequests.layer` is the gateway's own instance: a layer is built once per build (memoized).
      const context = yield* Layer.build(
        Layer.merge(appLayer(config, { reloadOnSignal: options.reloadOnSignal ?? true }), OpenRequests.layer),
      ).pipe(
        Effect.catchIf(
          (error): error is ListenError => error instanceof ListenError,
          (error) => cannotListen(config.server, error, options.listenHint),
        ),
      )
      const server = Context.get(context, Server)
      const open = Context.get(context, OpenRequests.OpenRequests)
      // Added last, so it runs first: when the shutdown begins, before the drain.
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          openAtStop = open.tenants().reduce((sum, tenant) => sum + open.bound(tenant).open, 0)
        }),
      )
      yield* Console.log(`listening on ${server.url}`)
      yield* logStartupSummary(config, options.prices ?? config.pricingFile)
      for (const warning of options.warnings ?? []) yield* Effect.logWarning(warning)
      if (options.onListening !== undefined) yield* options.onListening(server.url)
      return yield* Effect.never
    }),
  )

/**
 * `tollgate serve`: load and check the config (serve mode: missing keys are errors), apply `--listen`
 * over `server.listen`, then run.
 */
export const serve = (path: string, listen?: ListenAddress) =>
  Effect.gen(function* () {
    const { config, warnings } = yield* loadConfig(path, "serve").pipe(
      Effect.tapError((invalid) => Effect.forEach(invalid.problems, (problem) => Console.error(problem))),
    )
    const server = listen === undefined ? config.server : { ...config.server, ...listen }
    return yield* runGateway(
      { ...config, server },
      {
        warnings,
        listenHint:
          listen === undefined
            ? "pass --listen HOST:PORT (or set server.listen)"
            : "pass another --listen HOST:PORT",
      },
    )
  })
