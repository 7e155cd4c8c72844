import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { join } from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { startRedis, type RedisHandle } from "../support/redis.js"
import { harnessForSuite, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * The OpenAI Responses and embeddings APIs, model lookup and unknown paths,
 * through Tollgate to the fake provider with the official SDKs; the failure
 * table on Responses streams (memory and Redis); previous_response_id.
 */

// "Hello, Tollgate! How are you?" → 8 fake input tokens
const PROMPT = "Hello, Tollgate! How are you?"
const FAKE_INPUT_TOKENS = 8
const expectedText = (n: number) => Array.from({ length: n }, (_, i) => `tok${i} `).join("")
// gpt-5-mini: 0.25 USD / M input, 2 / M output
const gptCost = (input: number, output: number) =>
  Math.ceil((input * 250_000 + output * 2_000_000) / 1_000_000)

describe("Responses, embeddings and model lookup with the official SDKs", () => {
  const h = harnessForSuite()
  beforeEach(() => h.fakes[0]!.reset())
  const openai = () => new OpenAI({ apiKey: h.key, baseURL: `${h.url}/v1`, maxRetries: 0 })
  const lastRecord = () => h.records().at(-1)!

  it("responses.create (JSON) returns the fake's text and records exact usage at /v1/responses", async () => {
    const { data, response } = await openai()
      .responses.create({ model: "gpt", input: PROMPT, max_output_tokens: 9 })
      .withResponse()
    expect(data.output_text).toBe(expectedText(9))
    expect(data.usage?.input_tokens).toBe(FAKE_INPUT_TOKENS)
    expect(response.headers.get("x-tollgate-provider")).toBe("openai")
    expect(lastRecord()).toMatchObject({
      endpoint: "/v1/responses",
      upstream_endpoint: "/v1/responses",
      stream: false,
      status: 200,
      input_tokens: FAKE_INPUT_TOKENS,
      output_tokens: 9,
      cost_micro_usd: gptCost(FAKE_INPUT_TOKENS, 9),
      usage_estimated: false,
      error: null,
    })
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.path).toBe("/v1/responses")
    expect(upstream.body).toEqual({ model: "gpt-5-mini", input: PROMPT, max_output_tokens: 9 })
  })

  it("responses.create (stream) relays every event and meters response.completed", async () => {
    const stream = await openai().responses.create({
      model: "gpt",
      input: PROMPT,
      max_output_tokens: 20,
      stream: true,
    })
    let text = ""
    const types: Array<string> = []
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "response.output_text.delta") text += event.delta
    }
    expect(text).toBe(expectedText(16))
    expect(types[0]).toBe("response.created")
    expect(types.at(-1)).toBe("response.completed")
    expect(lastRecord()).toMatchObject({
      endpoint: "/v1/responses",
      stream: true,
      input_tokens: FAKE_INPUT_TOKENS,
      output_tokens: 16,
      cost_micro_usd: gptCost(FAKE_INPUT_TOKENS, 16),
      incomplete: false,
      error: null,
    })
    // No stream_options for the Responses API (it has no include_usage).
    expect(h.fakes[0]!.requests().recent.at(-1)!.body).not.toHaveProperty("stream_options")
  })

  it("the responses.stream() helper gets its final response", async () => {
    const final = await openai()
      .responses.stream({ model: "gpt", input: PROMPT, max_output_tokens: 5 })
      .finalResponse()
    expect(final.output_text).toBe(expectedText(5))
    expect(final.status).toBe("incomplete")
    expect(lastRecord()).toMatchObject({ output_tokens: 5, endpoint: "/v1/responses" })
  })

  it("embeddings.create (base64, the SDK's default) is priced at the input price with no output", async () => {
    const result = await openai().embeddings.create({ model: "gpt", input: ["Hello, world!", "a b"] })
    expect(result.data).toHaveLength(2)
    expect(result.data[0]!.embedding.length).toBe(8)
    expect(result.usage.prompt_tokens).toBe(6)
    expect(lastRecord()).toMatchObject({
      endpoint: "/v1/embeddings",
      upstream_endpoint: "/v1/embeddings",
      input_tokens: 6,
      output_tokens: 0,
      cost_micro_usd: gptCost(6, 0),
      usage_estimated: false,
    })
  })

  it("models.retrieve answers one route in each SDK's format; an unknown one is 404", async () => {
    const model = await openai().models.retrieve("gpt")
    expect(model).toMatchObject({ id: "gpt", object: "model" })
    const anthropic = new Anthropic({ apiKey: h.key, baseURL: h.url, maxRetries: 0 })
    const info = await anthropic.models.retrieve("claude")
    expect(info).toMatchObject({ id: "claude", type: "model" })
    await expect(openai().models.retrieve("nope")).rejects.toMatchObject({ status: 404 })
    await expect(anthropic.models.retrieve("nope")).rejects.toMatchObject({
      status: 404,
      error: { type: "error", error: { type: "not_found_error" } },
    })
  })

  it("an unknown path is 404 not_found_error in its API's format, without model_not_found", async () => {
    const openaiPath = await fetch(`${h.url}/v1/nope`, { method: "POST", body: "{}" })
    expect(openaiPath.status).toBe(404)
    const body = (await openaiPath.json()) as { error: { type: string; code: unknown } }
    expect(body.error.type).toBe("not_found_error")
    expect(body.error.code).toBeNull()
    const anthropicPath = await fetch(`${h.url}/v1/messages/batches`, { method: "GET" })
    expect(anthropicPath.status).toBe(404)
    expect(await anthropicPath.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } })
  })

  it("a Responses request to an anthropic route is a 400 naming the endpoints", async () => {
    await expect(openai().responses.create({ model: "claude", input: PROMPT })).rejects.toMatchObject({
      status: 400,
    })
  })
})

