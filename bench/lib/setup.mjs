// What the bench sends and the Tollgate configs it runs with. Every variant has one tenant with one key
// (the same key everywhere), an Anthropic route and an OpenAI route whose only target is the fake
// upstream, a price table for the fake's models and a usage file of its own in the bench's temp dir.
// The variants differ only where their row says:
//   tollgate                 memory store, no rate limits, no budgets
//   tollgate_limits_memory   memory store; the tenant has requests/tokens per minute limits and a hard
//                            month budget, all far too high to ever refuse (so every request pays for
//                            admission and settling, none is refused)
//   tollgate_limits_redis    the same limits and budget on a Redis store
//   tollgate_limits_redis_shared  tollgate_limits_redis plus `breaker: { shared: true }` (#19): every copy
//                            shares its breakers and the retry budget through the same Redis (one sync
//                            script per target every 0.5 s, none per request)
//   tollgate_fallback        memory store, no limits; plus routes whose first target answers 529 (a second
//                            fake) and whose second target is the normal fake, with the breaker and the
//                            retry budget set so that every request falls back once
//   tollgate_responses       the `tollgate` config, in a process of its own that serves only Responses
//   tollgate_chat            the `tollgate` config, in a process of its own that serves only Chat Completions
//   tollgate_translated      the `tollgate` config plus route `bench-translated` (`api: openai`,
//                            `translate: true`) whose only target is the fake as an anthropic provider, so
//                            Chat Completions requests go out as Anthropic Messages and come back translated
//   tollgate_messages        the `tollgate` config, in a process of its own, sent Anthropic Messages
//   tollgate_bedrock         the `tollgate` config plus route `bench-bedrock` whose only target is the fake
//                            as a `bedrock` provider (SigV4 signed, the stream as event-stream frames)
//   tollgate_gemini          the `tollgate` config plus route `bench-gemini` (`api: anthropic`,
//                            `translate: true`) whose only target is the fake as a `gemini` provider
//   tollgate_unsticky        the `tollgate` config, in a process of its own, sent Anthropic Messages
//   tollgate_sticky          the `tollgate` config plus route `bench-sticky`: bench-claude's target with
//                            `sticky: true` (every request has the same derived session: a store lookup
//                            that finds its target each time)
//   tollgate_unsticky_redis, tollgate_sticky_redis   the same two on a Redis store (no limits)
//   tollgate_traced          the `tollgate` config plus tracing (#18): `telemetry` with `otlp_endpoint` the
//                            bench's OTLP sink (bench/lib/collector.mjs) and `sample_ratio: 1.0`, so every
//                            request makes a trace that is exported
//   tollgate_traced_sampled  the same with `sample_ratio: 0.1` (about one request in ten is traced)
import { createHash } from "node:crypto"
import { writeFile } from "node:fs/promises"
import { join } from "node:path"

/** The client key Tollgate knows by its hash (never a real secret). */
export const CLIENT_KEY = "tg_benchBenchBenchBenchBenchBench00"
/** The env var Tollgate reads the upstream key from, and the key the fake receives. */
export const UPSTREAM_KEY_ENV = "TOLLGATE_BENCH_UPSTREAM_KEY"
export const UPSTREAM_KEY = "bench-upstream-key"

const ROUTES = { anthropic: "bench-claude", openai: "bench-gpt" }
const FALLBACK_ROUTES = { anthropic: "bench-claude-fallback", openai: "bench-gpt-fallback" }
const UPSTREAM_MODELS = { anthropic: "fake-claude", openai: "fake-gpt" }
const PROVIDERS = { anthropic: "fake-anthropic", openai: "fake-openai" }
/** The route of `tollgate_translated`: OpenAI clients, an Anthropic target, translated both ways. */
const TRANSLATED_ROUTE = "bench-translated"
/** The cloud rows' routes: Anthropic clients to a Bedrock target, and (translated) to a Gemini target. */
const CLOUD_ROUTES = { tollgate_bedrock: "bench-bedrock", tollgate_gemini: "bench-gemini" }

/** The AWS credentials the Bedrock row signs with and the fake checks (the fake's defaults). */
export const AWS_ENV = { AWS_ACCESS_KEY_ID: "AKIDFAKE", AWS_SECRET_ACCESS_KEY: "fake-secret" }

/**
 * Limits and budget of the `+limits` variants: high enough that nothing is ever refused. A run sends at
 * most a few thousand requests per second of ≈ 70 reserved tokens each and costs cents per thousand
 * requests, so these are orders of magnitude away.
 */
