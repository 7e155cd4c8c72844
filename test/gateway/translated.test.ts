import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FakeProviderOptions } from "../../fakeprovider/server.js"
import { harnessForSuite, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startRedis, type RedisHandle } from "../support/redis.js"

/**
 * Routes with `translate: true` (SPEC "Translation between API formats",
 * docs/translation.md) through the in-process gateway to the fake provider,
 * with the official SDKs: Chat Completions and Responses clients on a Claude
 * target, an Anthropic client on an OpenAI target, two-turn tool loops, the
 * usage the client sees and the one recorded, and the failure table on
 * translated streams (memory and Redis store).
 */

// "Hello, Tollgate! How are you?" → Hello , Tollgate ! How are you ? = 8 fake input tokens
const PROMPT = "Hello, Tollgate! How are you?"
const PROMPT_TOKENS = 8
// "You are terse." → You are terse . = 4
const SYSTEM = "You are terse."
const SYSTEM_TOKENS = 4
// "Sunny, 21 C" → Sunny , 21 C = 4
const TOOL_RESULT = "Sunny, 21 C"
const TOOL_RESULT_TOKENS = 4
// A limit above the fake's default 16 tokens: text answers end with end_turn / stop, not max_tokens / length.
const MAX = 20
const OUT = 16
const expectedText = (n: number) => Array.from({ length: n }, (_, i) => `tok${i} `).join("")
// The fake's tool call: {"query":"tok0 … "} with one argument token per planned output token.
const toolArguments = (n: number) => JSON.stringify({ query: expectedText(n) })
// claude-sonnet-5-5: 3 USD / M input, 10 USD / M output; gpt-5-mini: 0.25 / 2
const claudeCost = (input: number, output: number) =>
  Math.ceil((input * 3_000_000 + output * 10_000_000) / 1_000_000)
const gptCost = (input: number, output: number) =>
  Math.ceil((input * 250_000 + output * 2_000_000) / 1_000_000)

const WEATHER_SCHEMA = {
  type: "object",
  properties: { query: { type: "string" } },
  required: ["query"],
}

const translatingConfig = (fakes: ReadonlyArray<string>, keyHash: string, dir: string) => ({
  server: { listen: "127.0.0.1:0" },
  usage: { file: join(dir, "usage.jsonl") },
  providers: {
    anthropic: { kind: "anthropic", base_url: fakes[0], api_key_env: UPSTREAM_KEY_ENV },
    openai: { kind: "openai", base_url: fakes[0], api_key_env: UPSTREAM_KEY_ENV },
  },
  routes: {
    "to-claude": {
      api: "openai",
      translate: true,
      targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }],
    },
    "to-gpt": { api: "anthropic", translate: true, targets: [{ provider: "openai", model: "gpt-5-mini" }] },
  },
  tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
})

