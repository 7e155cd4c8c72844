import { Config as EffectConfig, Effect, Layer } from "effect"
import * as AdminApi from "./admin/AdminApi.js"
import * as DbIndex from "./admin/dbIndex.js"
import * as UsageIndex from "./admin/UsageIndex.js"
import { Config } from "./config/Config.js"
import { LiveConfig } from "./config/LiveConfig.js"
import type { TollgateConfig } from "./config/model.js"
import * as Deadlines from "./reliability/Deadlines.js"
import * as Gateway from "./gateway/Gateway.js"
import * as KeyStore from "./keys/KeyStore.js"
import * as Server from "./http/Server.js"
import { Meter } from "./meter/Meter.js"
import { UsageLog, type UsageFileError } from "./meter/UsageLog.js"
import * as Providers from "./providers/Providers.js"
import * as Breakers from "./reliability/Breakers.js"
import * as RetryBudget from "./reliability/RetryBudget.js"
import * as Limits from "./limits/Limits.js"
import { layerMemory } from "./limits/memoryStore.js"
import { layerRedis } from "./limits/redisStore.js"
import type { Store } from "./limits/Store.js"
import * as OpenRequests from "./ops/OpenRequests.js"
import * as BodyBuffers from "./ops/BodyBuffers.js"
import * as Metrics from "./ops/Metrics.js"
import * as Reload from "./ops/Reload.js"
import * as Tracing from "./ops/Tracing.js"
import type { Telemetry } from "./ops/Telemetry.js"
import { UsageBacklog } from "./ops/UsageBacklog.js"
import { UsageDbStats } from "./ops/UsageDbStats.js"
import * as UsageDatabase from "./usagedb/Database.js"
import * as UsageDbWriter from "./usagedb/Writer.js"

type UsageError =
  UsageFileError | UsageDatabase.UsageDbError | UsageDbWriter.UsageDbStartError | EffectConfig.ConfigError

/**
 * The usage log and the index `/admin/usage` reads: the file and this copy's
 * records, or with `usage.database` the file as the spool of the database's
 * writer and the database (the fleet's records) for the reads.
 */
const usageLayers = (
  config: TollgateConfig,
): {
  readonly log: Layer.Layer<UsageLog, UsageError, UsageIndex.UsageIndex | UsageDbStats>
  readonly index: Layer.Layer<UsageIndex.UsageIndex, UsageError>
} => {
  const database = config.usageDatabase
  if (database === undefined) {
    return {
      log: UsageIndex.withIndex(
        UsageLog.layer(config.usageFile, { backlogMaxBytes: config.usageBacklogMaxBytes }),
      ),
      index: UsageIndex.layer(config.usageFile),
    }
  }
  const db = Layer.unwrap(
    Effect.map(EffectConfig.Redacted(database.urlEnv), (url) => UsageDatabase.layer(url, database.table)),
  )
  const writer = Layer.unwrap(
    Effect.map(EffectConfig.Redacted(database.urlEnv), (url) =>
      UsageDbWriter.layer(config.usageFile, database, config.path, url),
    ),
  ).pipe(Layer.provide(db))
  return {
    log: UsageDbWriter.withWriter(
      UsageLog.layer(config.usageFile, { backlogMaxBytes: config.usageBacklogMaxBytes }),
    ).pipe(Layer.provide(writer)),
    index: DbIndex.layer.pipe(Layer.provide(db)),
  }
}

/**
 * The whole gateway for one decoded config: every layer, composed once.
 * Entry points (`tollgate serve`, `tollgate demo`, tests) build this.
 */
export const appLayer = (
  config: TollgateConfig,
  overrides: {
    /** A store shared with other copies (tests of several copies in one process). */
    readonly store?: Layer.Layer<Store, unknown>
    readonly telemetry?: Layer.Layer<Telemetry>
    /**
     * Reload on SIGHUP (default true); `"ignore"`: SIGHUP does nothing (the demo's config is not a file);
     * false: not handled (tests of one process running several gateways).
     */
    readonly reloadOnSignal?: boolean | "ignore"
  } = {},
) => {
  const store =
    overrides.store ??
    (config.store.kind === "redis"
      ? layerRedis(config.store.url, {
          cluster: config.store.cluster,
          leaseRequests: config.store.leaseRequests,
        })
      : layerMemory({ usageFile: config.usageFile, maxSessions: config.sessions.maxPerTenant }))
  const telemetry = overrides.telemetry ?? Metrics.layerTelemetry
  const usage = usageLayers(config)
  const base = Layer.mergeAll(
    Providers.layer,
    usage.log,
    Limits.layer.pipe(Layer.provideMerge(store)),
    Reload.layer({ signals: overrides.reloadOnSignal ?? true }),
  ).pipe(
    Layer.provideMerge(usage.index),
    Layer.provideMerge(telemetry),
    Layer.provideMerge(Metrics.layer),
    Layer.provideMerge(Layer.merge(UsageDbStats.layer, UsageBacklog.layer)),
    Layer.provideMerge(
      Layer.mergeAll(
        Breakers.layer,
        RetryBudget.layer,
        OpenRequests.layer,
        Deadlines.layer,
        Meter.layer,
        BodyBuffers.layer,
      ),
    ),
    Layer.provideMerge(KeyStore.layer(config)),
    Layer.provideMerge(LiveConfig.layer),
    Layer.provideMerge(Config.layerFrom(config)),
  )
  // Tracing (`telemetry.otlp_endpoint`): the OTLP tracer under everything, flushed last at shutdown; nothing when off.
  return Server.layer.pipe(
    Layer.provide(Layer.merge(Gateway.layer, AdminApi.layer)),
    Layer.provide(base),
    Layer.provide(Tracing.layer(config.telemetry)),
  )
}
