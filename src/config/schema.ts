/**
 * The schema of `tollgate.yaml`, one section at a time (SPEC.md "Configuration").
 * YAML keys are snake_case; decoded fields are the camelCase names of `model.ts`,
 * with durations in ms, money in micro-USD and every default filled in.
 * Decode with `parseOptions` so that unknown keys fail at every level.
 */
import { ParseResult, Schema } from "effect"
import {
  BaseUrl,
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
  Sha256Hex,
  UsdToMicro,
} from "./primitives.js"

/** Parse options for every config decode: report all problems, reject unknown keys. */
export const parseOptions = { errors: "all", onExcessProperty: "error" } as const

const mapping = { message: () => "must be a mapping" }
const list = (of: string) => ({ message: () => `must be a list of ${of}` })

/** A key with a default; `fromKey` maps the YAML name onto the decoded field. */
const withDefault = <A, I>(schema: Schema.Schema<A, I>, key: string, value: A) =>
  Schema.optionalWith(schema, { exact: true, default: () => value }).pipe(Schema.fromKey(key))

const optionalKey = <A, I>(schema: Schema.Schema<A, I>, key: string) =>
  Schema.optionalWith(schema, { exact: true }).pipe(Schema.fromKey(key))

/** `server:` — defaults `127.0.0.1:8080`, `30s`, 10,485,760 bytes. */
export const ServerSection = Schema.Struct({
  listen: withDefault(Listen, "listen", { host: "127.0.0.1", port: 8080 }),
  shutdownGraceMs: withDefault(Duration, "shutdown_grace", 30_000),
  maxBodyBytes: withDefault(PositiveInt, "max_body_bytes", 10_485_760),
}).annotations(mapping)

/** `admin:` — `token_env` defaults to `TOLLGATE_ADMIN_TOKEN`. */
export const AdminSection = Schema.Struct({
  tokenEnv: withDefault(EnvVarName, "token_env", "TOLLGATE_ADMIN_TOKEN"),
}).annotations(mapping)

/** `store:` — `kind: memory` (default) or `kind: redis` with a required `url`. */
export const StoreSection = discriminated("kind", "store kind", {
  memory: Schema.Struct({ kind: Schema.Literal("memory") }),
  redis: Schema.Struct({ kind: Schema.Literal("redis"), url: RedisUrl }),
})

/** `usage:` — `file` stays undefined when absent (decode.ts resolves the default). */
export const UsageSection = Schema.Struct({ file: optionalKey(Name, "file") }).annotations(mapping)

/** `pricing:` — `file` stays undefined when absent (decode.ts resolves the default). */
export const PricingSection = Schema.Struct({ file: optionalKey(Name, "file") }).annotations(mapping)

/** `reservation:` — `output_tokens` defaults to 4096. */
export const ReservationSection = Schema.Struct({
  outputTokens: withDefault(PositiveInt, "output_tokens", 4096),
}).annotations(mapping)

/** `retry:` — `max_attempts` 3, `budget_ratio` 0.1. */
export const RetrySection = Schema.Struct({
  maxAttempts: withDefault(PositiveInt, "max_attempts", 3),
  budgetRatio: withDefault(NonNegativeNumber, "budget_ratio", 0.1),
}).annotations(mapping)

/**
 * A route's `retry:` override. `max_attempts` applies to the route; the
 * retry budget is process-wide (ADR 0008), so a route's `budget_ratio` is
 * accepted (SPEC: "per-route override of retry.*") but ignored, with a
 * warning.
 */
export const RetryOverride = Schema.Struct({
  maxAttempts: optionalKey(PositiveInt, "max_attempts"),
  budgetRatio: optionalKey(NonNegativeNumber, "budget_ratio"),
}).annotations(mapping)

/** `breaker:` — `min_requests` 20, `failure_ratio` 0.5, `open_for` 30s. */
export const BreakerSection = Schema.Struct({
  minRequests: withDefault(PositiveInt, "min_requests", 20),
  failureRatio: withDefault(Ratio, "failure_ratio", 0.5),
  openForMs: withDefault(PositiveDuration, "open_for", 30_000),
}).annotations(mapping)

/** `timeouts:` — connect 5s, first_token 60s, idle 60s, total 600s; each > 0. */
export const TimeoutsSection = Schema.Struct({
  connectMs: withDefault(PositiveDuration, "connect", 5_000),
  firstTokenMs: withDefault(PositiveDuration, "first_token", 60_000),
  idleMs: withDefault(PositiveDuration, "idle", 60_000),
  totalMs: withDefault(PositiveDuration, "total", 600_000),
}).annotations(mapping)

/** A route's `timeouts:` override: some or all keys of {@link TimeoutsSection}. */
export const TimeoutsOverride = Schema.Struct({
  connectMs: optionalKey(PositiveDuration, "connect"),
  firstTokenMs: optionalKey(PositiveDuration, "first_token"),
  idleMs: optionalKey(PositiveDuration, "idle"),
  totalMs: optionalKey(PositiveDuration, "total"),
}).annotations(mapping)

