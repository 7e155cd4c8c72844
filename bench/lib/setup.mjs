// What the bench sends and the Tollgate config it runs with: one tenant with one key, an Anthropic route
// and an OpenAI route whose only target is the fake upstream, a price table for the fake's models, a
// memory store and a usage file in the bench's temp dir. No rate limits, no budgets.
import { createHash } from "node:crypto"
import { writeFile } from "node:fs/promises"
import { join } from "node:path"

/** The client key Tollgate knows by its hash (never a real secret). */
export const CLIENT_KEY = "tg_benchBenchBenchBenchBenchBench00"
/** The env var Tollgate reads the upstream key from, and the key the fake receives. */
export const UPSTREAM_KEY_ENV = "TOLLGATE_BENCH_UPSTREAM_KEY"
export const UPSTREAM_KEY = "bench-upstream-key"

const ROUTES = { anthropic: "bench-claude", openai: "bench-gpt" }
const UPSTREAM_MODELS = { anthropic: "fake-claude", openai: "fake-gpt" }

/** Writes `tollgate.yaml` and `pricing.yaml` into `dir` for a fake upstream at `upstreamUrl`; returns the config path. */
export const writeTollgateConfig = async (dir, upstreamUrl) => {
  const sha256 = createHash("sha256").update(CLIENT_KEY).digest("hex")
  const config = `server:
  listen: 127.0.0.1:0
  shutdown_grace: 1s
store:
  kind: memory
usage:
  file: usage.jsonl
pricing:
  file: pricing.yaml
providers:
  fake-anthropic: { kind: anthropic, base_url: "${upstreamUrl}", api_key_env: ${UPSTREAM_KEY_ENV} }
  fake-openai: { kind: openai, base_url: "${upstreamUrl}", api_key_env: ${UPSTREAM_KEY_ENV} }
routes:
  ${ROUTES.anthropic}:
    api: anthropic
    targets:
      - { provider: fake-anthropic, model: ${UPSTREAM_MODELS.anthropic} }
  ${ROUTES.openai}:
    api: openai
    targets:
      - { provider: fake-openai, model: ${UPSTREAM_MODELS.openai} }
tenants:
  bench:
    keys:
      - { id: bench, sha256: ${sha256} }
    routes: "*"
`
  const pricing = `prices:
  - { model: ${UPSTREAM_MODELS.anthropic}, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }
  - { model: ${UPSTREAM_MODELS.openai}, input: 2.5, output: 10, cache_read: 1.25, cache_write: 0 }
`
  const path = join(dir, "tollgate.yaml")
  await writeFile(path, config)
  await writeFile(join(dir, "pricing.yaml"), pricing)
  return path
}

const PROMPT = "You are a benchmark. Reply with a few words about gateways, latency and throughput."

/**
 * The request one load generator sends: path, headers, body, and `expect`: what a complete response
 * contains (a JSON body: its usage; a stream: its last event).
 * `api` is "anthropic" or "openai"; `via` is "tollgate" (route name, Tollgate key) or anything else
 * (upstream model name, upstream key). `stream` requests ask for `streamTokens` output tokens; the fake
 * runs with scenario `max-tokens`, so that is exactly the number of delta events.
 */
export const requestFor = ({ api, via, stream, jsonTokens, streamTokens }) => {
  const tollgate = via === "tollgate"
  const key = tollgate ? CLIENT_KEY : UPSTREAM_KEY
  const model = tollgate ? ROUTES[api] : UPSTREAM_MODELS[api]
  const body = {
    model,
    max_tokens: stream ? streamTokens : jsonTokens,
    messages: [{ role: "user", content: PROMPT }],
    ...(stream ? { stream: true } : {}),
  }
  if (api === "anthropic") {
    return {
      path: "/v1/messages",
      headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": key },
      body: JSON.stringify(body),
      stream,
      expect: stream ? "message_stop" : '"output_tokens"',
    }
  }
  return {
    path: "/v1/chat/completions",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
    stream,
    expect: stream ? "[DONE]" : '"completion_tokens"',
  }
}