export const LIMITS = { requestsPerMinute: 100_000_000, tokensPerMinute: 1_000_000_000, monthUsd: 1_000_000 }

/**
 * Breaker and retry budget of the fallback variant: the 529 target fails every attempt, so with the
 * defaults its breaker would open after 20 attempts (and the target would be skipped, not tried) and the
 * retry budget (10 + 0.1 × requests per minute) would run out; then requests would not fall back.
 */
const FALLBACK_RELIABILITY = `retry:
  budget_ratio: 2
breaker:
  min_requests: 1000000000
`

const providers = (name, url) =>
  `  ${name}-anthropic: { kind: anthropic, base_url: "${url}", api_key_env: ${UPSTREAM_KEY_ENV} }
  ${name}-openai: { kind: openai, base_url: "${url}", api_key_env: ${UPSTREAM_KEY_ENV} }
`

/** The variants on the Redis store (the ones that need a `redisUrl`). */
export const REDIS_VARIANTS = [
  "tollgate_limits_redis",
  "tollgate_limits_redis_shared",
  "tollgate_unsticky_redis",
  "tollgate_sticky_redis",
]

/** The sticky rows' route (ADR 0073): bench-claude's one target, `sticky: true`. */
const STICKY_ROUTE = "bench-sticky"
const STICKY_VARIANTS = ["tollgate_sticky", "tollgate_sticky_redis"]

/** The variant that also writes every record to the usage database (`usage.database`, its URL in this variable). */
export const USAGE_DB_VARIANT = "tollgate_usage_db"
export const USAGE_DB_URL_ENV = "BENCH_USAGE_DATABASE_URL"

/** The breakers and retry budget of the fleet in Redis (ADR 0055): the shared-breakers variant's addition. */
const SHARED_BREAKERS = `breaker:
  shared: true
`

/** The sample ratio of each tracing variant (the variants that need a collector). */
export const TRACED_VARIANTS = { tollgate_traced: 1.0, tollgate_traced_sampled: 0.1 }

/**
 * Writes `tollgate-VARIANT.yaml` (and `pricing.yaml`) into `dir`; returns the config path.
 * `variant` is one of the names above; `redisUrl` is for the `tollgate_limits_redis` variants (see
 * REDIS_VARIANTS), `failingUrl` (the fake
 * that answers 529) for `tollgate_fallback`, `collectorUrl` (the OTLP/HTTP sink's root) for the
 * `tollgate_traced` variants.
 */
