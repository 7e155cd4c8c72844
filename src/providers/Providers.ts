import { Config as EffectConfig, Context, Effect, Layer, Option, Redacted } from "effect"
import { Config } from "../config/Config.js"
import type { ProviderConfig } from "../config/model.js"
import { ProviderClient, type ProviderClientOptions } from "./ProviderClient.js"
import { ProviderError } from "./ProviderError.js"

/** Every configured provider's client, by provider name. */
export class Providers extends Context.Service<
  Providers,
  { readonly get: (name: string) => ProviderClient["Service"] }
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

/**
 * One `ProviderClient` per configured provider (`ProviderClient.make`),
 * whose pools and token refreshers close with the layer. A credential whose
 * environment variable is unset or empty fails the layer.
 */
export const layer = Layer.effect(
  Providers,
  Effect.gen(function* () {
    const config = yield* Config
    const clients = new Map<string, ProviderClient["Service"]>()
    for (const provider of config.providers.values()) {
      clients.set(provider.name, yield* ProviderClient.make(yield* optionsOf(provider)))
    }
    return Providers.of({
      get: (name) => {
        const client = clients.get(name)
        // The config decoder rejects targets of unknown providers, so every target has a client.
        if (client === undefined) throw new Error(`no client for provider ${name}`)
        return client
      },
    })
  }),
)
