/**
 * The schema of `tollgate.yaml`, one section at a time (SPEC.md "Configuration").
 * YAML keys are snake_case; decoded fields are the camelCase names of `model.ts`
 * (`Schema.encodeKeys` maps them), with durations in ms, money in micro-USD and every
 * default filled in. Decode with `parseOptions` so that unknown keys fail at every level.
 */
import { Effect, Schema } from "effect"
import { DEFAULT_BASE_URL, DEFAULT_CONNECT_MS } from "../domain/providerDefaults.js"
import {
  BaseUrl,
  CollectorUrl,
  discriminated,
  Duration,
  EnvVarName,
  Listen,
  Name,
  NonNegativeNumber,
  PositiveDuration,
  PositiveInt,
  Ratio,
  RedisUrl,
  says,
  Sha256Hex,
  UsdToMicro,
} from "./primitives.js"

/** Parse options for every config decode: report all problems, reject unknown keys. */
export const parseOptions = { errors: "all", onExcessProperty: "error" } as const

/** The message of a value that is not a mapping, on the side that reads the file (snake_case keys). */
const mapping = <S extends Schema.Top>(self: S): S["Rebuild"] =>
  self.pipe(Schema.annotateEncoded({ message: "must be a mapping" }))
const list = (of: string) => ({ message: `must be a list of ${of}` })

/** A key with a default (a decoded value), used when the key is absent. */
const withDefault = <S extends Schema.Top>(schema: S, value: S["Type"]) =>
  schema.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(value)))

/**
 * `server:` — defaults `127.0.0.1:8080`, `30s`, 10,485,760 bytes, a 60 s body
 * deadline, 10,000 connections; `max_buffered_bytes` stays undefined when
 * absent (decode.ts sizes it for the machine).
 */
export const ServerSection = Schema.Struct({
  listen: withDefault(Listen, { host: "127.0.0.1", port: 8080 }),
  shutdownGraceMs: withDefault(Duration, 30_000),
  maxBodyBytes: withDefault(PositiveInt, 10_485_760),
  maxBufferedBytes: Schema.optionalKey(PositiveInt),
  bodyTimeoutMs: withDefault(PositiveDuration, 60_000),
  maxConnections: withDefault(PositiveInt, 10_000),
  maxConcurrentRequests: Schema.optionalKey(PositiveInt),
}).pipe(
  Schema.encodeKeys({
    shutdownGraceMs: "shutdown_grace",
    maxBodyBytes: "max_body_bytes",
    maxBufferedBytes: "max_buffered_bytes",
    bodyTimeoutMs: "body_timeout",
    maxConnections: "max_connections",
    maxConcurrentRequests: "max_concurrent_requests",
  }),
  mapping,
)

/** `admin:` — `token_env` defaults to `TOLLGATE_ADMIN_TOKEN`. */
export const AdminSection = Schema.Struct({
  tokenEnv: withDefault(EnvVarName, "TOLLGATE_ADMIN_TOKEN"),
}).pipe(Schema.encodeKeys({ tokenEnv: "token_env" }), mapping)

/**
 * `store:` — `kind: memory` (default) or `kind: redis` with a required `url`
 * (`cluster` defaults to false, `lease_requests` to 32).
 */
export const StoreSection = discriminated("kind", "store kind", {
  memory: Schema.Struct({ kind: Schema.Literal("memory") }),
  redis: Schema.Struct({
    kind: Schema.Literal("redis"),
    url: RedisUrl,
    cluster: withDefault(says("must be true or false", Schema.Boolean), false),
    leaseRequests: withDefault(PositiveInt, 32),
  }).pipe(Schema.encodeKeys({ leaseRequests: "lease_requests" })),
})

/** `keys:` — `file` stays undefined when absent (decode.ts puts it beside the usage file). */
export const KeysSection = Schema.Struct({ file: Schema.optionalKey(Name) }).annotate({
  message: "must be a mapping",
})

/** A PostgreSQL table name: a lower-case identifier, optionally schema-qualified (`usage.tollgate_usage`). */
export const TableName = says(
  "must be a lower-case SQL identifier (a-z, 0-9, _; at most 63 characters), optionally after a schema name and a dot",
  Schema.String.check(Schema.isPattern(/^([a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}$/)),
)

/** `usage.database:` (SPEC Part 3) — `url_env` defaults to `TOLLGATE_USAGE_DATABASE_URL`, `table` to `tollgate_usage`. */
export const UsageDatabaseSection = Schema.Struct({
  urlEnv: withDefault(EnvVarName, "TOLLGATE_USAGE_DATABASE_URL"),
  table: withDefault(TableName, "tollgate_usage"),
}).pipe(Schema.encodeKeys({ urlEnv: "url_env" }), mapping)

/** `usage.backlog_max_bytes`: at least one record's longest line (64 KiB). */
const BacklogBytes = says(
  "must be an integer of at least 65536 (64 KiB)",
  Schema.Number.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(65_536)),
)

