import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText } from "../../fakeprovider/tokens.js"
import { chatBody, messagesBody, post, readUntil, responsesBody, sseEvents, stillPending } from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "tools" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

const anthropic = () => new Anthropic({ baseURL: fake.url, apiKey: "sk-test", maxRetries: 0 })
const openai = () => new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test", maxRetries: 0 })

const query = (tokens: number): string => JSON.stringify({ query: outputText(tokens) })
const parameters = { type: "object" as const, properties: { query: { type: "string" } } }

describe("a tool loop through the official SDKs", () => {
  it("Anthropic: a streamed tool_use, then text once the tool_result is sent", async () => {
    const tools: Array<Anthropic.Tool> = [
      { name: "search", description: "Search.", input_schema: parameters },
    ]
    const messages: Array<Anthropic.MessageParam> = [{ role: "user", content: "Find it." }]
    const first = await anthropic()
      .messages.stream({ model: "claude-test", max_tokens: 5, tools, messages })
      .finalMessage()
    expect(first.stop_reason).toBe("tool_use")
    expect(first.content).toEqual([
      {
        type: "tool_use",
        id: expect.stringMatching(/^toolu_/),
        name: "search",
        input: { query: outputText(5) },
      },
    ])
    expect(first.usage.output_tokens).toBe(5)
    const use = first.content[0] as Anthropic.ToolUseBlock
    const second = await anthropic().messages.create({
      model: "claude-test",
      max_tokens: 5,
      tools,
      messages: [
        ...messages,
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "found" }] },
      ],
    })
    expect(second.stop_reason).toBe("max_tokens")
    expect(second.content).toEqual([{ type: "text", text: outputText(5) }])
  })

  it("Chat Completions: a streamed tool call, then text once the tool message is sent", async () => {
    const tools: Array<OpenAI.ChatCompletionTool> = [
      { type: "function", function: { name: "search", parameters } },
    ]
    const messages: Array<OpenAI.ChatCompletionMessageParam> = [{ role: "user", content: "Find it." }]
    const first = await openai()
      .chat.completions.stream({ model: "gpt-test", max_completion_tokens: 3, tools, messages })
      .finalChatCompletion()
    const choice = first.choices[0]
    expect(choice?.finish_reason).toBe("tool_calls")
    const call = choice?.message.tool_calls?.[0]
    expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: "function" })
    expect(call?.type === "function" ? call.function : undefined).toMatchObject({
      name: "search",
      arguments: query(3),
    })
    const second = await openai().chat.completions.create({
      model: "gpt-test",
      tools,
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: choice?.message.tool_calls ?? [] },
        { role: "tool", tool_call_id: call?.id ?? "", content: "found" },
      ],
    })
    expect(second.choices[0]?.finish_reason).toBe("stop")
    expect(second.choices[0]?.message.content).toBe(outputText(16))
  })

  it("Responses: a streamed function_call, then text once the function_call_output is sent", async () => {
    const tools: Array<OpenAI.Responses.Tool> = [
      { type: "function", name: "search", parameters, strict: false },
    ]
    const first = await openai()
      .responses.stream({ model: "gpt-test", input: "Find it.", tools })
      .finalResponse()
    expect(first.status).toBe("completed")
    const call = first.output[0]
    expect(call).toMatchObject({
      type: "function_call",
      id: expect.stringMatching(/^fc_/),
      call_id: expect.stringMatching(/^call_/),
      name: "search",
      arguments: query(16),
      status: "completed",
    })
    expect(first.usage?.output_tokens).toBe(16)
    const second = await openai().responses.create({
      model: "gpt-test",
      tools,
      input: [
        { role: "user", content: "Find it." },
        ...(first.output as Array<OpenAI.Responses.ResponseFunctionToolCall>),
        {
          type: "function_call_output",
          call_id: call?.type === "function_call" ? call.call_id : "",
          output: "found",
        },
      ],
    })
    expect(second.output_text).toBe(outputText(16))
  })
})

