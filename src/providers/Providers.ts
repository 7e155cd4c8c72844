import { Config as EffectConfig, Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { hash } from "node:crypto"
import { Config } from "../config/Config.js"
import { ReloadRefused } from "../config/LiveConfig.js"
import type { ProviderConfig, TollgateConfig } from "../config/model.js"
import { ProviderClient, type ProviderClientOptions } from "./ProviderClient.js"
import { ProviderError } from "./ProviderError.js"

/** The clients of one configuration, by provider name (what a request uses from start to end). */
export interface ProviderView {
  readonly get: (name: string) => ProviderClient["Service"]
}

/**
 * The client that serves a route target: its provider's, or the one the provider has for the target's
 * model (a Vertex provider's Gemini client).
 */
export const targetClient = (
  view: ProviderView,
  target: { readonly provider: string; readonly model: string },
): ProviderClient["Service"] => {
  const client = view.get(target.provider)
  return client.forModel === undefined ? client : (client.forModel(target.model) ?? client)
}

/** The clients prepared for a new configuration (a reload): made current by `commit`, or closed by `abort`. */
export interface PreparedProviders {
  readonly view: ProviderView
  readonly commit: () => void
  readonly abort: Effect.Effect<void>
}

/** Every configured provider's client, by provider name. */
export class Providers extends Context.Service<
  Providers,
  {
    /** The current configuration's client of provider `name`. */
    readonly get: (name: string) => ProviderClient["Service"]
    /** The current configuration's clients. */
    readonly current: () => ProviderView
    /**
     * Clients for `next` (a reload, ADR 0052): a provider whose settings and
     * credentials are unchanged keeps its client (its pools, its token
     * refresher); a new or changed one gets a new client. A credential that
     * is missing refuses the reload.
     */
    readonly prepare: (next: TollgateConfig) => Effect.Effect<PreparedProviders, ReloadRefused>
    /** No request uses `view` any more: clients that only it held are closed. */
    readonly release: (view: ProviderView) => Effect.Effect<void>
  }
>()("tollgate/Providers") {}

/** The secret in environment variable `env` (through Effect's `Config`); unset or empty is `MissingCredentials`. */
const secret = (provider: string, key: string, env: string) =>
  Effect.flatMap(Effect.option(EffectConfig.Redacted(env)), (value) =>
    Option.isSome(value) && Redacted.value(value.value) !== ""
      ? Effect.succeed(value.value)
      : Effect.fail(
          new ProviderError({
            reason: "MissingCredentials",
            provider,
            message: `providers.${provider}.${key}: environment variable ${env} is unset or empty`,
          }),
        ),
  )

/** The client options of a configured provider, its credentials read from the environment. */
const optionsOf = (config: ProviderConfig): Effect.Effect<ProviderClientOptions, ProviderError> => {
  const { name, baseUrl } = config
  switch (config.kind) {
    case "anthropic":
    case "openai":
      return Effect.map(secret(name, "api_key_env", config.apiKeyEnv), (apiKey) => ({
        kind: config.kind,
        name,
        baseUrl,
        apiKey,
      }))
    case "ollama":
      return Effect.succeed({ kind: "ollama", name, baseUrl })
    case "bedrock":
      return Effect.succeed({ kind: "bedrock", name, baseUrl, region: config.region })
    case "azure":
    case "gemini":
      return Effect.map(secret(name, "api_key_env", config.apiKeyEnv), (apiKey) => ({
        kind: config.kind,
        name,
        baseUrl,
        apiKey,
      }))
    case "vertex": {
      const options = {
        kind: "vertex",
        name,
        baseUrl,
        project: config.project,
        region: config.region,
      } as const
      return config.accessTokenEnv === undefined
        ? Effect.succeed(options)
        : Effect.map(secret(name, "access_token_env", config.accessTokenEnv), (accessToken) => ({
            ...options,
            accessToken,
          }))
    }
  }
}

/** A client and what it was made from; `views` counts the configurations (current or draining) that use it. */
interface Handle {
  readonly fingerprint: string
  readonly client: ProviderClient["Service"]
  readonly scope: Scope.Closeable
  views: number
}

/** What makes two clients the same: the provider's settings and its credentials (hashed, never kept). */
const fingerprintOf = (provider: ProviderConfig, options: ProviderClientOptions): string => {
  const credential =
    "apiKey" in options && options.apiKey !== undefined
      ? Redacted.value(options.apiKey)
      : "accessToken" in options && options.accessToken !== undefined
        ? Redacted.value(options.accessToken)
        : ""
  return `${JSON.stringify(provider)}\u0000${hash("sha256", credential, "hex")}`
}

/**
 * One `ProviderClient` per configured provider (`ProviderClient.make`),
 * each in its own scope under the layer's, so a reload can add, keep or
 * close clients one by one. A credential whose environment variable is
 * unset or empty fails the layer (at start) or refuses the reload.
 */
export const layer = Layer.effect(
  Providers,
  Effect.gen(function* () {
    const config = yield* Config
    const layerScope = yield* Effect.scope
    const views = new Map<ProviderView, ReadonlyMap<string, Handle>>()

    const viewOf = (handles: ReadonlyMap<string, Handle>): ProviderView => {
      const view: ProviderView = {
        get: (name) => {
          const handle = handles.get(name)
          // The config decoder rejects targets of unknown providers, so every target has a client.
          if (handle === undefined) throw new Error(`no client for provider ${name}`)
          return handle.client
        },
      }
      for (const handle of handles.values()) handle.views++
      views.set(view, handles)
      return view
    }

    /** Clients for `providers`, reusing those of `reuse` that are the same; `made` lists the new ones. */
    const build = Effect.fnUntraced(function* (
      providers: ReadonlyMap<string, ProviderConfig>,
      reuse: ReadonlyMap<string, Handle>,
      made: Array<Handle>,
    ) {
      const handles = new Map<string, Handle>()
      for (const provider of providers.values()) {
        const options = yield* optionsOf(provider)
        const fingerprint = fingerprintOf(provider, options)
        const existing = reuse.get(provider.name)
        if (existing !== undefined && existing.fingerprint === fingerprint) {
          handles.set(provider.name, existing)
          continue
        }
        const scope = yield* Scope.fork(layerScope, "sequential")
        const client = yield* ProviderClient.make(options).pipe(
          Scope.provide(scope),
          Effect.tapError(() => Scope.close(scope, Exit.void)),
        )
        const handle: Handle = { fingerprint, client, scope, views: 0 }
        made.push(handle)
        handles.set(provider.name, handle)
      }
      return handles
    })

    let current = viewOf(yield* build(config.providers, new Map(), []))

    const closeUnused = (handles: Iterable<Handle>) =>
      Effect.forEach(
        [...handles].filter((h) => h.views === 0),
        (h) => Scope.close(h.scope, Exit.void),
        { discard: true },
      )

    const release = (view: ProviderView): Effect.Effect<void> =>
      Effect.suspend(() => {
        const handles = views.get(view)
        if (handles === undefined || view === current) return Effect.void
        views.delete(view)
        for (const handle of handles.values()) handle.views--
        return closeUnused(handles.values())
      })

    const prepare = (next: TollgateConfig): Effect.Effect<PreparedProviders, ReloadRefused> =>
      Effect.gen(function* () {
        const made: Array<Handle> = []
        const handles = yield* build(next.providers, views.get(current)!, made).pipe(
          Effect.catch((error: ProviderError) =>
            Effect.andThen(
              Effect.forEach(made, (h) => Scope.close(h.scope, Exit.void), { discard: true }),
              Effect.fail(new ReloadRefused({ problems: [error.message] })),
            ),
          ),
        )
        const view = viewOf(handles)
        return {
          view,
          commit: () => {
            current = view
          },
          abort: Effect.suspend(() => {
            views.delete(view)
            for (const handle of handles.values()) handle.views--
            return closeUnused(made)
          }),
        }
      })

    return Providers.of({
      get: (name) => current.get(name),
      current: () => current,
      prepare,
      release,
    })
  }),
)
