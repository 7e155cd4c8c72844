/**
 * Reloading the configuration (SPEC "Keys at runtime, reload", ADR 0052):
 * on SIGHUP or `POST /admin/reload`, the config file and its price table are
 * read again; a valid result replaces the running configuration atomically
 * (`LiveConfig.swap`), an invalid one changes nothing and each problem is
 * logged at `error`.
 */
import { Cause, Context, Effect, Layer, Option, Semaphore } from "effect"
import { Config } from "../config/Config.js"
import { LiveConfig } from "../config/LiveConfig.js"
import { loadConfig, type Loaded } from "../config/load.js"
import type { TollgateConfig } from "../config/model.js"
import type { ConfigInvalid } from "../config/problems.js"
import { Telemetry } from "./Telemetry.js"

/** What a reload did. */
export interface ReloadOutcome {
  readonly ok: boolean
  /** Why it was refused (nothing changed). */
  readonly problems: ReadonlyArray<string>
  /** What it applied with a warning (restart-only settings, unpriced targets, …). */
  readonly warnings: ReadonlyArray<string>
}

export class Reload extends Context.Service<
  Reload,
  {
    /** Reads the config again and applies it when valid (one reload at a time). */
    readonly reload: (trigger: "signal" | "admin") => Effect.Effect<ReloadOutcome>
    /** The gateway serves: a SIGHUP that came while it started is applied now, later ones at once. */
    readonly markReady: () => void
  }
>()("tollgate/ops/Reload") {}

/**
 * Settings read once at start: a reload that changes one applies the rest and
 * says so. (`server.listen` is never changed by a reload and not compared:
 * `serve --listen` may override it.)
 */
const restartOnly = (from: TollgateConfig, to: TollgateConfig): Array<string> => {
  const changed: Array<string> = []
  const differ = (key: string, a: unknown, b: unknown) => {
    if (JSON.stringify(a) !== JSON.stringify(b))
      changed.push(`${key} changed: it takes effect at the next restart`)
  }
  differ("server.max_buffered_bytes", from.server.maxBufferedBytes, to.server.maxBufferedBytes)
  differ("server.max_connections", from.server.maxConnections, to.server.maxConnections)
  differ("server.shutdown_grace", from.server.shutdownGraceMs, to.server.shutdownGraceMs)
  differ("admin.token_env", from.admin.tokenEnv, to.admin.tokenEnv)
  differ("store", from.store, to.store)
  differ("breaker.shared", from.breaker.shared, to.breaker.shared)
  differ("usage.file", from.usageFile, to.usageFile)
  differ("keys.file", from.keysFile, to.keysFile)
  differ("telemetry", from.telemetry, to.telemetry)
  return changed
}

const summary = (config: TollgateConfig) => ({
  providers: config.providers.size,
  routes: config.routes.size,
  tenants: config.tenants.size,
  prices: config.prices.length,
})

/**
 * The reload, reading the config file the process started from (or
 * `options.load`, for tests), and — with `options.signals` — on SIGHUP.
 */
export const layer = (
  options: {
    /** `true`: reload on SIGHUP; `"ignore"`: SIGHUP does nothing (a config that is not a file); default: not handled. */
    readonly signals?: boolean | "ignore"
    readonly load?: Effect.Effect<Loaded, ConfigInvalid>
  } = {},
): Layer.Layer<Reload, never, Config | LiveConfig | Telemetry> =>
  Layer.effect(
    Reload,
    Effect.gen(function* () {
      const started = yield* Config
      const live = yield* LiveConfig
      const telemetry = yield* Telemetry
      const load = options.load ?? loadConfig(started.path, "serve")

      const refused = (trigger: string, problems: ReadonlyArray<string>) =>
        Effect.andThen(
          Effect.forEach(
            problems,
            (problem) =>
              Effect.logError("config reload refused; nothing changed").pipe(
                Effect.annotateLogs({ trigger, problem }),
              ),
            { discard: true },
          ),
          Effect.sync((): ReloadOutcome => {
            telemetry.configReloaded("error")
            return { ok: false, problems, warnings: [] }
          }),
        )

      // One reload at a time, from reading the file to the swap: a slower read of an older file never
      // lands after a newer one.
      const lock = yield* Semaphore.make(1)
      const reload = (trigger: "signal" | "admin"): Effect.Effect<ReloadOutcome> =>
        lock.withPermits(1)(attempt(trigger))
      const attempt = (trigger: "signal" | "admin"): Effect.Effect<ReloadOutcome> =>
        Effect.gen(function* () {
          const loaded = yield* Effect.result(load)
          if (loaded._tag === "Failure") return yield* refused(trigger, loaded.failure.problems)
          // The address the server listens on stays (it may come from `serve --listen`, not the file).
          const file = loaded.success.config
          const next: TollgateConfig = {
            ...file,
            server: { ...file.server, host: started.server.host, port: started.server.port },
          }
          const warnings = [...loaded.success.warnings, ...restartOnly(started, next)]
          const swapped = yield* Effect.exit(live.swap(next))
          if (swapped._tag === "Failure") {
            const failure = Cause.findErrorOption(swapped.cause)
            return yield* refused(
              trigger,
              Option.isSome(failure)
                ? failure.value.problems
                : [`internal error: ${Cause.pretty(swapped.cause)}`],
            )
          }
          telemetry.configReloaded("ok")
          yield* Effect.forEach(warnings, (warning) => Effect.logWarning(warning), { discard: true })
          yield* Effect.logInfo("config reloaded").pipe(Effect.annotateLogs({ trigger, ...summary(next) }))
          return { ok: true, problems: [], warnings }
        })

      // A SIGHUP before the gateway serves is kept and applied once it does (`ready`): the request path's
      // parts register for reloads while the layers are built.
      let ready = false
      let pendingSignal = false
      const run = Effect.runForkWith(yield* Effect.context<never>())
      const markReady = () => {
        ready = true
        if (pendingSignal) {
          pendingSignal = false
          run(reload("signal"))
        }
      }
      if (options.signals === true || options.signals === "ignore") {
        const reloads = options.signals === true
        const onSignal = () => {
          if (!reloads) return
          if (ready) run(reload("signal"))
          else pendingSignal = true
        }
        yield* Effect.acquireRelease(
          Effect.sync(() => process.on("SIGHUP", onSignal)),
          () => Effect.sync(() => process.off("SIGHUP", onSignal)),
        )
      }
      return { reload, markReady }
    }),
  )