describe("tool calls on the wire", () => {
  it("answers JSON with one call of the first tool on each API", async () => {
    const message = (await (
      await post(
        fake,
        "/v1/messages",
        messagesBody({ tools: [{ name: "a", input_schema: {} }, { name: "b" }] }),
      )
    ).json()) as Record<string, unknown>
    expect(message).toMatchObject({
      stop_reason: "tool_use",
      content: [{ type: "tool_use", name: "a", input: { query: outputText(10) } }],
      usage: { output_tokens: 10 },
    })
    const vertex = "/v1/projects/p/locations/r/publishers/anthropic/models/claude-x:streamRawPredict"
    const vertexBody = {
      anthropic_version: "vertex-2023-10-16",
      max_tokens: 2,
      messages: [],
      tools: [{ name: "v" }],
    }
    const vertexText = await (await post(fake, vertex, vertexBody)).text()
    expect(vertexText).toContain(`"content_block":{"type":"tool_use"`)
    expect(vertexText).toContain(`"stop_reason":"tool_use"`)
    const chat = (await (
      await post(
        fake,
        "/v1/chat/completions",
        chatBody({ tools: [{ type: "function", function: { name: "a" } }] }),
      )
    ).json()) as Record<string, unknown>
    expect(chat).toMatchObject({
      choices: [
        {
          finish_reason: "tool_calls",
          message: {
            content: null,
            tool_calls: [{ type: "function", function: { name: "a", arguments: query(16) } }],
          },
        },
      ],
      usage: { completion_tokens: 16 },
    })
    const response = (await (
      await post(fake, "/v1/responses", responsesBody({ tools: [{ type: "function", name: "a" }] }))
    ).json()) as Record<string, unknown>
    expect(response).toMatchObject({ status: "completed", output: [{ type: "function_call", name: "a" }] })
  })

  it("answers text when tool_choice is none, and calls the tool tool_choice names", async () => {
    const tools = [{ name: "a" }, { name: "b" }]
    const none = (await (
      await post(fake, "/v1/messages", messagesBody({ tools, tool_choice: { type: "none" } }))
    ).json()) as Record<string, unknown>
    expect(none).toMatchObject({ stop_reason: "max_tokens", content: [{ type: "text" }] })
    const chatNone = (await (
      await post(
        fake,
        "/v1/chat/completions",
        chatBody({ tools: [{ type: "function", function: { name: "a" } }], tool_choice: "none" }),
      )
    ).json()) as { choices: Array<{ finish_reason: string }> }
    expect(chatNone.choices[0]?.finish_reason).toBe("stop")
    const named = (await (
      await post(fake, "/v1/messages", messagesBody({ tools, tool_choice: { type: "tool", name: "b" } }))
    ).json()) as Record<string, unknown>
    expect(named).toMatchObject({ content: [{ type: "tool_use", name: "b" }] })
  })

  it("caps the arguments at 16 tokens and gives the same ids for the same request", async () => {
    const body = responsesBody({ tools: [{ type: "function", name: "a" }] })
    const read = async () =>
      (await (await post(fake, "/v1/responses", body, { scenario: "tokens:100" })).json()) as {
        output: Array<{ id: string; call_id: string; arguments: string }>
        usage: { output_tokens: number }
      }
    const [one, two] = [await read(), await read()]
    expect(one.output[0]?.arguments).toBe(query(16))
    expect(one.usage.output_tokens).toBe(16)
    expect([two.output[0]?.id, two.output[0]?.call_id]).toEqual([one.output[0]?.id, one.output[0]?.call_id])
  })

  it("streams Responses function-call events in the real order", async () => {
    const text = await (
      await post(
        fake,
        "/v1/responses",
        responsesBody({ stream: true, max_output_tokens: 2, tools: [{ type: "function", name: "a" }] }),
      )
    ).text()
    expect(sseEvents(text)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      ...Array.from({ length: 4 }, () => "response.function_call_arguments.delta"),
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ])
  })

  it("counts argument tokens in the after-N-tokens scenarios", async () => {
    const controller = new AbortController()
    const response = await post(
      fake,
      "/v1/messages",
      messagesBody({ stream: true, tools: [{ name: "a" }] }),
      {
        scenario: "hang-after:2-tokens",
        signal: controller.signal,
      },
    )
    const { text, reader } = await readUntil(
      response,
      (t) => t.includes(`"partial_json":"tok1 "`) && t.endsWith("\n\n"),
    )
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    expect(text.split(`"type":"input_json_delta"`)).toHaveLength(4)
    controller.abort()
  })
})