describe("translated routes with the official SDKs", () => {
  const h = harnessForSuite({ config: translatingConfig })
  beforeEach(() => h.fakes[0]!.reset())

  const anthropic = () => new Anthropic({ apiKey: h.key, baseURL: h.url, maxRetries: 0 })
  const openai = () => new OpenAI({ apiKey: h.key, baseURL: `${h.url}/v1`, maxRetries: 0 })
  const upstream = () => h.fakes[0]!.requests().recent
  const records = () => h.records()

  describe("Chat Completions client on a Claude target", () => {
    const chatTools: Array<OpenAI.Chat.Completions.ChatCompletionTool> = [
      {
        type: "function",
        function: { name: "get_weather", description: "Weather of a place", parameters: WEATHER_SCHEMA },
      },
    ]
    const firstTurn: Array<OpenAI.Chat.Completions.ChatCompletionMessageParam> = [
      { role: "system", content: SYSTEM },
      { role: "user", content: PROMPT },
    ]
    const turn1Input = SYSTEM_TOKENS + PROMPT_TOKENS
    // The fake counts only text blocks: the tool_result block of turn 2 adds nothing.
    const turn2Input = SYSTEM_TOKENS + PROMPT_TOKENS

    const expectUpstreamLoop = (stream: boolean, callId: string) => {
      const [first, second] = upstream()
      expect(upstream()).toHaveLength(2)
      expect(first!.path).toBe("/v1/messages")
      expect(first!.body).toMatchObject({
        model: "claude-sonnet-5-5",
        max_tokens: MAX,
        system: SYSTEM,
        messages: [{ role: "user" }],
        tools: [{ name: "get_weather", description: "Weather of a place", input_schema: WEATHER_SCHEMA }],
      })
      expect(JSON.stringify((first!.body as { messages: unknown }).messages)).toContain(PROMPT)
      expect((first!.body as Record<string, unknown>)["stream"] ?? false).toBe(stream)
      expect((first!.body as Record<string, unknown>)["stream_options"]).toBeUndefined()
      expect(second!.path).toBe("/v1/messages")
      const messages = (second!.body as { messages: Array<{ role: string; content: unknown }> }).messages
      expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"])
      expect(messages[1]!.content).toEqual([
        { type: "tool_use", id: callId, name: "get_weather", input: JSON.parse(toolArguments(OUT)) },
      ])
      expect(messages[2]!.content).toMatchObject([{ type: "tool_result", tool_use_id: callId }])
      expect(JSON.stringify(messages[2]!.content)).toContain(TOOL_RESULT)
    }

    const expectRecords = (stream: boolean) => {
      const [one, two] = records().slice(-2)
      const common = {
        route: "to-claude",
        endpoint: "/v1/chat/completions",
        upstream_endpoint: "/v1/messages",
        stream,
        provider: "anthropic",
        model: "claude-sonnet-5-5",
        status: 200,
        usage_estimated: false,
        incomplete: false,
        error: null,
      }
      expect(one).toMatchObject({
        ...common,
        input_tokens: turn1Input,
        output_tokens: OUT,
        cost_micro_usd: claudeCost(turn1Input, OUT),
      })
      expect(two).toMatchObject({
        ...common,
        input_tokens: turn2Input,
        output_tokens: OUT,
        cost_micro_usd: claudeCost(turn2Input, OUT),
      })
    }

    it("chat.completions.create: a two-turn tool loop, translated usage, upstream Messages body and records", async () => {
      const client = openai()
      const one = await client.chat.completions.create({
        model: "to-claude",
        max_completion_tokens: MAX,
        messages: firstTurn,
        tools: chatTools,
      })
      expect(one.object).toBe("chat.completion")
      expect(one.id).toMatch(/^chatcmpl-/)
      // docs/translation.md "Responses": the `model` is the route name the client asked for.
      expect.soft(one.model).toBe("to-claude")
      const choice = one.choices[0]!
      expect(choice.finish_reason).toBe("tool_calls")
      const calls = choice.message
        .tool_calls as Array<OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall>
      expect(calls).toHaveLength(1)
      expect(calls[0]!.type).toBe("function")
      expect(calls[0]!.id).toMatch(/^toolu_/)
      expect(calls[0]!.function.name).toBe("get_weather")
      expect(JSON.parse(calls[0]!.function.arguments)).toEqual(JSON.parse(toolArguments(OUT)))
      expect(one.usage).toMatchObject({
        prompt_tokens: turn1Input,
        completion_tokens: OUT,
        total_tokens: turn1Input + OUT,
      })

      const two = await client.chat.completions.create({
        model: "to-claude",
        max_completion_tokens: MAX,
        messages: [
          ...firstTurn,
          choice.message,
          { role: "tool", tool_call_id: calls[0]!.id, content: TOOL_RESULT },
        ],
        tools: chatTools,
      })
      expect(two.choices[0]!.finish_reason).toBe("stop")
      expect(two.choices[0]!.message.content).toBe(expectedText(OUT))
      expect(two.choices[0]!.message.tool_calls ?? []).toEqual([])
      expect(two.usage).toMatchObject({
        prompt_tokens: turn2Input,
        completion_tokens: OUT,
        total_tokens: turn2Input + OUT,
      })

      expectUpstreamLoop(false, calls[0]!.id)
      expectRecords(false)
    })

    it("chat.completions.stream → finalChatCompletion: the same tool loop, streamed", async () => {
      const client = openai()
      const one = await client.chat.completions
        .stream({
          model: "to-claude",
          max_completion_tokens: MAX,
          messages: firstTurn,
          tools: chatTools,
          stream_options: { include_usage: true },
        })
        .finalChatCompletion()
      const choice = one.choices[0]!
      expect(choice.finish_reason).toBe("tool_calls")
      const calls = choice.message
        .tool_calls as Array<OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall>
      expect(calls).toHaveLength(1)
      expect(calls[0]!.id).toMatch(/^toolu_/)
      expect(calls[0]!.function.name).toBe("get_weather")
      expect(JSON.parse(calls[0]!.function.arguments)).toEqual(JSON.parse(toolArguments(OUT)))
      expect(one.usage).toMatchObject({
        prompt_tokens: turn1Input,
        completion_tokens: OUT,
        total_tokens: turn1Input + OUT,
      })

      const two = await client.chat.completions
        .stream({
          model: "to-claude",
          max_completion_tokens: MAX,
          messages: [
            ...firstTurn,
            { role: "assistant", content: null, tool_calls: calls },
            { role: "tool", tool_call_id: calls[0]!.id, content: TOOL_RESULT },
          ],
          tools: chatTools,
          stream_options: { include_usage: true },
        })
        .finalChatCompletion()
      expect(two.choices[0]!.finish_reason).toBe("stop")
      expect(two.choices[0]!.message.content).toBe(expectedText(OUT))
      expect.soft(two.model).toBe("to-claude")
      expect(two.usage).toMatchObject({
        prompt_tokens: turn2Input,
        completion_tokens: OUT,
        total_tokens: turn2Input + OUT,
      })

      expectUpstreamLoop(true, calls[0]!.id)
      expectRecords(true)
    })

    it("a stream without stream_options.include_usage gets no usage chunk, yet the record has the exact usage", async () => {
      const response = await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "to-claude",
          stream: true,
          max_tokens: 3,
          messages: [{ role: "user", content: PROMPT }],
        }),
      })
      const text = await response.text()
      expect(response.status).toBe(200)
      expect(text).toContain("tok2 ")
      expect(text).not.toContain('"usage"')
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
      expect(records().at(-1)).toMatchObject({
        upstream_endpoint: "/v1/messages",
        input_tokens: PROMPT_TOKENS,
        output_tokens: 3,
        cost_micro_usd: claudeCost(PROMPT_TOKENS, 3),
      })
    })
  })

  describe("Anthropic client on an OpenAI target", () => {
    const tools: Array<Anthropic.Tool> = [
      {
        name: "get_weather",
        description: "Weather of a place",
        input_schema: WEATHER_SCHEMA as Anthropic.Tool.InputSchema,
      },
    ]
    const turn1Input = SYSTEM_TOKENS + PROMPT_TOKENS
    // The fake counts the Chat `tool` message's text.
    const turn2Input = SYSTEM_TOKENS + PROMPT_TOKENS + TOOL_RESULT_TOKENS

    const expectUpstreamLoop = (stream: boolean, callId: string) => {
      const [first, second] = upstream()
      expect(upstream()).toHaveLength(2)
      expect(first!.path).toBe("/v1/chat/completions")
      expect(first!.body).toMatchObject({
        model: "gpt-5-mini",
        max_completion_tokens: MAX,
        messages: [{ role: "system", content: SYSTEM }, { role: "user" }],
        tools: [
          {
            type: "function",
            function: { name: "get_weather", description: "Weather of a place", parameters: WEATHER_SCHEMA },
          },
        ],
      })
      expect(JSON.stringify((first!.body as { messages: unknown }).messages)).toContain(PROMPT)
      if (stream) expect(first!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
      else expect((first!.body as Record<string, unknown>)["stream"] ?? false).toBe(false)
      expect(second!.path).toBe("/v1/chat/completions")
      const messages = (second!.body as { messages: Array<Record<string, unknown>> }).messages
      expect(messages.map((m) => m["role"])).toEqual(["system", "user", "assistant", "tool"])
      expect(messages[2]!["tool_calls"]).toEqual([
        { id: callId, type: "function", function: { name: "get_weather", arguments: toolArguments(OUT) } },
      ])
      expect(messages[3]).toMatchObject({ role: "tool", tool_call_id: callId })
      expect(JSON.stringify(messages[3]!["content"])).toContain(TOOL_RESULT)
    }

    const expectRecords = (stream: boolean) => {
      const [one, two] = records().slice(-2)
      const common = {
        route: "to-gpt",
        endpoint: "/v1/messages",
        upstream_endpoint: "/v1/chat/completions",
        stream,
        provider: "openai",
        model: "gpt-5-mini",
        status: 200,
        usage_estimated: false,
        incomplete: false,
        error: null,
      }
      expect(one).toMatchObject({
        ...common,
        input_tokens: turn1Input,
        output_tokens: OUT,
        cost_micro_usd: gptCost(turn1Input, OUT),
      })
      expect(two).toMatchObject({
        ...common,
        input_tokens: turn2Input,
        output_tokens: OUT,
        cost_micro_usd: gptCost(turn2Input, OUT),
      })
    }

    const secondTurn = (
      first: Anthropic.Message,
      call: Anthropic.ToolUseBlock,
    ): Array<Anthropic.MessageParam> => [
      { role: "user", content: PROMPT },
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: TOOL_RESULT }] },
    ]

    it("messages.create: a two-turn tool loop, stop reasons, translated usage, upstream Chat body and records", async () => {
      const client = anthropic()
      const one = await client.messages.create({
        model: "to-gpt",
        max_tokens: MAX,
        system: SYSTEM,
        messages: [{ role: "user", content: PROMPT }],
        tools,
      })
      expect(one.type).toBe("message")
      expect(one.id).toMatch(/^msg_/)
      // docs/translation.md "Responses": the `model` is the route name the client asked for.
      expect.soft(one.model).toBe("to-gpt")
      expect(one.stop_reason).toBe("tool_use")
      const calls = one.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")
      expect(calls).toHaveLength(1)
      expect(calls[0]!.id).toMatch(/^call_/)
      expect(calls[0]!.name).toBe("get_weather")
      expect(calls[0]!.input).toEqual(JSON.parse(toolArguments(OUT)))
      expect(one.usage).toMatchObject({
        input_tokens: turn1Input,
        output_tokens: OUT,
        cache_read_input_tokens: 0,
      })

      const two = await client.messages.create({
        model: "to-gpt",
        max_tokens: MAX,
        system: SYSTEM,
        messages: secondTurn(one, calls[0]!),
        tools,
      })
      expect(two.stop_reason).toBe("end_turn")
      expect(two.content).toHaveLength(1)
      expect(two.content[0]).toMatchObject({ type: "text", text: expectedText(OUT) })
      expect(two.usage).toMatchObject({ input_tokens: turn2Input, output_tokens: OUT })

      expectUpstreamLoop(false, calls[0]!.id)
      expectRecords(false)
    })

    it("messages.stream → finalMessage: the same tool loop, streamed", async () => {
      const client = anthropic()
      const one = await client.messages
        .stream({
          model: "to-gpt",
          max_tokens: MAX,
          system: SYSTEM,
          messages: [{ role: "user", content: PROMPT }],
          tools,
        })
        .finalMessage()
      expect(one.stop_reason).toBe("tool_use")
      const calls = one.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")
      expect(calls).toHaveLength(1)
      expect(calls[0]!.id).toMatch(/^call_/)
      expect(calls[0]!.name).toBe("get_weather")
      expect(calls[0]!.input).toEqual(JSON.parse(toolArguments(OUT)))
      // The Chat upstream reports usage only at the end: message_delta carries the whole usage.
      expect(one.usage).toMatchObject({ input_tokens: turn1Input, output_tokens: OUT })

      const two = await client.messages
        .stream({
          model: "to-gpt",
          max_tokens: MAX,
          system: SYSTEM,
          messages: secondTurn(one, calls[0]!),
          tools,
        })
        .finalMessage()
      expect.soft(two.model).toBe("to-gpt")
      expect(two.stop_reason).toBe("end_turn")
      expect(two.content).toHaveLength(1)
      expect(two.content[0]).toMatchObject({ type: "text", text: expectedText(OUT) })
      expect(two.usage).toMatchObject({ input_tokens: turn2Input, output_tokens: OUT })

      expectUpstreamLoop(true, calls[0]!.id)
      expectRecords(true)
    })
  })

  describe("Responses client on a Claude target", () => {
    it("responses.create (JSON) returns the text and the translated usage", async () => {
      const response = await openai().responses.create({
        model: "to-claude",
        instructions: SYSTEM,
        input: PROMPT,
        max_output_tokens: MAX,
      })
      expect(response.id).toMatch(/^resp_/)
      expect(response.status).toBe("completed")
      // docs/translation.md "Responses": the `model` is the route name the client asked for.
      expect.soft(response.model).toBe("to-claude")
      expect(response.output_text).toBe(expectedText(OUT))
      expect(response.usage).toMatchObject({
        input_tokens: SYSTEM_TOKENS + PROMPT_TOKENS,
        output_tokens: OUT,
        total_tokens: SYSTEM_TOKENS + PROMPT_TOKENS + OUT,
      })
      const sent = upstream().at(-1)!
      expect(sent.path).toBe("/v1/messages")
      expect(sent.body).toMatchObject({ model: "claude-sonnet-5-5", max_tokens: MAX, system: SYSTEM })
      expect(records().at(-1)).toMatchObject({
        endpoint: "/v1/responses",
        upstream_endpoint: "/v1/messages",
        stream: false,
        input_tokens: SYSTEM_TOKENS + PROMPT_TOKENS,
        output_tokens: OUT,
        cost_micro_usd: claudeCost(SYSTEM_TOKENS + PROMPT_TOKENS, OUT),
        incomplete: false,
      })
    })

    it("responses.create (stream) at the output limit: text deltas, then response.incomplete for max_output_tokens with usage", async () => {
      const stream = await openai().responses.create({
        model: "to-claude",
        input: PROMPT,
        max_output_tokens: 4,
        stream: true,
      })
      let text = ""
      let completed: OpenAI.Responses.Response | undefined
      let incomplete: OpenAI.Responses.Response | undefined
      const sequence: Array<number> = []
      for await (const event of stream) {
        sequence.push(event.sequence_number)
        if (event.type === "response.output_text.delta") text += event.delta
        if (event.type === "response.completed") completed = event.response
        if (event.type === "response.incomplete") incomplete = event.response
      }
      expect(text).toBe(expectedText(4))
      expect(sequence).toEqual(sequence.map((_, i) => sequence[0]! + i))
      expect(completed).toBeUndefined()
      expect(incomplete?.status).toBe("incomplete")
      expect.soft(incomplete?.model).toBe("to-claude")
      expect(incomplete?.incomplete_details).toEqual({ reason: "max_output_tokens" })
      expect(incomplete?.output).toMatchObject([
        { type: "message", role: "assistant", content: [{ type: "output_text", text: expectedText(4) }] },
      ])
      expect(incomplete?.usage).toMatchObject({
        input_tokens: PROMPT_TOKENS,
        output_tokens: 4,
        total_tokens: PROMPT_TOKENS + 4,
      })
      expect(records().at(-1)).toMatchObject({
        endpoint: "/v1/responses",
        upstream_endpoint: "/v1/messages",
        stream: true,
        input_tokens: PROMPT_TOKENS,
        output_tokens: 4,
        cost_micro_usd: claudeCost(PROMPT_TOKENS, 4),
        incomplete: false,
      })
    })

    it("previous_response_id cannot be translated: 400 invalid_request_error naming the field, nothing sent upstream", async () => {
      const error = await openai()
        .responses.create({ model: "to-claude", input: PROMPT, previous_response_id: "resp_123" })
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const bad = error as InstanceType<typeof OpenAI.BadRequestError>
      expect(bad.status).toBe(400)
      expect(bad.error).toMatchObject({ type: "invalid_request_error" })
      expect((bad.error as { message: string }).message).toMatch(/^previous_response_id/)
      expect(upstream()).toHaveLength(0)
    })
  })
})

