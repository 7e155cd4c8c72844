import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { signatureFor } from "../../fakeprovider/gemini.js"
import { eventually, startHarness, UPSTREAM_KEY, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * Gemini through Tollgate (issue #34): Chat Completions (and, translated,
 * Messages) to `generateContent` on Google AI Studio and on Vertex AI,
 * against the fake provider's Gemini endpoints.
 */

const MODEL = "gemini-2.5-flash"
const GEMINI_3 = "gemini-3-flash-preview"
const PRICES = {
  prices: [
    { provider: "gemini", model: MODEL, input: 0.3, output: 2.5, cache_read: 0.03 },
    { provider: "gemini", model: GEMINI_3, input: 0.5, output: 3, cache_read: 0.05 },
    { provider: "vertex", model: MODEL, input: 0.3, output: 2.5, cache_read: 0.03 },
  ],
}

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

const start = (options: { scenario?: string; provider?: "gemini" | "vertex"; model?: string } = {}) =>
  startHarness({
    fakes: [{ name: "gemini", scenario: options.scenario ?? "ok" }],
    prices: PRICES,
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      providers: {
        gemini: { kind: "gemini", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        vertex: {
          kind: "vertex",
          project: "my-project",
          region: "us-central1",
          base_url: urls[0],
          access_token_env: UPSTREAM_KEY_ENV,
        },
      },
      routes: {
        flash: {
          api: "openai",
          targets: [{ provider: options.provider ?? "gemini", model: options.model ?? MODEL }],
        },
        "flash-claude": {
          api: "anthropic",
          translate: true,
          targets: [{ provider: options.provider ?? "gemini", model: options.model ?? MODEL }],
        },
      },
      tenants: {
        acme: {
          keys: [{ id: "ci", sha256: keyHash }],
          routes: "*",
          budgets: { month: { limit_usd: 10, mode: "hard" } },
        },
      },
    }),
  })

const openai = (harness: Harness) =>
  new OpenAI({ apiKey: harness.key, baseURL: `${harness.url}/v1`, maxRetries: 0 })
const anthropic = (harness: Harness) =>
  new Anthropic({ apiKey: harness.key, baseURL: harness.url, maxRetries: 0 })

const upstream = (harness: Harness) => harness.fakes[0]!.requests().recent.at(-1)!

const WEATHER = {
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}

/** The µUSD of a record at 0.3 / 2.5 / 0.03 USD per million input, output and cache-read tokens. */
const costOf = (r: { input_tokens: number; output_tokens: number; cache_read_tokens: number }) =>
  Math.ceil(
    (r.input_tokens * 300_000 + r.output_tokens * 2_500_000 + r.cache_read_tokens * 30_000) / 1_000_000,
  )

