import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { beforeEach, describe, expect, it } from "vitest"
import { harnessForSuite, UPSTREAM_KEY } from "../support/harness.js"

// "Hello, Tollgate! How are you?" → Hello , Tollgate ! How are you ? = 8 fake input tokens
const PROMPT = "Hello, Tollgate! How are you?"
const FAKE_INPUT_TOKENS = 8
const expectedText = (n: number) => Array.from({ length: n }, (_, i) => `tok${i} `).join("")
// claude-sonnet-5-5: 3 USD / M input, 10 USD / M output; gpt-5-mini: 0.25 / 2
const claudeCost = (input: number, output: number) =>
  Math.ceil((input * 3_000_000 + output * 10_000_000) / 1_000_000)
const gptCost = (input: number, output: number) =>
  Math.ceil((input * 250_000 + output * 2_000_000) / 1_000_000)

describe("official SDKs through Tollgate to the fake provider", () => {
  const h = harnessForSuite()
  beforeEach(() => h.fakes[0]!.reset())

  const anthropic = () => new Anthropic({ apiKey: h.key, baseURL: h.url, maxRetries: 0 })
  const openai = () => new OpenAI({ apiKey: h.key, baseURL: `${h.url}/v1`, maxRetries: 0 })
  const lastRecord = () => h.records().at(-1)!

  it("Anthropic messages.create returns the fake's message and records its exact usage and cost", async () => {
    const { data, response } = await anthropic()
      .messages.create({ model: "claude", max_tokens: 10, messages: [{ role: "user", content: PROMPT }] })
      .withResponse()
    expect(data.content).toEqual([{ type: "text", text: expectedText(10) }])
    expect(data.usage.input_tokens).toBe(FAKE_INPUT_TOKENS)
    expect(data.usage.output_tokens).toBe(10)
    expect(response.headers.get("x-tollgate-provider")).toBe("anthropic")
    expect(response.headers.get("x-tollgate-model")).toBe("claude-sonnet-5-5")
    expect(response.headers.get("x-tollgate-attempts")).toBe("1")
    expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    // Tollgate's own time and the upstream's until the commit.
    const timing = /^tollgate;dur=(\d+), upstream;dur=(\d+)$/.exec(
      response.headers.get("server-timing") ?? "",
    )
    expect(timing).not.toBeNull()
    expect(Number(timing![1]) + Number(timing![2])).toBeLessThan(5_000)

    const record = lastRecord()
    expect(record).toMatchObject({
      tenant: "acme",
      key_id: "ci",
      route: "claude",
      endpoint: "/v1/messages",
      stream: false,
      provider: "anthropic",
      model: "claude-sonnet-5-5",
      attempts: 1,
      status: 200,
      input_tokens: FAKE_INPUT_TOKENS,
      output_tokens: 10,
      cost_micro_usd: claudeCost(FAKE_INPUT_TOKENS, 10),
      usage_estimated: false,
      incomplete: false,
      error: null,
    })
    expect(record.request_id).toBe(response.headers.get("x-request-id"))

    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.path).toBe("/v1/messages")
    expect(upstream.headers["x-api-key"]).toBe(UPSTREAM_KEY)
    // The client's anthropic-version is forwarded as sent.
    expect(upstream.headers["anthropic-version"]).toMatch(/^\d{4}-\d{2}-\d{2}$/)
    expect(JSON.stringify(upstream.headers)).not.toContain(h.key)
    expect(upstream.body).toEqual({
      model: "claude-sonnet-5-5",
      max_tokens: 10,
      messages: [{ role: "user", content: PROMPT }],
    })
  })

  it("Anthropic streaming delivers every event and records the merged stream usage", async () => {
    const stream = anthropic().messages.stream({
      model: "claude",
      max_tokens: 12,
      messages: [{ role: "user", content: PROMPT }],
    })
    const message = await stream.finalMessage()
    expect(message.content).toEqual([{ type: "text", text: expectedText(12) }])
    expect(message.usage.output_tokens).toBe(12)
    const record = lastRecord()
    expect(record).toMatchObject({
      stream: true,
      status: 200,
      input_tokens: FAKE_INPUT_TOKENS,
      output_tokens: 12,
      cost_micro_usd: claudeCost(FAKE_INPUT_TOKENS, 12),
      incomplete: false,
    })
  })

  it("OpenAI chat.completions.create returns the fake's completion and records usage", async () => {
    const completion = await openai().chat.completions.create({
      model: "gpt",
      max_completion_tokens: 5,
      messages: [{ role: "user", content: PROMPT }],
    })
    expect(completion.choices[0]!.message.content).toBe(expectedText(5))
    expect(completion.usage?.prompt_tokens).toBe(FAKE_INPUT_TOKENS)
    expect(lastRecord()).toMatchObject({
      endpoint: "/v1/chat/completions",
      provider: "openai",
      model: "gpt-5-mini",
      input_tokens: FAKE_INPUT_TOKENS,
      output_tokens: 5,
      cost_micro_usd: gptCost(FAKE_INPUT_TOKENS, 5),
    })
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.headers["authorization"]).toBe(`Bearer ${UPSTREAM_KEY}`)
  })

  it("OpenAI streaming gets stream_options.include_usage added and the usage is recorded", async () => {
    const stream = await openai().chat.completions.create({
      model: "gpt",
      stream: true,
      max_tokens: 7,
      messages: [{ role: "user", content: PROMPT }],
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe(expectedText(7))
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect((upstream.body as Record<string, unknown>)["stream_options"]).toEqual({ include_usage: true })
    expect(lastRecord()).toMatchObject({
      stream: true,
      input_tokens: FAKE_INPUT_TOKENS,
      output_tokens: 7,
      cost_micro_usd: gptCost(FAKE_INPUT_TOKENS, 7),
      incomplete: false,
    })
  })

  it("a request without anthropic-version gets the default upstream, and hop-by-hop headers stay behind", async () => {
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": h.key,
        "content-type": "application/json",
        "x-custom": "kept-back",
        te: "trailers",
      },
      body: JSON.stringify({ model: "claude", max_tokens: 3, messages: [{ role: "user", content: PROMPT }] }),
    })
    expect(response.status).toBe(200)
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.headers["anthropic-version"]).toBe("2023-06-01")
    expect(upstream.headers["x-custom"]).toBeUndefined()
    expect(upstream.headers["te"]).toBeUndefined()
  })

  it("the model list shows the key's routes in the asking SDK's format", async () => {
    const openaiModels = await openai().models.list()
    expect(openaiModels.data.map((m) => m.id).sort()).toEqual(["claude", "gpt"])
    const anthropicModels = await anthropic().models.list()
    expect(anthropicModels.data.map((m) => m.id).sort()).toEqual(["claude", "gpt"])
  })
})
