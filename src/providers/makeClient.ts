import { Duration, Effect, Redacted } from "effect"
import type { Endpoint } from "../domain/endpoint.js"
import { buildAnthropic } from "./anthropic.js"
import { DEFAULT_BASE_URL, DEFAULT_CONNECT_MS, vertexBaseUrl } from "../domain/providerDefaults.js"
import { googleToken } from "./googleToken.js"
import { buildOllama, buildOpenAI } from "./openai.js"
import type { ProviderClient, ProviderClientOptions, ProviderKind } from "./ProviderClient.js"
import { ProviderError } from "./ProviderError.js"
import { makeSend } from "./send.js"
import { dispatchUpstream, makePools } from "./transport.js"
import { buildVertex } from "./vertex.js"

type Client = Omit<ProviderClient["Service"], "send">

/** The endpoints each kind of provider serves (Vertex has no count_tokens; Ollama no Responses API). */
const SERVES: Record<ProviderKind, ReadonlySet<Endpoint>> = {
  anthropic: new Set(["/v1/messages", "/v1/messages/count_tokens"]),
  vertex: new Set(["/v1/messages"]),
  openai: new Set(["/v1/chat/completions", "/v1/responses", "/v1/embeddings"]),
  ollama: new Set(["/v1/chat/completions", "/v1/embeddings"]),
}

const servesOf =
  (kind: ProviderKind) =>
  (endpoint: Endpoint): boolean =>
    SERVES[kind].has(endpoint)

const baseUrlOf = (given: string | undefined, fallback: string): string =>
  (given ?? fallback).replace(/\/+$/, "")

/** The value of a key or token; an empty one is `MissingCredentials`. */
const credential = (provider: string, field: string, value: Redacted.Redacted<string>) => {
  const text = Redacted.value(value)
  return text === ""
    ? Effect.fail(
        new ProviderError({
          reason: "MissingCredentials",
          provider,
          message: `${provider}: ${field} is empty`,
        }),
      )
    : Effect.succeed(text)
}

/** `ProviderClient.make`: one client with its own keep-alive pools, which close with the scope. */
export const makeClient = Effect.fn("ProviderClient.make")(function* (options: ProviderClientOptions) {
  const name = options.name ?? options.kind
  const connectMs =
    options.connectTimeout === undefined ? DEFAULT_CONNECT_MS : Duration.toMillis(options.connectTimeout)
  const pools = yield* makePools
  const common = {
    name,
    dispatch: (upstream, handler, ms) => dispatchUpstream(pools(ms), upstream, handler),
  } satisfies Partial<Client>
  /** A provider reached at its own host, with no region: every endpoint served. */
  const hosted = (
    kind: "anthropic" | "openai" | "ollama",
    api: Client["api"],
    build: Client["build"],
  ): Client => ({
    ...common,
    kind,
    api,
    region: "",
    serves: servesOf(kind),
    build,
  })
  let client: Client
  switch (options.kind) {
    case "anthropic":
      client = hosted(
        "anthropic",
        "anthropic",
        buildAnthropic(
          baseUrlOf(options.baseUrl, DEFAULT_BASE_URL.anthropic),
          yield* credential(name, "apiKey", options.apiKey),
        ),
      )
      break
    case "openai":
      client = hosted(
        "openai",
        "openai",
        buildOpenAI(
          baseUrlOf(options.baseUrl, DEFAULT_BASE_URL.openai),
          yield* credential(name, "apiKey", options.apiKey),
        ),
      )
      break
    case "ollama":
      client = hosted("ollama", "openai", buildOllama(baseUrlOf(options.baseUrl, DEFAULT_BASE_URL.ollama)))
      break
    case "vertex": {
      const { project, region } = options
      const baseUrl = baseUrlOf(options.baseUrl, vertexBaseUrl(region))
      let token: () => string
      if (options.accessToken === undefined) token = yield* googleToken({ name, project })
      else {
        const value = yield* credential(name, "accessToken", options.accessToken)
        token = () => value
      }
      client = {
        ...common,
        kind: "vertex",
        api: "anthropic",
        region,
        serves: servesOf("vertex"),
        build: buildVertex({ baseUrl, project, region }, token),
      }
      break
    }
  }
  return { ...client, send: makeSend(client, connectMs) }
})
