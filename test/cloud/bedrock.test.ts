import Anthropic from "@anthropic-ai/sdk"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * Claude on Amazon Bedrock through Tollgate (issue #34), against the fake
 * provider's Bedrock endpoints, which check the SigV4 signature with the
 * credentials of this process's environment (the gateway's default chain
 * reads the same).
 */

process.env["AWS_ACCESS_KEY_ID"] = "AKIDFAKE"
process.env["AWS_SECRET_ACCESS_KEY"] = "fake-secret"
delete process.env["AWS_SESSION_TOKEN"]
delete process.env["AWS_PROFILE"]

const BEDROCK_MODEL = "us.anthropic.claude-sonnet-5-5-20261001-v1:0"
const PRICES = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10 },
    {
      provider: "bedrock",
      model: BEDROCK_MODEL,
      input: 3.3,
      output: 16.5,
      cache_read: 0.33,
      cache_write: 4.125,
    },
  ],
}

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

interface Options {
  readonly anthropic?: string
  readonly bedrock?: string
  readonly targets: ReadonlyArray<"anthropic" | "bedrock">
  readonly budgetUsd?: number
  readonly timeouts?: Record<string, unknown>
}

const start = (options: Options) =>
  startHarness({
    fakes: [
      { name: "anthropic", scenario: options.anthropic ?? "ok" },
      { name: "bedrock", scenario: options.bedrock ?? "ok" },
    ],
    prices: PRICES,
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      ...(options.timeouts === undefined ? {} : { timeouts: options.timeouts }),
      // A budget test reserves 10 output tokens a request, so the stream passes its reservation early.
      ...(options.budgetUsd === undefined ? {} : { reservation: { output_tokens: 10 } }),
      providers: {
        anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        bedrock: { kind: "bedrock", region: "us-east-1", base_url: urls[1] },
      },
      routes: {
        claude: {
          api: "anthropic",
          targets: options.targets.map((t) =>
            t === "bedrock"
              ? { provider: "bedrock", model: BEDROCK_MODEL }
              : { provider: "anthropic", model: "claude-sonnet-5-5" },
          ),
        },
      },
      tenants: {
        acme: {
          keys: [{ id: "ci", sha256: keyHash }],
          routes: "*",
          budgets: { month: { limit_usd: options.budgetUsd ?? 10, mode: "hard" } },
        },
      },
    }),
  })

const client = (harness: Harness) =>
  new Anthropic({ apiKey: harness.key, baseURL: harness.url, maxRetries: 0 })

const bedrockRequests = (harness: Harness) => harness.fakes[1]!.requests()

const WEATHER_TOOL = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: {
    type: "object" as const,
    properties: { city: { type: "string" } },
    required: ["city"],
  },
}

