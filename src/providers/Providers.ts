import { Config as EffectConfig, Context, Effect, Layer, Redacted } from "effect"
import { Agent, type Dispatcher } from "undici"
import { Config } from "../config/Config.js"
import type { ProviderConfig } from "../config/model.js"
import type { ProviderAdapter } from "./adapter.js"
import { buildAnthropic } from "./anthropic.js"
import { buildOllama, buildOpenAI } from "./openai.js"
import { googleToken } from "./googleToken.js"
import { buildVertex } from "./vertex.js"

/** Keep-alive pools: idle upstream sockets live this long, ms. */
const KEEP_ALIVE_MS = 30_000

/** Every configured provider's adapter, by provider name. */
export class Providers extends Context.Service<
  Providers,
  { readonly get: (name: string) => ProviderAdapter }
>()("tollgate/Providers") {}

const secret = (env: string) =>
  EffectConfig.Redacted(env).pipe(
    Effect.map(Redacted.value),
    Effect.orElseSucceed(() => ""),
  )

const makeAdapter = (config: ProviderConfig, dispatcher: (connectMs: number) => Dispatcher) =>
  Effect.gen(function* () {
    const base = { name: config.name, config, dispatcher }
    switch (config.kind) {
      case "anthropic":
        return {
          ...base,
          api: "anthropic",
          region: "",
          serves: () => true,
          build: buildAnthropic(config, yield* secret(config.apiKeyEnv)),
        } satisfies ProviderAdapter
      case "openai":
        return {
          ...base,
          api: "openai",
          region: "",
          serves: () => true,
          build: buildOpenAI(config, yield* secret(config.apiKeyEnv)),
        } satisfies ProviderAdapter
      case "ollama":
        return {
          ...base,
          api: "openai",
          region: "",
          serves: () => true,
          build: buildOllama(config),
        } satisfies ProviderAdapter
      case "vertex": {
        const token =
          config.accessTokenEnv === undefined
            ? yield* googleToken(config)
            : yield* Effect.map(secret(config.accessTokenEnv), (value) => () => value)
        return {
          ...base,
          api: "anthropic",
          region: config.region,
          serves: (endpoint) => endpoint !== "/v1/messages/count_tokens",
          build: buildVertex(config, token),
        } satisfies ProviderAdapter
      }
    }
  })

/** Builds one adapter per provider, each with keep-alive undici pools that close with the layer. */
export const layer = Layer.effect(
  Providers,
  Effect.gen(function* () {
    const config = yield* Config
    const agents = new Map<string, Agent>()
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => Promise.all([...agents.values()].map((agent) => agent.destroy()))),
    )
    const adapters = new Map<string, ProviderAdapter>()
    for (const provider of config.providers.values()) {
      const dispatcher = (connectMs: number): Dispatcher => {
        const key = `${provider.name}\u0000${connectMs}`
        let agent = agents.get(key)
        if (agent === undefined) {
          agent = new Agent({
            connect: { timeout: connectMs },
            keepAliveTimeout: KEEP_ALIVE_MS,
            // Tollgate's own deadlines govern headers and body; undici's would race them.
            headersTimeout: 0,
            bodyTimeout: 0,
          })
          agents.set(key, agent)
        }
        return agent
      }
      adapters.set(provider.name, yield* makeAdapter(provider, dispatcher))
    }
    return {
      get: (name: string) => {
        const adapter = adapters.get(name)
        // The config decoder rejects targets of unknown providers, so every target has an adapter.
        if (adapter === undefined) throw new Error(`no adapter for provider ${name}`)
        return adapter
      },
    }
  }),
)
