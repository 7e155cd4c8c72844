/**
 * The decoded configuration: what the rest of Tollgate reads. `schema.ts`
 * decodes `tollgate.yaml` into exactly this shape (durations in
 * milliseconds, money in integer micro-USD, every default filled in).
 */

/** Integer micro-USD (1 USD = 1,000,000). */
export type MicroUsd = number

export type { ApiFormat } from "../domain/endpoint.js"
import type { ApiFormat } from "../domain/endpoint.js"
export type ProviderKind = "anthropic" | "openai" | "vertex" | "ollama" | "bedrock" | "azure" | "gemini"

export interface ServerConfig {
  /** `host:port`; port 0 picks a free port. Default `127.0.0.1:8080`. */
  readonly host: string
  readonly port: number
  /** How long open streams may finish after SIGTERM, ms. Default 30 s. */
  readonly shutdownGraceMs: number
  /** Largest accepted request body, bytes. Default 10,485,760. */
  readonly maxBodyBytes: number
  /**
   * Most request-body bytes held by all requests together; one tenant may
   * hold at most half. Default: 1/16 of the memory the process may use,
   * between 64 MiB and 1 GiB.
   */
  readonly maxBufferedBytes: number
  /** Longest time a client may take to send its request (headers and body), ms. Default 60 s. */
  readonly bodyTimeoutMs: number
  /** Most client connections open at once; more are closed on accept. Default 10,000. */
  readonly maxConnections: number
  /**
   * Most requests of all tenants in flight at once on this copy (from headers to record); more wait in their
   * tenant's queue, served round-robin across tenants, or get 429. Undefined (the default): no cap.
   */
  readonly maxConcurrentRequests?: number | undefined
}

export interface AdminConfig {
  /** Name of the env var holding the admin bearer token. Default `TOLLGATE_ADMIN_TOKEN`. */
  readonly tokenEnv: string
}

export type StoreConfig =
  | { readonly kind: "memory" }
  | {
      readonly kind: "redis"
      readonly url: string
      /** `store.cluster`: `url` names one node of a Redis Cluster; the client follows the cluster's slots. */
      readonly cluster: boolean
      /** `store.lease_requests`: requests one admission may lease far from every limit (ADR 0063); 1: none. */
      readonly leaseRequests: number
    }

export interface RetryConfig {
  /** Total attempts including the first. Default 3. */
  readonly maxAttempts: number
  /** Extra attempts per request in the recent minute. Default 0.1. */
  readonly budgetRatio: number
}

export interface BreakerConfig {
  /** Default 20. */
  readonly minRequests: number
  /** Default 0.5. */
  readonly failureRatio: number
  /** ms. Default 30 s. */
  readonly openForMs: number
  /** `breaker.shared` (Redis store only): breaker state and the retry budget shared by every copy (ADR 0055). */
  readonly shared: boolean
}

/** All ms; each applies to each attempt separately. */
export interface TimeoutsConfig {
  /** TCP/TLS connect. Default 5 s. */
  readonly connectMs: number
  /** Request sent → first response body byte. Default 60 s. */
  readonly firstTokenMs: number
  /** Longest gap between two upstream body chunks. Default 60 s. */
  readonly idleMs: number
  /** Whole attempt. Default 600 s. */
  readonly totalMs: number
}

interface ProviderBase {
  /** The key of this provider under `providers`. */
  readonly name: string
  /** Host root without a trailing slash; Tollgate appends the API path. */
  readonly baseUrl: string
}

export interface AnthropicProvider extends ProviderBase {
  readonly kind: "anthropic"
  /** Default `ANTHROPIC_API_KEY`. */
  readonly apiKeyEnv: string
}

export interface OpenAIProvider extends ProviderBase {
  readonly kind: "openai"
  /** Default `OPENAI_API_KEY`. */
  readonly apiKeyEnv: string
}

export interface VertexProvider extends ProviderBase {
  readonly kind: "vertex"
  readonly project: string
  readonly region: string
  /** When set, a static bearer token from this env var instead of ADC. */
  readonly accessTokenEnv: string | undefined
}

export interface OllamaProvider extends ProviderBase {
  readonly kind: "ollama"
}

export interface BedrockProvider extends ProviderBase {
  readonly kind: "bedrock"
  /** The AWS region, e.g. `us-east-1`; credentials come from AWS's default chain. */
  readonly region: string
}

export interface AzureProvider extends ProviderBase {
  readonly kind: "azure"
  /** Default `AZURE_OPENAI_API_KEY`. */
  readonly apiKeyEnv: string
}

export interface GeminiProvider extends ProviderBase {
  readonly kind: "gemini"
  /** Default `GEMINI_API_KEY`. */
  readonly apiKeyEnv: string
}

export type ProviderConfig =
  | AnthropicProvider
  | OpenAIProvider
  | VertexProvider
  | OllamaProvider
  | BedrockProvider
  | AzureProvider
  | GeminiProvider

export interface TargetConfig {
  readonly provider: string
  readonly model: string
  /** A weighted route's share of first picks (0: a fallback only; 0 on an ordered route). */
  readonly weight: number
  /** The `aliases:` entry the target was named by, if any. */
  readonly alias: string | undefined
}

/** `routes.NAME.strategy` (ADR 0073). */
export type RouteStrategy = "ordered" | "weighted"

