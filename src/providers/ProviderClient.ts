/**
 * One provider (Anthropic, OpenAI, Ollama, Claude on Vertex AI) as a
 * service: the gateway's upstream side, and the public library surface
 * (`tollgate/providers`, docs/library.md).
 *
 * Gotchas: `send` needs a `Scope` and the response lives in it: closing the
 * scope (or interrupting the fiber) aborts the upstream request, read or
 * not. `usage` resolves when the body has been read to its end, or when the
 * scope closes, whichever comes first. The body can be read once.
 */
import { Context, Layer } from "effect"
import type { Duration, Effect, Redacted, Scope, Stream } from "effect"
import type { Dispatcher } from "undici"
import type { ApiFormat, Endpoint } from "../domain/endpoint.js"
import type { ParsedRequest } from "../domain/request.js"
import type { Usage } from "../domain/usage.js"
import { makeClient } from "./makeClient.js"
import type { ProviderError } from "./ProviderError.js"
import type { UpstreamRequest } from "./transport.js"

interface CommonOptions {
  /** Names the provider in errors. Default: the kind. */
  readonly name?: string | undefined
  /** Longest wait for the TCP/TLS connection of `send`. Default 5 seconds. */
  readonly connectTimeout?: Duration.Input | undefined
}

/** The Anthropic API (`x-api-key`). `baseUrl` default `https://api.anthropic.com`. */
export interface AnthropicOptions extends CommonOptions {
  readonly kind: "anthropic"
  readonly baseUrl?: string | undefined
  readonly apiKey: Redacted.Redacted<string>
}

/** The OpenAI API (`authorization: Bearer`). `baseUrl` default `https://api.openai.com`. */
export interface OpenAIOptions extends CommonOptions {
  readonly kind: "openai"
  readonly baseUrl?: string | undefined
  readonly apiKey: Redacted.Redacted<string>
}

/** Ollama's OpenAI-compatible API, no key. `baseUrl` default `http://localhost:11434`. */
export interface OllamaOptions extends CommonOptions {
  readonly kind: "ollama"
  readonly baseUrl?: string | undefined
}

/**
 * Claude on Vertex AI. `baseUrl` default `https://{region}-aiplatform.googleapis.com`
 * (`https://aiplatform.googleapis.com` for `global`). Without `accessToken`,
 * Google Application Default Credentials, refreshed in the background.
 */
export interface VertexOptions extends CommonOptions {
  readonly kind: "vertex"
  readonly project: string
  readonly region: string
  readonly baseUrl?: string | undefined
  readonly accessToken?: Redacted.Redacted<string> | undefined
}

/** AWS credentials: an access key pair (with the session token of temporary credentials). */
export interface AwsCredentials {
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly sessionToken?: string | undefined
  /** When temporary credentials stop working; a provider is asked again before then. */
  readonly expiration?: Date | undefined
}

/**
 * Claude on Amazon Bedrock, signed with AWS Signature Version 4. `baseUrl`
 * default `https://bedrock-runtime.{region}.amazonaws.com`. Without
 * `credentials`, AWS's default chain (environment, shared profile, SSO,
 * ECS/EC2 metadata), cached and refreshed before it expires.
 */
export interface BedrockOptions extends CommonOptions {
  readonly kind: "bedrock"
  readonly region: string
  readonly baseUrl?: string | undefined
  readonly credentials?: AwsCredentials | (() => Promise<AwsCredentials>) | undefined
}