/** Route `main` (api openai): fake A first, fake B second, both openai-kind providers. */
const startPair = (a: string, b = "ok", store?: string): Promise<Harness> =>
  startHarness({
    fakes: [
      { name: "A", scenario: a },
      { name: "B", scenario: b },
    ],
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      ...(store === undefined ? {} : { store: { kind: "redis", url: store } }),
      timeouts: { first_token: "400ms", idle: "400ms" },
      providers: {
        a: { kind: "openai", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        b: { kind: "openai", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
      },
      routes: {
        main: {
          api: "openai",
          targets: [
            { provider: "a", model: "gpt-5-mini" },
            { provider: "b", model: "gpt-5-mini" },
          ],
        },
      },
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
    }),
  })

const sendResponses = async (h: Harness, stream: boolean) => {
  const response = await fetch(`${h.url}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "main", input: "hello there", max_output_tokens: 6, stream }),
  })
  return { response, text: await response.text() }
}

const ERROR_EVENT = /event: error\ndata: \{"type":"error","code":"api_error","message":/

for (const storeKind of ["memory", "redis"] as const) {
  describe(`failure scenarios on Responses streams (${storeKind} store)`, () => {
    let redis: RedisHandle | undefined
    beforeAll(async () => {
      if (storeKind === "redis") redis = await startRedis()
    })
    afterAll(async () => {
      await redis?.stop()
    })
    const start = (a: string, b?: string) => startPair(a, b, redis?.url)

    it("status 529 and an in-band failure before the first output fall back to the next target", async () => {
      for (const scenario of ["status:529", "inband-error:rate_limit_exceeded"]) {
        const h = await start(scenario)
        try {
          const { response, text } = await sendResponses(h, true)
          expect(response.status).toBe(200)
          expect(response.headers.get("x-tollgate-provider")).toBe("b")
          expect(response.headers.get("x-tollgate-attempts")).toBe("2")
          expect(text).not.toContain("response.failed")
          // max_output_tokens 6 is reached: the answer ends complete, as `incomplete`.
          expect(text).toContain("event: response.incomplete")
        } finally {
          await h.close()
        }
      }
    })

    it("hang, reset and malformed after the first byte end with the Responses error event, no fallback", async () => {
      for (const [scenario, error] of [
        ["hang-after:2-tokens", /^idle_timeout$/],
        ["reset-after:2-tokens", /^connection_failed/],
        ["malformed-after:2-tokens", /^malformed$/],
      ] as const) {
        const h = await start(scenario)
        try {
          const { response, text } = await sendResponses(h, true)
          expect(response.status).toBe(200)
          expect(text).toContain("tok1 ")
          expect(text).toMatch(ERROR_EVENT)
          expect(text).not.toMatch(/response\.(completed|incomplete)/)
          expect(h.fakes[1]!.requests().count).toBe(0)
          const record = h.records().at(-1)!
          expect(record.incomplete).toBe(true)
          expect(record.error).toMatch(error)
          expect(record.endpoint).toBe("/v1/responses")
        } finally {
          await h.close()
        }
      }
    })

    it("a hard budget cuts a Responses stream off with a budget_exceeded error event", async () => {
      const h = await startHarness({
        fakes: [{ name: "A" }],
        config: (urls, keyHash, dir) => ({
          server: { listen: "127.0.0.1:0" },
          usage: { file: join(dir, "usage.jsonl") },
          ...(redis === undefined ? {} : { store: { kind: "redis", url: redis.url } }),
          reservation: { output_tokens: 10 },
          providers: { a: { kind: "openai", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
          routes: { main: { api: "openai", targets: [{ provider: "a", model: "gpt-5-mini" }] } },
          tenants: {
            [`cut-${storeKind}`]: {
              keys: [{ id: "ci", sha256: keyHash }],
              routes: "*",
              budgets: { month: { limit_usd: 0.003, mode: "hard" } },
            },
          },
        }),
      })
      try {
        const response = await fetch(`${h.url}/v1/responses`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${h.key}`,
            "content-type": "application/json",
            "x-fake-scenario": "max-tokens",
          },
          body: JSON.stringify({ model: "main", input: "hello", max_output_tokens: 5000, stream: true }),
        })
        const text = await response.text()
        expect(response.status).toBe(200)
        expect(text).toContain('event: error\ndata: {"type":"error","code":"budget_exceeded"')
        expect(text).not.toMatch(/response\.(completed|incomplete)/)
        const record = h.records().at(-1)!
        expect(record).toMatchObject({
          incomplete: true,
          error: "budget_exceeded",
          endpoint: "/v1/responses",
        })
        expect(record.output_tokens).toBeLessThan(5000)
        // Approximate: the overshoot is bounded by one extension block and the tokens in flight.
        expect(record.cost_micro_usd).toBeLessThan(3_000 + 1_000)
      } finally {
        await h.close()
      }
    })

    it("an answer without usage is charged on the estimate, JSON and stream", async () => {
      const h = await start("no-usage")
      try {
        for (const stream of [false, true]) {
          const { response } = await sendResponses(h, stream)
          expect(response.status).toBe(200)
          const record = h.records().at(-1)!
          expect(record.usage_estimated).toBe(true)
          expect(record.input_tokens).toBeGreaterThan(0)
          expect(record.cost_micro_usd).toBeGreaterThan(0)
        }
      } finally {
        await h.close()
      }
    })

    it("previous_response_id goes only to the provider that made the response; another tenant's id is refused", async () => {
      const other = generateKey()
      const h = await startHarness({
        fakes: [{ name: "A" }, { name: "B" }],
        config: (urls, keyHash, dir) => ({
          server: { listen: "127.0.0.1:0" },
          usage: { file: join(dir, "usage.jsonl") },
          ...(redis === undefined ? {} : { store: { kind: "redis", url: redis.url } }),
          providers: {
            a: { kind: "openai", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
            b: { kind: "openai", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
          },
          routes: {
            "only-b": { api: "openai", targets: [{ provider: "b", model: "gpt-5-mini" }] },
            "only-a": { api: "openai", targets: [{ provider: "a", model: "gpt-5-mini" }] },
            both: {
              api: "openai",
              targets: [
                { provider: "a", model: "gpt-5-mini" },
                { provider: "b", model: "gpt-5-mini" },
              ],
            },
          },
          tenants: {
            acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" },
            rival: { keys: [{ id: "r", sha256: hashKey(other) }], routes: "*" },
          },
        }),
      })
      try {
        const client = new OpenAI({ apiKey: h.key, baseURL: `${h.url}/v1`, maxRetries: 0 })
        // A streamed first turn: its id is remembered from response.created.
        const first = await client.responses
          .stream({ model: "only-b", input: "hi", max_output_tokens: 3 })
          .finalResponse()
        const next = await client.responses
          .create({ model: "both", input: "again", previous_response_id: first.id, max_output_tokens: 3 })
          .withResponse()
        expect(next.response.headers.get("x-tollgate-provider")).toBe("b")
        expect(h.fakes[0]!.requests().count).toBe(0)
        expect(h.fakes[1]!.requests().recent.at(-1)!.body).toMatchObject({ previous_response_id: first.id })
        // A JSON turn is remembered too.
        const json = await client.responses.create({ model: "only-a", input: "hi", max_output_tokens: 3 })
        const toA = await client.responses
          .create({ model: "both", input: "x", previous_response_id: json.id, max_output_tokens: 3 })
          .withResponse()
        expect(toA.response.headers.get("x-tollgate-provider")).toBe("a")
        await expect(
          client.responses.create({ model: "only-a", input: "x", previous_response_id: first.id }),
        ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("previous_response_id") })
        const rival = new OpenAI({ apiKey: other, baseURL: `${h.url}/v1`, maxRetries: 0 })
        const before = h.fakes[1]!.requests().count
        await expect(
          rival.responses.create({ model: "both", input: "x", previous_response_id: first.id }),
        ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("previous_response_id") })
        expect(h.fakes[1]!.requests().count).toBe(before)
        // An id Tollgate never saw is routed as usual.
        const unknown = await client.responses
          .create({ model: "both", input: "x", previous_response_id: "resp_unknown", max_output_tokens: 3 })
          .withResponse()
        expect(unknown.response.headers.get("x-tollgate-provider")).toBe("a")
      } finally {
        await h.close()
      }
    })
  })
}