/**
 * `usage:` — `file` stays undefined when absent (decode.ts resolves the
 * default); `database` absent: the file alone; `backlog_max_bytes` (ADR
 * 0070) defaults to 4 MiB.
 */
export const UsageSection = Schema.Struct({
  file: Schema.optionalKey(Name),
  database: Schema.optionalKey(UsageDatabaseSection),
  backlogMaxBytes: withDefault(BacklogBytes, 4 * 1024 * 1024),
}).pipe(Schema.encodeKeys({ backlogMaxBytes: "backlog_max_bytes" }), mapping)

/** `pricing:` — `file` stays undefined when absent (decode.ts resolves the default). */
export const PricingSection = Schema.Struct({ file: Schema.optionalKey(Name) }).annotate({
  message: "must be a mapping",
})

/** `reservation:` — `output_tokens` defaults to 4096. */
export const ReservationSection = Schema.Struct({
  outputTokens: withDefault(PositiveInt, 4096),
}).pipe(Schema.encodeKeys({ outputTokens: "output_tokens" }), mapping)

/** `retry:` — `max_attempts` 3, `budget_ratio` 0.1. */
export const RetrySection = Schema.Struct({
  maxAttempts: withDefault(PositiveInt, 3),
  budgetRatio: withDefault(NonNegativeNumber, 0.1),
}).pipe(Schema.encodeKeys({ maxAttempts: "max_attempts", budgetRatio: "budget_ratio" }), mapping)

/**
 * A route's `retry:` override. `max_attempts` applies to the route; the
 * retry budget is process-wide (ADR 0008), so a route's `budget_ratio` is
 * accepted (SPEC: "per-route override of retry.*") but ignored, with a
 * warning.
 */
export const RetryOverride = Schema.Struct({
  maxAttempts: Schema.optionalKey(PositiveInt),
  budgetRatio: Schema.optionalKey(NonNegativeNumber),
}).pipe(Schema.encodeKeys({ maxAttempts: "max_attempts", budgetRatio: "budget_ratio" }), mapping)

/** `breaker:` — `min_requests` 20, `failure_ratio` 0.5, `open_for` 30s, `shared` false. */
export const BreakerSection = Schema.Struct({
  minRequests: withDefault(PositiveInt, 20),
  failureRatio: withDefault(Ratio, 0.5),
  openForMs: withDefault(PositiveDuration, 30_000),
  shared: withDefault(says("must be true or false", Schema.Boolean), false),
}).pipe(
  Schema.encodeKeys({
    minRequests: "min_requests",
    failureRatio: "failure_ratio",
    openForMs: "open_for",
    shared: "shared",
  }),
  mapping,
)

const timeoutKeys = {
  connectMs: "connect",
  firstTokenMs: "first_token",
  idleMs: "idle",
  totalMs: "total",
} as const

/** `timeouts:` — connect 5s, first_token 60s, idle 60s, total 600s; each > 0. */
export const TimeoutsSection = Schema.Struct({
  connectMs: withDefault(PositiveDuration, DEFAULT_CONNECT_MS),
  firstTokenMs: withDefault(PositiveDuration, 60_000),
  idleMs: withDefault(PositiveDuration, 60_000),
  totalMs: withDefault(PositiveDuration, 600_000),
}).pipe(Schema.encodeKeys(timeoutKeys), mapping)

/** A route's `timeouts:` override: some or all keys of {@link TimeoutsSection}. */
export const TimeoutsOverride = Schema.Struct({
  connectMs: Schema.optionalKey(PositiveDuration),
  firstTokenMs: Schema.optionalKey(PositiveDuration),
  idleMs: Schema.optionalKey(PositiveDuration),
  totalMs: Schema.optionalKey(PositiveDuration),
}).pipe(Schema.encodeKeys(timeoutKeys), mapping)

/** `sessions:` — `derive` defaults to true, `max_per_tenant` to 10,000. */
export const SessionsSection = Schema.Struct({
  derive: withDefault(says("must be true or false", Schema.Boolean), true),
  maxPerTenant: withDefault(PositiveInt, 10_000),
}).pipe(Schema.encodeKeys({ maxPerTenant: "max_per_tenant" }), mapping)