/** Azure OpenAI's v1 API (`api-key`, `/openai/v1/…`); a request's model is the deployment name. */
export interface AzureOptions extends CommonOptions {
  readonly kind: "azure"
  /** The resource's endpoint, e.g. `https://myres.openai.azure.com`. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
}

/**
 * Gemini on Google AI Studio (`x-goog-api-key`): Chat Completions requests
 * translated to `generateContent`. `baseUrl` default
 * `https://generativelanguage.googleapis.com`.
 */
export interface GeminiOptions extends CommonOptions {
  readonly kind: "gemini"
  readonly baseUrl?: string | undefined
  readonly apiKey: Redacted.Redacted<string>
}

/** How to reach one provider. */
export type ProviderClientOptions =
  | AnthropicOptions
  | OpenAIOptions
  | OllamaOptions
  | VertexOptions
  | BedrockOptions
  | AzureOptions
  | GeminiOptions

/** The kinds of provider. */
export type ProviderKind = ProviderClientOptions["kind"]

/** One request for `send`. */
export interface SendRequest {
  /** The API path, in the provider's own format: `/v1/messages`, `/v1/chat/completions`, … */
  readonly endpoint: Endpoint
  /**
   * A JSON object (encoded by the client), or the bytes of one (sent as
   * they are, but for the patches below). The client sets `model`
   * (Vertex: moves it into the URL), and for an OpenAI stream adds
   * `stream_options.include_usage` so that the usage can be metered.
   */
  readonly body: Readonly<Record<string, unknown>> | Uint8Array
  /** Extra request headers (`anthropic-version`, `anthropic-beta`, …); credentials are the client's own. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** The upstream model. Default: the body's `model`. */
  readonly model?: string | undefined
}

/** The provider's answer; its body and usage live in the scope of `send`. */
export interface ProviderResponse {
  readonly status: number
  /** Lower-case names; repeated headers joined with ", ". */
  readonly headers: Record<string, string>
  /**
   * The raw body (JSON or SSE) as it arrives, pulled: the upstream request
   * is paused while nobody pulls. Fails with `BodyFailed` when the body
   * breaks off. Read it once.
   */
  readonly body: Stream.Stream<Uint8Array, ProviderError>
  /**
   * The usage, once the body has been read to its end (or the scope
   * closed). `estimated` when the provider reported none. Error statuses
   * and count_tokens answers count 0.
   */
  readonly usage: Effect.Effect<Usage>
}

/** What a `ProviderClient` offers (the service's shape). */
export interface ProviderClientService {
  /** `options.name`, else the kind. */
  readonly name: string
  readonly kind: ProviderKind
  /** The wire format of its requests and responses. */
  readonly api: ApiFormat
  /** Where the provider runs ("" unless Vertex or Bedrock); part of the gateway's breaker key. */
  readonly region: string
  /**
   * Whether it serves `endpoint`: Anthropic Messages and count_tokens; Vertex and Bedrock Messages;
   * OpenAI and Azure Chat Completions, Responses and embeddings; Ollama Chat Completions and embeddings;
   * Gemini Chat Completions.
   */
  readonly serves: (endpoint: Endpoint) => boolean
  /**
   * Why the provider cannot take `request` (a field its translation refuses), else undefined; only
   * providers that translate requests (Gemini) have it.
   */
  readonly refuse?: ((request: ParsedRequest) => string | undefined) | undefined
  /**
   * The client that serves `model` when it is not this one: a Vertex provider serves Gemini models
   * (`gemini-…`) through a Chat Completions client of its own (same pools, same token).
   */
  readonly forModel?: ((model: string) => ProviderClientService | undefined) | undefined
  /** The upstream request for a gateway request sent to `model`: body patched, credentials added. */
  readonly build: (request: ParsedRequest, model: string) => UpstreamRequest
  /** Sends `upstream` through the keep-alive pool for `connectMs`; `handler` gets the response. */
  readonly dispatch: (
    upstream: UpstreamRequest,
    handler: Dispatcher.DispatchHandler,
    connectMs: number,
  ) => void
  /** Sends one request; see `ProviderResponse`. Closing the scope aborts it. */
  readonly send: (request: SendRequest) => Effect.Effect<ProviderResponse, ProviderError, Scope.Scope>
}

/** One provider as a service; build it with `ProviderClient.layer(options)` or `ProviderClient.make(options)`. */
export class ProviderClient extends Context.Service<ProviderClient, ProviderClientService>()(
  "tollgate/providers/ProviderClient",
) {
  /**
   * A client whose pools (and Google token refresher) live in the current
   * scope. Fails with `MissingCredentials` for an empty key or token, or
   * when Application Default Credentials give no token.
   */
  static readonly make: (
    options: ProviderClientOptions,
  ) => Effect.Effect<ProviderClient["Service"], ProviderError, Scope.Scope> = makeClient

  /** `make` as a layer: the pools close with the layer. */
  static readonly layer = (options: ProviderClientOptions): Layer.Layer<ProviderClient, ProviderError> =>
    Layer.effect(ProviderClient, makeClient(options))
}