/**
 * The failure table on translated streams: a Chat client on route `main`
 * (`translate: true`) whose targets are Anthropic providers on fake A, then
 * fake B (or an OpenAI one on B for the cross-format fallback).
 */
interface FailureSetup {
  readonly a: string
  /** Fake B's provider speaks OpenAI Chat. */
  readonly crossFormat?: boolean
}

const failureConfig =
  (setup: FailureSetup, store: Record<string, unknown> | undefined) =>
  (urls: ReadonlyArray<string>, keyHash: string, dir: string) => ({
    server: { listen: "127.0.0.1:0" },
    usage: { file: join(dir, "usage.jsonl") },
    ...(store === undefined ? {} : { store }),
    timeouts: { first_token: "400ms", idle: "400ms" },
    providers: {
      a: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
      b: {
        kind: setup.crossFormat ? "openai" : "anthropic",
        base_url: urls[1],
        api_key_env: UPSTREAM_KEY_ENV,
      },
    },
    routes: {
      main: {
        api: "openai",
        translate: true,
        targets: [
          { provider: "a", model: "claude-sonnet-5-5" },
          { provider: "b", model: setup.crossFormat ? "gpt-5-mini" : "claude-sonnet-5-5" },
        ],
      },
    },
    tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
  })

const sendChat = async (h: Harness, path = "/v1/chat/completions") => {
  const anthropicClient = path === "/v1/messages"
  const response = await fetch(`${h.url}${path}`, {
    method: "POST",
    headers: {
      ...(anthropicClient ? { "x-api-key": h.key } : { authorization: `Bearer ${h.key}` }),
      "content-type": "application/json",
    },
    body: JSON.stringify({
      model: "main",
      max_tokens: 6,
      stream: true,
      messages: [{ role: "user", content: "hello there" }],
    }),
  })
  return { response, text: await response.text() }
}