/** A sample ratio: 0 (no trace is kept) to 1 (every trace). */
const SampleRatio = says(
  "must be a number from 0 to 1",
  Schema.Number.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(1)),
)

/**
 * `telemetry:` — tracing is off while `otlp_endpoint` is absent; `otlp_protocol`
 * defaults to `http/json`, `service_name` to `tollgate`, `sample_ratio` to 1.
 */
export const TelemetrySection = Schema.Struct({
  otlpEndpoint: Schema.optionalKey(CollectorUrl),
  otlpProtocol: withDefault(
    says('must be "http/json" or "http/protobuf"', Schema.Literals(["http/json", "http/protobuf"])),
    "http/json",
  ),
  serviceName: withDefault(Name, "tollgate"),
  sampleRatio: withDefault(SampleRatio, 1),
}).pipe(
  Schema.encodeKeys({
    otlpEndpoint: "otlp_endpoint",
    otlpProtocol: "otlp_protocol",
    serviceName: "service_name",
    sampleRatio: "sample_ratio",
  }),
  mapping,
)

const GcpRegion = says(
  "must be a Google Cloud region, e.g. us-east5 or global",
  Schema.String.check(Schema.isPattern(/^[a-z][a-z0-9-]*$/)),
)

const AwsRegion = says(
  "must be an AWS region, e.g. us-east-1",
  Schema.String.check(Schema.isPattern(/^[a-z]{2}(-[a-z0-9]+)+-\d+$/)),
)

const GcpProject = says(
  "must be a Google Cloud project ID",
  Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9.:_-]*$/)),
)

/**
 * One entry of `providers:` (without its name). Every kind takes `base_url` (trailing slash
 * stripped). Vertex's `base_url` stays undefined when absent: its default depends on `region`
 * (`vertexBaseUrl` in src/domain/providerDefaults.ts).
 */