export const writeTollgateConfig = async (
  dir,
  variant,
  { upstreamUrl, redisUrl, failingUrl, collectorUrl },
) => {
  const sha256 = createHash("sha256").update(CLIENT_KEY).digest("hex")
  const sampleRatio = TRACED_VARIANTS[variant]
  if (sampleRatio !== undefined && collectorUrl === undefined)
    throw new Error(`variant ${variant} needs a collectorUrl`)
  const redis = REDIS_VARIANTS.includes(variant)
  if (redis && redisUrl === undefined) throw new Error(`variant ${variant} needs a redisUrl`)
  const telemetry =
    sampleRatio === undefined
      ? ""
      : `telemetry:
  otlp_endpoint: ${collectorUrl}
  sample_ratio: ${sampleRatio.toFixed(1)}
`
  const limited = variant === "tollgate_limits_memory" || variant.startsWith("tollgate_limits_redis")
  const stickyRoute = STICKY_VARIANTS.includes(variant)
    ? `  ${STICKY_ROUTE}:
    api: anthropic
    sticky: true
    targets:
      - { provider: ${PROVIDERS.anthropic}, model: ${UPSTREAM_MODELS.anthropic} }
`
    : ""
  const shared = variant === "tollgate_limits_redis_shared"
  const fallback = variant === "tollgate_fallback"
  const translatedRoute =
    variant === "tollgate_translated"
      ? `  ${TRANSLATED_ROUTE}:
    api: openai
    translate: true
    targets:
      - { provider: ${PROVIDERS.anthropic}, model: ${UPSTREAM_MODELS.anthropic} }
`
      : ""
  const cloudRoute =
    variant === "tollgate_bedrock"
      ? `  ${CLOUD_ROUTES.tollgate_bedrock}:
    api: anthropic
    targets:
      - { provider: fake-bedrock, model: ${UPSTREAM_MODELS.anthropic} }
`
      : variant === "tollgate_gemini"
        ? `  ${CLOUD_ROUTES.tollgate_gemini}:
    api: anthropic
    translate: true
    targets:
      - { provider: fake-gemini, model: fake-gemini }
`
        : ""
  const cloudProviders =
    variant === "tollgate_bedrock"
      ? `  fake-bedrock: { kind: bedrock, region: us-east-1, base_url: "${upstreamUrl}" }
`
      : variant === "tollgate_gemini"
        ? `  fake-gemini: { kind: gemini, base_url: "${upstreamUrl}", api_key_env: ${UPSTREAM_KEY_ENV} }
`
        : ""
  const store = redis ? `  kind: redis\n  url: ${redisUrl}\n` : "  kind: memory\n"
  const fallbackRoutes = fallback
    ? ["anthropic", "openai"]
        .map(
          (api) => `  ${FALLBACK_ROUTES[api]}:
    api: ${api}
    targets:
      - { provider: failing-${api}, model: ${UPSTREAM_MODELS[api]} }
      - { provider: ${PROVIDERS[api]}, model: ${UPSTREAM_MODELS[api]} }
`,
        )
        .join("")
    : ""
  const tenantLimits = limited
    ? `    limits: { requests_per_minute: ${LIMITS.requestsPerMinute}, tokens_per_minute: ${LIMITS.tokensPerMinute} }
    budgets:
      month: { limit_usd: ${LIMITS.monthUsd}, mode: hard }
`
    : ""
  const config = `server:
  listen: 127.0.0.1:0
  shutdown_grace: 1s
store:
${store}usage:
  file: usage-${variant}.jsonl
${variant === USAGE_DB_VARIANT ? `  database: { url_env: ${USAGE_DB_URL_ENV} }\n` : ""}pricing:
  file: pricing.yaml
${fallback ? FALLBACK_RELIABILITY : ""}${shared ? SHARED_BREAKERS : ""}${telemetry}providers:
${providers("fake", upstreamUrl)}${cloudProviders}${fallback ? providers("failing", failingUrl) : ""}routes:
  ${ROUTES.anthropic}:
    api: anthropic
    targets:
      - { provider: ${PROVIDERS.anthropic}, model: ${UPSTREAM_MODELS.anthropic} }
  ${ROUTES.openai}:
    api: openai
    targets:
      - { provider: ${PROVIDERS.openai}, model: ${UPSTREAM_MODELS.openai} }
${fallbackRoutes}${translatedRoute}${cloudRoute}${stickyRoute}tenants:
  bench:
    keys:
      - { id: bench, sha256: ${sha256} }
    routes: "*"
${tenantLimits}`
  const pricing = `prices:
  - { model: ${UPSTREAM_MODELS.anthropic}, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }
  - { model: ${UPSTREAM_MODELS.openai}, input: 2.5, output: 10, cache_read: 1.25, cache_write: 0 }
  - { model: fake-gemini, input: 0.3, output: 2.5, cache_read: 0.03, cache_write: 0 }
`
  const path = join(dir, `tollgate-${variant}.yaml`)
  await writeFile(path, config)
  await writeFile(join(dir, "pricing.yaml"), pricing)
  return path
}

const PROMPT = "You are a benchmark. Reply with a few words about gateways, latency and throughput."

/**
 * The request one load generator sends: path, headers, body, `expect`: what a complete response
 * contains (a JSON body: its usage; a stream: its last event), and `expectHeaders`: response headers
 * that must be present (`true`) or have an exact value, or the response does not count.
 * `api` is "anthropic" or "openai"; `target` is the row: direct and plain_proxy send the upstream model
 * name and key; the tollgate rows send a route name and the Tollgate key (tollgate_fallback: the fallback
 * route, and each response must show it took 2 attempts and was served by the normal fake; the +limits
 * rows: each response must carry the `ratelimit-limit` header, so the limits were applied; the tracing
 * rows send and expect what `tollgate` does). `stream`
 * requests ask for `streamTokens` output tokens; the fake runs with scenario `max-tokens`, so that is
 * exactly the number of delta events.
 */
export const requestFor = ({ api, target, stream, jsonTokens, streamTokens }) => {
  if (PATH_ROWS[target] !== undefined) return pathRequestFor({ target, stream, jsonTokens, streamTokens })
  const tollgate = target.startsWith("tollgate")
  const key = tollgate ? CLIENT_KEY : UPSTREAM_KEY
  const model = !tollgate
    ? UPSTREAM_MODELS[api]
    : target === "tollgate_fallback"
      ? FALLBACK_ROUTES[api]
      : ROUTES[api]
  const expectHeaders =
    target === "tollgate_fallback"
      ? { "x-tollgate-attempts": "2", "x-tollgate-provider": PROVIDERS[api] }
      : target.startsWith("tollgate_limits")
        ? { "ratelimit-limit": true }
        : {}
  const request = { key, model, stream, maxTokens: stream ? streamTokens : jsonTokens, expectHeaders }
  return api === "anthropic" ? messagesRequest(request) : chatRequest(request)
}