let redis: RedisHandle | undefined
beforeAll(async () => {
  redis = await startRedis()
}, 15_000)
afterAll(async () => {
  await redis?.stop()
})

for (const storeKind of ["memory", "redis"] as const) {
  describe(`failure table on translated Chat streams (${storeKind} store)`, () => {
    let h: Harness | undefined
    afterEach(async () => {
      await h?.close()
      h = undefined
    })
    const start = async (setup: FailureSetup): Promise<Harness> => {
      const fakes: Array<FakeProviderOptions> = [
        { name: "A", scenario: setup.a },
        { name: "B", scenario: "ok" },
      ]
      const store = storeKind === "redis" ? { kind: "redis", url: redis!.url } : undefined
      h = await startHarness({ fakes, config: failureConfig(setup, store) })
      return h
    }
    const count = (harness: Harness, fake: 0 | 1) => harness.fakes[fake]!.requests().count

    it("a hard budget cuts a translated stream off with a budget_exceeded event in Chat format", async () => {
      const store = storeKind === "redis" ? { kind: "redis", url: redis!.url } : undefined
      h = await startHarness({
        fakes: [{ name: "A", scenario: "max-tokens" }, { name: "B" }],
        config: (urls, keyHash, dir) => ({
          ...failureConfig({ a: "max-tokens" }, store)(urls, keyHash, dir),
          reservation: { output_tokens: 10 },
          routes: {
            main: {
              api: "openai",
              translate: true,
              targets: [{ provider: "a", model: "claude-sonnet-5-5" }],
            },
          },
          tenants: {
            [`cut-${storeKind}`]: {
              keys: [{ id: "ci", sha256: keyHash }],
              routes: "*",
              budgets: { month: { limit_usd: 0.01, mode: "hard" } },
            },
          },
        }),
      })
      const response = await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "main",
          max_tokens: 5000,
          stream: true,
          messages: [{ role: "user", content: "hello" }],
        }),
      })
      const text = await response.text()
      expect(response.status).toBe(200)
      expect(text).toContain("chat.completion.chunk")
      expect(text).toContain('data: {"error":{"type":"budget_exceeded"')
      expect(text).not.toContain("[DONE]")
      const record = h.records().at(-1)!
      expect(record).toMatchObject({
        incomplete: true,
        error: "budget_exceeded",
        endpoint: "/v1/chat/completions",
        upstream_endpoint: "/v1/messages",
      })
      expect(record.output_tokens).toBeLessThan(5000)
      // Approximate: the overshoot is bounded by one extension block and the tokens in flight (10 USD / M output).
      expect(record.cost_micro_usd).toBeLessThan(10_000 + 2_000)
    })

    it("status:529 on A: falls back to B; the client gets B's stream in Chat format", async () => {
      const harness = await start({ a: "status:529" })
      const { response, text } = await sendChat(harness)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-attempts")).toBe("2")
      expect(text).toContain('"content":"tok5 "')
      expect(text).not.toContain("overloaded")
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
      expect(count(harness, 0)).toBe(1)
      expect(harness.fakes[1]!.requests().recent[0]!.path).toBe("/v1/messages")
      expect(harness.records().at(-1)).toMatchObject({
        endpoint: "/v1/chat/completions",
        upstream_endpoint: "/v1/messages",
        provider: "b",
        attempts: 2,
        status: 200,
        output_tokens: 6,
        incomplete: false,
      })
    })

    it("hang-after:2-tokens: a Chat error event after the first bytes, no [DONE], no fallback, record incomplete", async () => {
      const harness = await start({ a: "hang-after:2-tokens" })
      const { response, text } = await sendChat(harness)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("a")
      expect(text).toContain("tok1 ")
      expect(text).toMatch(/data: \{"error":/)
      expect(text).not.toContain("[DONE]")
      expect(count(harness, 1)).toBe(0)
      expect(harness.records().at(-1)).toMatchObject({
        endpoint: "/v1/chat/completions",
        upstream_endpoint: "/v1/messages",
        status: 200,
        incomplete: true,
        error: "idle_timeout",
        // message_start carried the input tokens: 2 ("hello there")
        input_tokens: 2,
      })
    })

    it("reset-after:2-tokens: a Chat error event after the first bytes, no [DONE], record incomplete", async () => {
      const harness = await start({ a: "reset-after:2-tokens" })
      const { response, text } = await sendChat(harness)
      expect(response.status).toBe(200)
      expect(text).toContain("tok1 ")
      expect(text).toMatch(/data: \{"error":/)
      expect(text).not.toContain("[DONE]")
      expect(count(harness, 1)).toBe(0)
      const record = harness.records().at(-1)!
      expect(record.incomplete).toBe(true)
      expect(record.error).toMatch(/^connection_failed/)
      expect(record.upstream_endpoint).toBe("/v1/messages")
    })

    it("malformed-after:2-tokens: a Chat error event after the first bytes; no fallback", async () => {
      const harness = await start({ a: "malformed-after:2-tokens" })
      const { response, text } = await sendChat(harness)
      expect(response.status).toBe(200)
      expect(text).toContain("tok1 ")
      expect(text).toMatch(/data: \{"error":/)
      expect(text).not.toContain("[DONE]")
      expect(count(harness, 1)).toBe(0)
      expect(harness.records().at(-1)).toMatchObject({ incomplete: true, error: "malformed" })
    })

    it("inband-error:overloaded_error before the content: falls back to B as if it were the status", async () => {
      const harness = await start({ a: "inband-error:overloaded_error" })
      const { response, text } = await sendChat(harness)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-attempts")).toBe("2")
      expect(text).not.toContain("overloaded")
      expect(text).not.toContain('"error"')
      expect(text).toContain('"content":"tok5 "')
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
      expect(harness.records().at(-1)).toMatchObject({ provider: "b", incomplete: false, error: null })
    })

    it("cross-format fallback: Anthropic A answers 529, the OpenAI target on B serves the Chat client as is", async () => {
      const harness = await start({ a: "status:529", crossFormat: true })
      const { response, text } = await sendChat(harness)
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(response.headers.get("x-tollgate-model")).toBe("gpt-5-mini")
      expect(text).toContain('"content":"tok5 "')
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
      expect(harness.fakes[0]!.requests().recent[0]!.path).toBe("/v1/messages")
      expect(harness.fakes[1]!.requests().recent[0]!.path).toBe("/v1/chat/completions")
      expect(harness.records().at(-1)).toMatchObject({
        endpoint: "/v1/chat/completions",
        upstream_endpoint: "/v1/chat/completions",
        provider: "b",
        model: "gpt-5-mini",
        attempts: 2,
        input_tokens: 2,
        output_tokens: 6,
        cost_micro_usd: gptCost(2, 6),
        incomplete: false,
      })
    })

    it("cross-format fallback for an Anthropic client: A (as is) answers 529, B's Chat stream is translated", async () => {
      const harness = await start({ a: "status:529", crossFormat: true })
      const { response, text } = await sendChat(harness, "/v1/messages")
      expect(response.status).toBe(200)
      expect(response.headers.get("x-tollgate-provider")).toBe("b")
      expect(text).toContain("event: message_start")
      expect(text).toContain('"text":"tok5 "')
      expect(text).toContain("event: message_stop")
      expect(harness.fakes[1]!.requests().recent[0]!.path).toBe("/v1/chat/completions")
      expect(harness.records().at(-1)).toMatchObject({
        endpoint: "/v1/messages",
        upstream_endpoint: "/v1/chat/completions",
        provider: "b",
        attempts: 2,
        input_tokens: 2,
        output_tokens: 6,
        cost_micro_usd: gptCost(2, 6),
        incomplete: false,
      })
    })
  })
}