export const Provider = discriminated("kind", "provider kind", {
  anthropic: Schema.Struct({
    kind: Schema.Literal("anthropic"),
    baseUrl: withDefault(BaseUrl, DEFAULT_BASE_URL.anthropic),
    apiKeyEnv: withDefault(EnvVarName, "ANTHROPIC_API_KEY"),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url", apiKeyEnv: "api_key_env" })),
  openai: Schema.Struct({
    kind: Schema.Literal("openai"),
    baseUrl: withDefault(BaseUrl, DEFAULT_BASE_URL.openai),
    apiKeyEnv: withDefault(EnvVarName, "OPENAI_API_KEY"),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url", apiKeyEnv: "api_key_env" })),
  vertex: Schema.Struct({
    kind: Schema.Literal("vertex"),
    project: GcpProject,
    region: GcpRegion,
    baseUrl: Schema.optionalKey(BaseUrl),
    accessTokenEnv: Schema.optionalKey(EnvVarName),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url", accessTokenEnv: "access_token_env" })),
  ollama: Schema.Struct({
    kind: Schema.Literal("ollama"),
    baseUrl: withDefault(BaseUrl, DEFAULT_BASE_URL.ollama),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url" })),
  bedrock: Schema.Struct({
    kind: Schema.Literal("bedrock"),
    region: AwsRegion,
    baseUrl: Schema.optionalKey(BaseUrl),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url" })),
  azure: Schema.Struct({
    kind: Schema.Literal("azure"),
    baseUrl: BaseUrl,
    apiKeyEnv: withDefault(EnvVarName, "AZURE_OPENAI_API_KEY"),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url", apiKeyEnv: "api_key_env" })),
  gemini: Schema.Struct({
    kind: Schema.Literal("gemini"),
    baseUrl: withDefault(BaseUrl, DEFAULT_BASE_URL.gemini),
    apiKeyEnv: withDefault(EnvVarName, "GEMINI_API_KEY"),
  }).pipe(Schema.encodeKeys({ baseUrl: "base_url", apiKeyEnv: "api_key_env" })),
})

/** A target's share of a weighted route's first picks: an integer 0..1,000,000 (0: a fallback only). */
export const Weight = says(
  "must be an integer from 0 to 1000000",
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(1_000_000)),
)

/**
 * One entry of a route's `targets:`: `provider` and `model`, or `alias` (an
 * entry of `aliases:`), optionally with a `weight` (ADR 0073). Which of them
 * must be present is checked by `decode.ts`, where aliases are resolved.
 */
export const Target = Schema.Struct({
  provider: Schema.optionalKey(Name),
  model: Schema.optionalKey(Name),
  alias: Schema.optionalKey(Name),
  weight: Schema.optionalKey(Weight),
}).annotate({
  message: "must be a mapping",
})

/** One entry of `aliases:` (without its name): the target every route naming the alias uses. */
export const Alias = Schema.Struct({ provider: Name, model: Name }).annotate({
  message: "must be a mapping",
})

/** One entry of `routes:` (without its name); the 1..10 target count is checked by `checks.ts`. */
export const Route = Schema.Struct({
  api: says('must be "anthropic" or "openai"', Schema.Literals(["anthropic", "openai"])),
  translate: Schema.optionalKey(says("must be true or false", Schema.Boolean)),
  /** `ordered` (default): targets in order; `weighted`: the first pick by `weight`, then the rest in order. */
  strategy: Schema.optionalKey(
    says('must be "ordered" or "weighted"', Schema.Literals(["ordered", "weighted"])),
  ),
  /** A session's requests go to the target that served its last one while that target is available. */
  sticky: Schema.optionalKey(says("must be true or false", Schema.Boolean)),
  retry: Schema.optionalKey(RetryOverride),
  timeouts: Schema.optionalKey(TimeoutsOverride),
  targets: Schema.Array(Target).annotate(list("targets")),
}).annotate({ message: "must be a mapping" })

/** A `day:`, `week:`, `month:` or `session:` budget; `mode` is required so no spend policy is implicit. */
export const Budget = Schema.Struct({
  limitMicroUsd: UsdToMicro,
  mode: says('must be "hard" or "soft"', Schema.Literals(["hard", "soft"])),
}).pipe(Schema.encodeKeys({ limitMicroUsd: "limit_usd" }), mapping)

/** A key's `budgets:` — `day`, `week`, `month`, each optional (a session belongs to the tenant, not a key). */
export const KeyBudgets = Schema.Struct({
  day: Schema.optionalKey(Budget),
  week: Schema.optionalKey(Budget),
  month: Schema.optionalKey(Budget),
}).annotate({ message: "must be a mapping" })

/** One entry of a tenant's `keys:`. */
export const Key = Schema.Struct({
  id: Name,
  sha256: Sha256Hex,
  budgets: withDefault(KeyBudgets, {}),
}).annotate({ message: "must be a mapping" })

const RouteNames = Schema.Array(Name)

/** A tenant's `routes:` — `"*"` or a list of route names. */
export const TenantRoutes = Schema.Union([Schema.Literal("*"), RouteNames]).annotate({
  message: 'must be "*" or a list of route names',
})

/** The default of `limits.queue.max_length`: the most requests one tenant keeps waiting on one copy. */
export const DEFAULT_QUEUE_LENGTH = 100

/** A tenant's `limits.queue:` — `max_wait` required, `max_length` defaults to 100 (ADR 0057). */
export const Queue = Schema.Struct({
  maxWaitMs: PositiveDuration,
  maxLength: withDefault(PositiveInt, DEFAULT_QUEUE_LENGTH),
}).pipe(Schema.encodeKeys({ maxWaitMs: "max_wait", maxLength: "max_length" }), mapping)

/** One entry of `tenants:` (without its name). `keys` and `routes` are required. */
export const Tenant = Schema.Struct({
  keys: Schema.Array(Key).annotate(list("keys")),
  routes: TenantRoutes,
  limits: withDefault(
    Schema.Struct({
      requestsPerMinute: Schema.optionalKey(PositiveInt),
      tokensPerMinute: Schema.optionalKey(PositiveInt),
      concurrentRequests: Schema.optionalKey(PositiveInt),
      queue: Schema.optionalKey(Queue),
    }).pipe(
      Schema.encodeKeys({
        requestsPerMinute: "requests_per_minute",
        tokensPerMinute: "tokens_per_minute",
        concurrentRequests: "concurrent_requests",
      }),
      mapping,
    ),
    {},
  ),
  budgets: withDefault(
    Schema.Struct({
      day: Schema.optionalKey(Budget),
      week: Schema.optionalKey(Budget),
      month: Schema.optionalKey(Budget),
      session: Schema.optionalKey(Budget),
    }).annotate({
      message: "must be a mapping",
    }),
    {},
  ),
}).annotate({ message: "must be a mapping" })

export type ProviderFile = typeof Provider.Type
export type RouteFile = typeof Route.Type
export type TenantFile = typeof Tenant.Type
export type TargetFile = typeof Target.Type
export type AliasFile = typeof Alias.Type