/** The prompt body of Anthropic Messages and Chat Completions (the same fields in both). */
const promptBody = (model, maxTokens, stream) =>
  JSON.stringify({
    model,
    max_tokens: maxTokens,
    messages: [{ role: "user", content: PROMPT }],
    ...(stream ? { stream: true } : {}),
  })

/** A `POST /v1/messages`; `validate`: each whole body is checked (the API-path rows). */
const messagesRequest = ({ key, model, stream, maxTokens, expectHeaders = {}, validate = false }) => ({
  path: "/v1/messages",
  headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": key },
  body: promptBody(model, maxTokens, stream),
  stream,
  expect: stream ? "message_stop" : '"output_tokens"',
  expectHeaders,
  ...(validate ? { validate: stream ? "message-stream" : "message" } : {}),
})

/** A `POST /v1/chat/completions`; `validate` as for {@link messagesRequest}. */
const chatRequest = ({ key, model, stream, maxTokens, expectHeaders = {}, validate = false }) => ({
  path: "/v1/chat/completions",
  headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
  body: promptBody(model, maxTokens, stream),
  stream,
  expect: stream ? "[DONE]" : '"completion_tokens"',
  expectHeaders,
  ...(validate ? { validate: stream ? "chat-completion-stream" : "chat-completion" } : {}),
})

/**
 * The rows of the API-path phase: the endpoint each sends to and, for the Tollgate rows, the route it
 * names (the plain-proxy rows send the fake's OpenAI model name and the upstream key, through the same
 * plain proxy as the main table's row).
 */
export const PATH_ROWS = {
  plain_proxy_responses: { endpoint: "responses" },
  tollgate_responses: { endpoint: "responses", route: ROUTES.openai },
  plain_proxy_chat: { endpoint: "chat" },
  tollgate_chat: { endpoint: "chat", route: ROUTES.openai },
  tollgate_translated: { endpoint: "chat", route: TRANSLATED_ROUTE },
  tollgate_messages: { endpoint: "messages", route: ROUTES.anthropic },
  tollgate_bedrock: { endpoint: "messages", route: CLOUD_ROUTES.tollgate_bedrock },
  tollgate_gemini: { endpoint: "messages", route: CLOUD_ROUTES.tollgate_gemini },
  tollgate_unsticky: { endpoint: "messages", route: ROUTES.anthropic },
  tollgate_sticky: { endpoint: "messages", route: STICKY_ROUTE },
  tollgate_unsticky_redis: { endpoint: "messages", route: ROUTES.anthropic },
  tollgate_sticky_redis: { endpoint: "messages", route: STICKY_ROUTE },
}

/**
 * The request of an API-path row (see `requestFor`): `POST /v1/responses` (`input`, `max_output_tokens`)
 * or `POST /v1/chat/completions`, both with `validate` set, so the load generator checks every whole body
 * (bench/lib/validate.mjs). A Responses stream ends with `response.incomplete` (the fake's `max-tokens`
 * scenario stops at the output limit), whose usage ends the stream; a Chat Completions stream ends with
 * `[DONE]`.
 */
const pathRequestFor = ({ target, stream, jsonTokens, streamTokens }) => {
  const { endpoint, route } = PATH_ROWS[target]
  const key = route === undefined ? UPSTREAM_KEY : CLIENT_KEY
  const model = route ?? UPSTREAM_MODELS.openai
  const maxTokens = stream ? streamTokens : jsonTokens
  if (endpoint === "messages") return messagesRequest({ key, model, stream, maxTokens, validate: true })
  if (endpoint === "responses") {
    return {
      path: "/v1/responses",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, input: PROMPT, max_output_tokens: maxTokens, stream }),
      stream,
      expect: stream ? '"total_tokens"' : '"output_tokens"',
      expectHeaders: {},
      validate: stream ? "response-stream" : "response",
    }
  }
  return chatRequest({ key, model, stream, maxTokens, validate: true })
}

/** A response header problem against `expectHeaders` (`headers` as undici gives them), or undefined. */
export const headerProblem = (expectHeaders, headers) => {
  for (const [name, want] of Object.entries(expectHeaders ?? {})) {
    const got = headers[name]
    if (got === undefined) return `missing-header:${name}`
    if (want !== true && got !== want) return `unexpected-header:${name}=${got}`
  }
  return undefined
}
