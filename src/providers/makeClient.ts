import { fromNodeProviderChain } from "@aws-sdk/credential-providers"
import { Duration, Effect, Redacted } from "effect"
import type { Endpoint } from "../domain/endpoint.js"
import { buildAnthropic } from "./anthropic.js"
import { bedrockBaseUrl, bedrockHandler, buildBedrock, makeSigner, signUpstream } from "./bedrock.js"
import { buildGemini, buildVertexGemini, GEMINI_BASE_URL, geminiHandler, refuseGemini } from "./gemini.js"
import { DEFAULT_BASE_URL, DEFAULT_CONNECT_MS, vertexBaseUrl } from "../domain/providerDefaults.js"
import { googleToken } from "./googleToken.js"
import { buildAzure, buildOllama, buildOpenAI } from "./openai.js"
import type { Dispatcher } from "undici"
import type {
  AwsCredentials,
  BedrockOptions,
  ProviderClient,
  ProviderClientOptions,
  ProviderKind,
} from "./ProviderClient.js"
import { ProviderError } from "./ProviderError.js"
import { makeSend } from "./send.js"
import { dispatchUpstream, makePools, type UpstreamError } from "./transport.js"
import { buildVertex } from "./vertex.js"

type Client = Omit<ProviderClient["Service"], "send">

/**
 * The endpoints each kind of provider serves (Vertex and Bedrock have no count_tokens; Ollama no Responses
 * API; Gemini Chat Completions only, translated).
 */
const SERVES: Record<ProviderKind, ReadonlySet<Endpoint>> = {
  anthropic: new Set(["/v1/messages", "/v1/messages/count_tokens"]),
  vertex: new Set(["/v1/messages"]),
  bedrock: new Set(["/v1/messages"]),
  openai: new Set(["/v1/chat/completions", "/v1/responses", "/v1/embeddings"]),
  azure: new Set(["/v1/chat/completions", "/v1/responses", "/v1/embeddings"]),
  ollama: new Set(["/v1/chat/completions", "/v1/embeddings"]),
  gemini: new Set(["/v1/chat/completions"]),
}

const CHAT_ONLY: ReadonlySet<Endpoint> = SERVES.gemini

const servesOf =
  (kind: ProviderKind, set: ReadonlySet<Endpoint> = SERVES[kind]) =>
  (endpoint: Endpoint): boolean =>
    set.has(endpoint)

/** A failure before the request was sent (a signature that could not be made), as undici reports one. */
const failBeforeSend = (handler: Dispatcher.DispatchHandler, cause: unknown): void => {
  const error: UpstreamError = cause instanceof Error ? cause : new Error(String(cause))
  // The controller is not read by a request that never started (UpstreamCall ignores it).
  handler.onResponseError?.(undefined as unknown as Dispatcher.DispatchController, error)
}

/** AWS's default credential chain, or the given credentials; the first are resolved now (none: `MissingCredentials`). */
const awsCredentials = (provider: string, given: BedrockOptions["credentials"]) => {
  const resolve: () => Promise<AwsCredentials> =
    given === undefined
      ? fromNodeProviderChain()
      : typeof given === "function"
        ? given
        : () => Promise.resolve(given)
  return Effect.as(
    Effect.tryPromise({
      try: resolve,
      catch: (cause) =>
        new ProviderError({
          reason: "MissingCredentials",
          provider,
          message:
            `${provider}: no AWS credentials (${cause instanceof Error ? cause.message : String(cause)})`.slice(
              0,
              300,
            ),
        }),
    }),
    resolve,
  )
}

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
    kind: "anthropic" | "openai" | "ollama" | "azure",
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
      // Gemini models on Vertex: the same pools and token, the Chat Completions wire (ADR 0071).
      const geminiClient: Client = {
        name,
        kind: "vertex",
        api: "openai",
        region,
        serves: servesOf("vertex", CHAT_ONLY),
        refuse: refuseGemini,
        build: buildVertexGemini({ baseUrl, project, region }, token),
        dispatch: (upstream, handler, ms) =>
          dispatchUpstream(pools(ms), upstream, geminiHandler(upstream, handler)),
      }
      const gemini = { ...geminiClient, send: makeSend(geminiClient, connectMs) }
      client = {
        ...common,
        kind: "vertex",
        api: "anthropic",
        region,
        serves: servesOf("vertex"),
        build: buildVertex({ baseUrl, project, region }, token),
        forModel: (model) => (model.startsWith("gemini-") ? gemini : undefined),
      }
      break
    }
    case "bedrock": {
      const { region } = options
      const baseUrl = baseUrlOf(options.baseUrl, bedrockBaseUrl(region))
      const signer = makeSigner(region, yield* awsCredentials(name, options.credentials))
      client = {
        name,
        kind: "bedrock",
        api: "anthropic",
        region,
        serves: servesOf("bedrock"),
        build: buildBedrock({ baseUrl, region }),
        // Signed last, after the trace headers; a call closed meanwhile is aborted as it starts.
        dispatch: (upstream, handler, ms) => {
          signUpstream(signer, upstream).then(
            (signed) => dispatchUpstream(pools(ms), signed, bedrockHandler(handler)),
            (cause: unknown) => failBeforeSend(handler, cause),
          )
        },
      }
      break
    }
    case "azure":
      client = hosted(
        "azure",
        "openai",
        buildAzure(
          baseUrlOf(options.baseUrl, options.baseUrl),
          yield* credential(name, "apiKey", options.apiKey),
        ),
      )
      break
    case "gemini": {
      const build = buildGemini(
        baseUrlOf(options.baseUrl, GEMINI_BASE_URL),
        yield* credential(name, "apiKey", options.apiKey),
      )
      client = {
        name,
        kind: "gemini",
        api: "openai",
        region: "",
        serves: servesOf("gemini"),
        refuse: refuseGemini,
        build,
        dispatch: (upstream, handler, ms) =>
          dispatchUpstream(pools(ms), upstream, geminiHandler(upstream, handler)),
      }
      break
    }
  }
  return { ...client, send: makeSend(client, connectMs) }
})