/** `sessions:` — `derive` defaults to true. */
export const SessionsSection = Schema.Struct({
  derive: withDefault(Schema.Boolean.annotations({ message: () => "must be true or false" }), "derive", true),
}).annotations(mapping)

const GcpRegion = Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9-]*$/)).annotations({
  message: () => ({ message: "must be a Google Cloud region, e.g. us-east5 or global", override: true }),
})

const GcpProject = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9.:_-]*$/)).annotations({
  message: () => ({ message: "must be a Google Cloud project ID", override: true }),
})

/**
 * One entry of `providers:` (without its name). Every kind takes `base_url` (trailing slash
 * stripped). Vertex's `base_url` stays undefined when absent: its default depends on `region`
 * (see {@link vertexBaseUrl}).
 */
export const Provider = discriminated("kind", "provider kind", {
  anthropic: Schema.Struct({
    kind: Schema.Literal("anthropic"),
    baseUrl: withDefault(BaseUrl, "base_url", "https://api.anthropic.com"),
    apiKeyEnv: withDefault(EnvVarName, "api_key_env", "ANTHROPIC_API_KEY"),
  }),
  openai: Schema.Struct({
    kind: Schema.Literal("openai"),
    baseUrl: withDefault(BaseUrl, "base_url", "https://api.openai.com"),
    apiKeyEnv: withDefault(EnvVarName, "api_key_env", "OPENAI_API_KEY"),
  }),
  vertex: Schema.Struct({
    kind: Schema.Literal("vertex"),
    project: GcpProject,
    region: GcpRegion,
    baseUrl: optionalKey(BaseUrl, "base_url"),
    accessTokenEnv: optionalKey(EnvVarName, "access_token_env"),
  }),
  ollama: Schema.Struct({
    kind: Schema.Literal("ollama"),
    baseUrl: withDefault(BaseUrl, "base_url", "http://localhost:11434"),
  }),
})

/** The default Vertex AI host for a region (`global` has no region prefix). */
export const vertexBaseUrl = (region: string): string =>
  region === "global" ? "https://aiplatform.googleapis.com" : `https://${region}-aiplatform.googleapis.com`

/** One entry of a route's `targets:`. */
export const Target = Schema.Struct({ provider: Name, model: Name }).annotations(mapping)

/** One entry of `routes:` (without its name); the 1..10 target count is checked by `checks.ts`. */
export const Route = Schema.Struct({
  api: Schema.Literal("anthropic", "openai").annotations({
    message: () => ({ message: 'must be "anthropic" or "openai"', override: true }),
  }),
  retry: optionalKey(RetryOverride, "retry"),
  timeouts: optionalKey(TimeoutsOverride, "timeouts"),
  targets: Schema.Array(Target).annotations(list("targets")),
}).annotations(mapping)

/** One entry of a tenant's `keys:`. */
export const Key = Schema.Struct({ id: Name, sha256: Sha256Hex }).annotations(mapping)

/** A `month:` or `session:` budget; `mode` is required so no spend policy is implicit. */
export const Budget = Schema.Struct({
  limitMicroUsd: Schema.propertySignature(UsdToMicro).pipe(Schema.fromKey("limit_usd")),
  mode: Schema.Literal("hard", "soft").annotations({
    message: () => ({ message: 'must be "hard" or "soft"', override: true }),
  }),
}).annotations(mapping)

const RouteNames = Schema.Array(Name)

/** A tenant's `routes:` — `"*"` or a list of route names. */
export const TenantRoutes = Schema.transformOrFail(
  Schema.Unknown,
  Schema.Union(Schema.Literal("*"), RouteNames),
  {
    strict: true,
    decode: (u, options, ast) =>
      u === "*"
        ? ParseResult.succeed("*" as const)
        : Array.isArray(u)
          ? ParseResult.decodeUnknown(RouteNames)(u, options)
          : ParseResult.fail(new ParseResult.Type(ast, u, 'must be "*" or a list of route names')),
    encode: ParseResult.succeed,
  },
)

/** One entry of `tenants:` (without its name). `keys` and `routes` are required. */
export const Tenant = Schema.Struct({
  keys: Schema.Array(Key).annotations(list("keys")),
  routes: TenantRoutes,
  limits: withDefault(
    Schema.Struct({
      requestsPerMinute: optionalKey(PositiveInt, "requests_per_minute"),
      tokensPerMinute: optionalKey(PositiveInt, "tokens_per_minute"),
    }).annotations(mapping),
    "limits",
    {},
  ),
  budgets: withDefault(
    Schema.Struct({
      month: optionalKey(Budget, "month"),
      session: optionalKey(Budget, "session"),
    }).annotations(mapping),
    "budgets",
    {},
  ),
}).annotations(mapping)

export type ProviderFile = Schema.Schema.Type<typeof Provider>
export type RouteFile = Schema.Schema.Type<typeof Route>
export type TenantFile = Schema.Schema.Type<typeof Tenant>