describe("Gemini targets (Google AI Studio)", () => {
  it("the OpenAI SDK's chat stream: text, the generateContent path and key, exact usage and µUSD", async () => {
    h = await start({ scenario: "tokens:6,thoughts:7,cached:2" })
    const stream = await openai(h).chat.completions.create({
      model: "flash",
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 50,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hello gemini, how are you" },
      ],
    })
    let text = ""
    let usage: OpenAI.CompletionUsage | undefined
    let finish: string | null = null
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ""
      finish = chunk.choices[0]?.finish_reason ?? finish
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe("tok0 tok1 tok2 tok3 tok4 tok5 ")
    expect(finish).toBe("stop")
    const sent = upstream(h)
    expect(sent.path).toBe(`/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`)
    expect(sent.headers["x-goog-api-key"]).toBe(UPSTREAM_KEY)
    const body = sent.body as Record<string, unknown>
    expect(body["systemInstruction"]).toEqual({ parts: [{ text: "be brief" }] })
    expect(body["contents"]).toEqual([{ role: "user", parts: [{ text: "hello gemini, how are you" }] }])
    expect(body["generationConfig"]).toMatchObject({ maxOutputTokens: 50 })
    // Thinking is output; cached tokens are input read from the cache.
    expect(usage!.completion_tokens).toBe(6 + 7)
    expect(usage!.prompt_tokens_details?.cached_tokens).toBe(2)
    await eventually(() => h!.records().length === 1)
    const record = h.records()[0]!
    expect(record).toMatchObject({
      provider: "gemini",
      model: MODEL,
      output_tokens: 13,
      cache_read_tokens: 2,
      usage_estimated: false,
      incomplete: false,
    })
    expect(record.input_tokens + record.cache_read_tokens).toBe(usage!.prompt_tokens)
    expect(record.cost_micro_usd).toBe(costOf(record))
  })

  it("JSON answers and a tool call round trip through the OpenAI SDK", async () => {
    h = await start()
    const first = await openai(h).chat.completions.create({
      model: "flash",
      max_tokens: 20,
      tools: [{ type: "function", function: WEATHER }],
      messages: [{ role: "user", content: "weather in Paris?" }],
    })
    expect(first.choices[0]!.finish_reason).toBe("tool_calls")
    const call = first.choices[0]!.message.tool_calls![0]!
    expect(call.type === "function" && call.function.name).toBe("get_weather")
    expect(JSON.parse(call.type === "function" ? call.function.arguments : "")).toBeTypeOf("object")
    expect(upstream(h).path).toBe(`/v1beta/models/${MODEL}:generateContent`)
    const declared = (upstream(h).body as { tools: Array<{ functionDeclarations: Array<{ name: string }> }> })
      .tools
    expect(declared[0]!.functionDeclarations[0]!.name).toBe("get_weather")

    const second = await openai(h).chat.completions.create({
      model: "flash",
      max_tokens: 4,
      tools: [{ type: "function", function: WEATHER }],
      messages: [
        { role: "user", content: "weather in Paris?" },
        first.choices[0]!.message,
        { role: "tool", tool_call_id: call.id, content: '{"sky":"sunny"}' },
      ],
    })
    // Four tokens of a four-token limit: Gemini's MAX_TOKENS is Chat Completions' "length".
    expect(second.choices[0]!.finish_reason).toBe("length")
    expect(second.choices[0]!.message.content).toBe("tok0 tok1 tok2 tok3 ")
    const contents = (
      upstream(h).body as { contents: Array<{ role: string; parts: Array<Record<string, unknown>> }> }
    ).contents
    expect(contents[1]!.parts[0]!["functionCall"]).toMatchObject({ name: "get_weather" })
    expect(contents[2]).toEqual({
      role: "user",
      parts: [{ functionResponse: { name: "get_weather", response: { sky: "sunny" } } }],
    })
    const record = h.records().at(-1)!
    expect(record.output_tokens).toBe(second.usage!.completion_tokens)
    expect(record.cost_micro_usd).toBe(costOf(record))
  })

  it("a streamed tool call reaches the OpenAI SDK as a tool_calls delta", async () => {
    h = await start()
    const stream = await openai(h).chat.completions.create({
      model: "flash",
      stream: true,
      max_tokens: 20,
      tools: [{ type: "function", function: WEATHER }],
      messages: [{ role: "user", content: "weather in Paris?" }],
    })
    const names: Array<string> = []
    let finish: string | null = null
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? [])
        if (call.function?.name) names.push(call.function.name)
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    expect(names).toEqual(["get_weather"])
    expect(finish).toBe("tool_calls")
  })

  it("a field Gemini cannot take is a 400 naming it, before anything goes upstream", async () => {
    h = await start()
    const error = (await openai(h)
      .chat.completions.create({
        model: "flash",
        max_tokens: 4,
        logit_bias: { "50256": -100 },
        messages: [{ role: "user", content: "hi" }],
      })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>
    expect(error.status).toBe(400)
    expect(error.message).toContain("logit_bias")
    expect(h.fakes[0]!.requests().count).toBe(0)
  })

  it("a Gemini error reaches the client in the OpenAI format", async () => {
    h = await start({ scenario: "status:400" })
    const error = (await openai(h)
      .chat.completions.create({ model: "flash", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error.type).toBe("invalid_request_error")
  })

  it("the Anthropic SDK on a translating route: text, a tool call and exact usage, stream and JSON", async () => {
    h = await start()
    const stream = anthropic(h).messages.stream({
      model: "flash-claude",
      max_tokens: 5,
      messages: [{ role: "user", content: "hello from claude code" }],
    })
    let text = ""
    stream.on("text", (t) => (text += t))
    const message = await stream.finalMessage()
    expect(text).toBe("tok0 tok1 tok2 tok3 tok4 ")
    expect(message.usage.output_tokens).toBe(5)
    expect(upstream(h).path).toBe(`/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`)
    await eventually(() => h!.records().length === 1)
    const record = h.records()[0]!
    expect(record).toMatchObject({ provider: "gemini", output_tokens: 5, incomplete: false })
    expect(record.input_tokens).toBe(message.usage.input_tokens)
    expect(record.cost_micro_usd).toBe(costOf(record))

    const tool = await anthropic(h).messages.create({
      model: "flash-claude",
      max_tokens: 20,
      tools: [
        { name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as never },
      ],
      messages: [{ role: "user", content: "weather in Paris?" }],
    })
    expect(tool.stop_reason).toBe("tool_use")
    expect(tool.content.find((b) => b.type === "tool_use")).toMatchObject({ name: "get_weather" })
  })
})

describe("Gemini 3 thought signatures", () => {
  it("a tool loop through the OpenAI SDK's stream sends the call's signature back; a foreign call gets the placeholder", async () => {
    h = await start({ model: GEMINI_3 })
    const tools = [{ type: "function" as const, function: WEATHER }]
    const stream = await openai(h).chat.completions.create({
      model: "flash",
      stream: true,
      max_tokens: 20,
      tools,
      messages: [{ role: "user", content: "weather in Paris?" }],
    })
    let id = ""
    let args = ""
    for await (const chunk of stream)
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
        id += call.id ?? ""
        args += call.function?.arguments ?? ""
      }
    expect(id).toContain("__thought__")
    const answer = await openai(h).chat.completions.create({
      model: "flash",
      max_tokens: 4,
      tools,
      messages: [
        { role: "user", content: "weather in Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: args } }],
        },
        { role: "tool", tool_call_id: id, content: '{"sky":"sunny"}' },
      ],
    })
    // The fake, like Gemini 3, answers 400 when the call comes back without its signature.
    expect(answer.choices[0]!.message.content).toBe("tok0 tok1 tok2 tok3 ")
    const sent = upstream(h).body as { contents: Array<{ parts: Array<Record<string, unknown>> }> }
    expect(sent.contents[1]!.parts[0]!["thoughtSignature"]).toBe(signatureFor("get_weather"))

    // A history another model wrote (an OpenAI call id): Google's placeholder stands in for the signature.
    const foreign = await openai(h).chat.completions.create({
      model: "flash",
      max_tokens: 2,
      tools,
      messages: [
        { role: "user", content: "weather in Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_abc123", type: "function", function: { name: "get_weather", arguments: "{}" } },
          ],
        },
        { role: "tool", tool_call_id: "call_abc123", content: "sunny" },
      ],
    })
    expect(foreign.choices[0]!.message.content).toBe("tok0 tok1 ")
  })

  it("a tool loop through the Anthropic SDK on a translating route keeps the signature in the tool_use id", async () => {
    h = await start({ model: GEMINI_3 })
    const tools = [
      { name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as never },
    ]
    const first = await anthropic(h).messages.create({
      model: "flash-claude",
      max_tokens: 20,
      tools,
      messages: [{ role: "user", content: "weather in Paris?" }],
    })
    const use = first.content.find((b) => b.type === "tool_use")!
    expect(use.type === "tool_use" && use.id).toMatch(/^[A-Za-z0-9_-]+__thought__[A-Za-z0-9_-]+$/)
    const second = await anthropic(h).messages.create({
      model: "flash-claude",
      max_tokens: 3,
      tools,
      messages: [
        { role: "user", content: "weather in Paris?" },
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: use.type === "tool_use" ? use.id : "", content: "sunny" },
          ],
        },
      ],
    })
    expect(second.stop_reason).toBe("max_tokens")
    expect(second.content).toMatchObject([{ type: "text", text: "tok0 tok1 tok2 " }])
  })
})

describe("Gemini models on Vertex AI", () => {
  it("a vertex target whose model is gemini-… calls publishers/google with the bearer token", async () => {
    h = await start({ provider: "vertex" })
    const completion = await openai(h).chat.completions.create({
      model: "flash",
      max_tokens: 3,
      messages: [{ role: "user", content: "hello vertex gemini" }],
    })
    expect(completion.choices[0]!.message.content).toBe("tok0 tok1 tok2 ")
    const sent = upstream(h)
    expect(sent.path).toBe(
      `/v1/projects/my-project/locations/us-central1/publishers/google/models/${MODEL}:generateContent`,
    )
    expect(sent.headers["authorization"]).toBe(`Bearer ${UPSTREAM_KEY}`)
    const record = h.records().at(-1)!
    expect(record).toMatchObject({ provider: "vertex", model: MODEL, output_tokens: 3 })
    expect(record.cost_micro_usd).toBe(costOf(record))
  })
})
