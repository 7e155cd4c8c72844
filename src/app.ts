import { Layer } from "effect"
import * as AdminApi from "./admin/AdminApi.js"
import * as UsageIndex from "./admin/UsageIndex.js"
import { Config } from "./config/Config.js"
import { LiveConfig } from "./config/LiveConfig.js"
import type { TollgateConfig } from "./config/model.js"
import * as Deadlines from "./reliability/Deadlines.js"
import * as Gateway from "./gateway/Gateway.js"
import * as KeyStore from "./keys/KeyStore.js"
import * as Server from "./http/Server.js"
import { Meter } from "./meter/Meter.js"
import { UsageLog } from "./meter/UsageLog.js"
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
      : layerMemory({ usageFile: config.usageFile }))
  const telemetry = overrides.telemetry ?? Metrics.layerTelemetry
  const base = Layer.mergeAll(
    Providers.layer,
    UsageIndex.withIndex(UsageLog.layer(config.usageFile)),
    Limits.layer.pipe(Layer.provideMerge(store)),
    Reload.layer({ signals: overrides.reloadOnSignal ?? true }),
  ).pipe(
    Layer.provideMerge(UsageIndex.layer(config.usageFile)),
    Layer.provideMerge(telemetry),
    Layer.provideMerge(Metrics.layer),
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