describe("Bedrock targets", () => {
  it("sends the InvokeModel path, a body without model and with anthropic_version, signed with SigV4", async () => {
    h = await start({ targets: ["bedrock"] })
    const message = await client(h).messages.create({
      model: "claude",
      max_tokens: 5,
      messages: [{ role: "user", content: "hello bedrock" }],
    })
    expect(message.usage.output_tokens).toBe(5)
    expect(message.content[0]).toMatchObject({ type: "text" })
    const upstream = bedrockRequests(h).recent.at(-1)!
    expect(upstream.path).toBe(`/model/${encodeURIComponent(BEDROCK_MODEL)}/invoke`)
    expect(upstream.headers["authorization"]).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDFAKE\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
    )
    expect(upstream.headers["x-api-key"]).toBeUndefined()
    const body = upstream.body as Record<string, unknown>
    expect(body["model"]).toBeUndefined()
    expect(body["stream"]).toBeUndefined()
    expect(body["anthropic_version"]).toBe("bedrock-2023-05-31")
    expect(body["max_tokens"]).toBe(5)
  })

  it("a stream is relayed as Anthropic SSE, and the record prices the fake's usage at the Bedrock price", async () => {
    h = await start({ targets: ["bedrock"] })
    const stream = client(h).messages.stream({
      model: "claude",
      max_tokens: 12,
      messages: [{ role: "user", content: "price this stream, please" }],
    })
    const texts: Array<string> = []
    stream.on("text", (t) => texts.push(t))
    const message = await stream.finalMessage()
    expect(texts.length).toBeGreaterThan(1)
    expect(bedrockRequests(h).recent.at(-1)!.path).toBe(
      `/model/${encodeURIComponent(BEDROCK_MODEL)}/invoke-with-response-stream`,
    )
    await eventually(() => h!.records().length === 1)
    const record = h.records().at(-1)!
    expect(record).toMatchObject({
      provider: "bedrock",
      model: BEDROCK_MODEL,
      stream: true,
      incomplete: false,
    })
    expect(record.usage_estimated).toBe(false)
    expect(record.input_tokens).toBe(message.usage.input_tokens)
    expect(record.output_tokens).toBe(12)
    // 3.3 and 16.5 USD per million tokens.
    expect(record.cost_micro_usd).toBe(
      Math.ceil((record.input_tokens * 3_300_000 + 12 * 16_500_000) / 1_000_000),
    )
  })

  it("a tool loop works through Bedrock, JSON and stream", async () => {
    h = await start({ targets: ["bedrock"] })
    const anthropic = client(h)
    const first = await anthropic.messages.create({
      model: "claude",
      max_tokens: 50,
      tools: [WEATHER_TOOL],
      messages: [{ role: "user", content: "weather in Paris?" }],
    })
    expect(first.stop_reason).toBe("tool_use")
    const call = first.content.find((b) => b.type === "tool_use")!
    expect(call).toMatchObject({ type: "tool_use", name: "get_weather" })
    const followUp = await anthropic.messages
      .stream({
        model: "claude",
        max_tokens: 20,
        tools: [WEATHER_TOOL],
        messages: [
          { role: "user", content: "weather in Paris?" },
          { role: "assistant", content: first.content },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: call.type === "tool_use" ? call.id : "", content: "sunny" },
            ],
          },
        ],
      })
      .finalMessage()
    expect(followUp.stop_reason).not.toBe("tool_use")
    expect(followUp.content.some((b) => b.type === "text")).toBe(true)
  })

  it("a 529 from Anthropic falls back to Bedrock, and the headers name Bedrock", async () => {
    h = await start({ anthropic: "status:529", targets: ["anthropic", "bedrock"] })
    const { response } = await client(h)
      .messages.create({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(response.headers.get("x-tollgate-provider")).toBe("bedrock")
    expect(response.headers.get("x-tollgate-model")).toBe(BEDROCK_MODEL)
    expect(response.headers.get("x-tollgate-attempts")).toBe("2")
  })

  it("a ThrottlingException cools Bedrock down: the next request goes straight to the next target", async () => {
    h = await start({ bedrock: "status:429", targets: ["bedrock", "anthropic"] })
    const first = await client(h)
      .messages.create({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(first.response.headers.get("x-tollgate-provider")).toBe("anthropic")
    expect(first.response.headers.get("x-tollgate-attempts")).toBe("2")
    const second = await client(h)
      .messages.create({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(second.response.headers.get("x-tollgate-attempts")).toBe("1")
    expect(second.response.headers.get("x-tollgate-provider")).toBe("anthropic")
    expect(bedrockRequests(h).count).toBe(1)
  })

  it("a Bedrock throttle that is the last answer reaches the client as an Anthropic 429 with retry-after", async () => {
    h = await start({ bedrock: "status:429", targets: ["bedrock"] })
    const error = (await client(h)
      .messages.create({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
    expect(error).toBeInstanceOf(Anthropic.RateLimitError)
    expect(error.headers?.get("retry-after")).toBe("5")
    expect(error.error).toMatchObject({ type: "error", error: { type: "rate_limit_error" } })
  })

  it("a client that disconnects mid-stream aborts the Bedrock request within 1 s", async () => {
    h = await start({ bedrock: "delay:100,tokens:200", targets: ["bedrock"] })
    const controller = new AbortController()
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": h.key, "content-type": "application/json" },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 200,
        stream: true,
        messages: [{ role: "user", content: "x" }],
      }),
      signal: controller.signal,
    })
    const reader = response.body!.getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toContain("event: message_start")
    const at = performance.now()
    controller.abort()
    await eventually(() => bedrockRequests(h!).recent[0]?.aborted === true, 1_000)
    expect(performance.now() - at).toBeLessThan(1_000)
    await eventually(() => h!.records().length === 1)
    expect(h.records()[0]).toMatchObject({
      provider: "bedrock",
      error: "client_disconnected",
      incomplete: true,
    })
  })

  it("the budget's stream cutoff ends a Bedrock stream that would pass the limit", async () => {
    // 500 µUSD: the reservation (10 output tokens) is admitted, and the 400-token stream (2 s) passes the
    // limit after some 30 tokens, when the reservation cannot be extended any more.
    h = await start({ bedrock: "tokens:400,delay:5", targets: ["bedrock"], budgetUsd: 0.000_5 })
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": h.key, "content-type": "application/json" },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 4_000,
        stream: true,
        messages: [{ role: "user", content: "x" }],
      }),
    })
    const text = await response.text()
    expect(response.status).toBe(200)
    expect(text).toMatch(
      /event: error\ndata: \{"type":"error","error":\{"type":"[a-z_]+","message":"[^"]*budget/i,
    )
    expect(text).not.toContain("event: message_stop")
    // Cut mid-stream, not at its end.
    expect((text.match(/"text_delta"/g) ?? []).length).toBeLessThan(200)
    await eventually(() => h!.records().length === 1)
    expect(h.records()[0]).toMatchObject({ provider: "bedrock", incomplete: true, error: "budget_exceeded" })
    await eventually(() => bedrockRequests(h!).recent[0]?.aborted === true, 1_000)
  })

  it("count_tokens skips Bedrock and uses the first direct Anthropic target", async () => {
    h = await start({ targets: ["bedrock", "anthropic"] })
    const counted = await client(h).messages.countTokens({
      model: "claude",
      messages: [{ role: "user", content: "a b c" }],
    })
    expect(counted.input_tokens).toBe(3)
    expect(bedrockRequests(h).count).toBe(0)
  })

  it("a wrong AWS secret is the fake's 403 InvalidSignatureException, as an Anthropic authentication error", async () => {
    process.env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    try {
      h = await start({ targets: ["bedrock"] })
    } finally {
      process.env["AWS_SECRET_ACCESS_KEY"] = "fake-secret"
    }
    // The gateway resolved the wrong secret at start; the fake checks against the right one.
    const error = (await client(h)
      .messages.create({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
    expect(error.status).toBe(403)
    expect(error.error).toMatchObject({ type: "error", error: { type: "authentication_error" } })
  })
})