export interface RouteConfig {
  /** The route name is the `model` clients send. */
  readonly name: string
  readonly api: ApiFormat
  /**
   * `translate: true`: the route takes providers of both kinds and clients of
   * every chat endpoint; requests and responses are translated between
   * formats where a target speaks another (default false).
   */
  readonly translate: boolean
  /** Global `retry` with the route's overrides applied. */
  readonly retry: RetryConfig
  /** Global `timeouts` with the route's overrides applied. */
  readonly timeouts: TimeoutsConfig
  /** 1..10: tried in order, or with `weighted` the first one picked by weight and the rest in order. */
  readonly targets: ReadonlyArray<TargetConfig>
  /** Default `ordered`. */
  readonly strategy: RouteStrategy
  /** `sticky: true`: a session stays on the target that served its last request while it is available. */
  readonly sticky: boolean
}

/** `tenants.NAME.limits.queue` (ADR 0057). */
export interface QueueConfig {
  /** Longest a request waits, from its arrival, for a place or its rate window, ms. */
  readonly maxWaitMs: number
  /** Most requests of the tenant waiting on one copy; more get 429 at once. Default 100. */
  readonly maxLength: number
}

export interface BudgetConfig {
  readonly limitMicroUsd: MicroUsd
  readonly mode: "hard" | "soft"
}

/** A key's own budgets (`keys[].budgets`, or a runtime key's), each over a UTC calendar period; all optional. */
export interface KeyBudgets {
  readonly day: BudgetConfig | undefined
  readonly week: BudgetConfig | undefined
  readonly month: BudgetConfig | undefined
}

export interface KeyConfig {
  readonly id: string
  /** Lower-case hex SHA-256 of the secret. */
  readonly sha256: string
  /** Budgets of this key alone, checked beside the tenant's (a request must fit both). */
  readonly budgets: KeyBudgets
}

export interface TenantConfig {
  readonly name: string
  readonly keys: ReadonlyArray<KeyConfig>
  /** `"*"` or the route names this tenant may use. */
  readonly routes: "*" | ReadonlyArray<string>
  readonly limits: {
    readonly requestsPerMinute: number | undefined
    readonly tokensPerMinute: number | undefined
    /** Most requests of the tenant in flight at once on this copy (from its headers to its record). */
    readonly concurrentRequests: number | undefined
    /** `limits.queue`: requests over a limit wait instead of a 429 at once (ADR 0057); undefined: no waiting. */
    readonly queue?: QueueConfig | undefined
  }
  /** `day` (UTC date), `week` (ISO week, Monday start), `month` (UTC calendar month), `session`. */
  readonly budgets: {
    readonly day: BudgetConfig | undefined
    readonly week: BudgetConfig | undefined
    readonly month: BudgetConfig | undefined
    readonly session: BudgetConfig | undefined
  }
}

/** USD per million tokens in the file; micro-USD per million tokens here (so integer math stays exact). */
export interface PriceEntry {
  readonly provider: string | undefined
  readonly model: string
  /** micro-USD per million tokens. */
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
}

/** `telemetry:` (SPEC "Tracing"). */
export interface TelemetryConfig {
  /**
   * OTLP/HTTP collector root without a trailing slash; spans go to `{otlpEndpoint}/v1/traces`.
   * Tracing is off when undefined (the default).
   */
  readonly otlpEndpoint: string | undefined
  /** Default `http/json`. */
  readonly otlpProtocol: "http/json" | "http/protobuf"
  /** The `service.name` resource. Default `tollgate`. */
  readonly serviceName: string
  /** Share of traces kept, 0..1. Default 1. */
  readonly sampleRatio: number
}

/** `usage.database:` — where the fleet's usage records are kept. */
export interface UsageDatabaseConfig {
  /** The env var holding the `postgres://` URL (a secret: env only). Default `TOLLGATE_USAGE_DATABASE_URL`. */
  readonly urlEnv: string
  /** The table, optionally `schema.table`. Default `tollgate_usage`. */
  readonly table: string
}

export interface TollgateConfig {
  /** Absolute path of the config file; relative paths below were resolved against its folder. */
  readonly path: string
  readonly server: ServerConfig
  readonly admin: AdminConfig
  readonly store: StoreConfig
  /** Absolute path of the usage JSONL file. Default `data/usage.jsonl`. */
  readonly usageFile: string
  /** `usage.database` (SPEC Part 3): every record also goes to this PostgreSQL table; undefined: the file alone. */
  readonly usageDatabase: UsageDatabaseConfig | undefined
  /** `usage.backlog_max_bytes` (ADR 0070): the most bytes of records held in memory while the file refuses writes. */
  readonly usageBacklogMaxBytes: number
  /** Absolute path of the runtime keys file of the memory store. Default `keys.jsonl` beside the usage file. */
  readonly keysFile: string
  /** Absolute path of the price table. Default `config/pricing.yaml`. */
  readonly pricingFile: string
  readonly reservation: { readonly outputTokens: number }
  readonly retry: RetryConfig
  readonly breaker: BreakerConfig
  readonly timeouts: TimeoutsConfig
  readonly sessions: {
    readonly derive: boolean
    /** Most live sessions kept per tenant; past it the least recently used is evicted. Default 10,000. */
    readonly maxPerTenant: number
  }
  readonly telemetry: TelemetryConfig
  readonly providers: ReadonlyMap<string, ProviderConfig>
  /** `aliases:` — named targets routes may use by name (resolved into the routes' targets). */
  readonly aliases: ReadonlyMap<string, { readonly provider: string; readonly model: string }>
  readonly routes: ReadonlyMap<string, RouteConfig>
  readonly tenants: ReadonlyMap<string, TenantConfig>
  readonly prices: ReadonlyArray<PriceEntry>
}
