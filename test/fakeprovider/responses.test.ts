import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText, responsesInputTokens } from "../../fakeprovider/tokens.js"
import { lastRequest, post, responsesBody, sseData, sseEvents } from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "responses" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

const openai = () => new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test", maxRetries: 0 })

// "Say hello, please." = 5 tokens; instructions "Be brief." = 3 tokens.
const prompt = "Say hello, please."

const textEvents = (deltas: number): Array<string> => [
  "response.created",
  "response.in_progress",
  "response.output_item.added",
  "response.content_part.added",
  ...Array.from({ length: deltas }, () => "response.output_text.delta"),
  "response.output_text.done",
  "response.content_part.done",
  "response.output_item.done",
]

describe("POST /v1/responses as JSON", () => {
  it("answers a completed response with one message, usage and the request's settings", async () => {
    const response = await post(
      fake,
      "/v1/responses",
      responsesBody({ instructions: "Be brief.", input: prompt }),
    )
    expect(response.headers.get("x-request-id")).toMatch(/^req_/)
    const json = (await response.json()) as Record<string, unknown>
    expect(json).toMatchObject({
      object: "response",
      status: "completed",
      model: "gpt-test",
      error: null,
      incomplete_details: null,
      instructions: "Be brief.",
      parallel_tool_calls: true,
      tool_choice: "auto",
      tools: [],
      output: [
        {
          type: "message",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: outputText(16), annotations: [] }],
        },
      ],
      usage: {
        input_tokens: 8,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 16,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 24,
      },
    })
    expect(json["id"]).toMatch(/^resp_/)
    expect((json["output"] as Array<{ id: string }>)[0]?.id).toMatch(/^msg_/)
    expect(json["created_at"]).toEqual(expect.any(Number))
  })

  it("stops at max_output_tokens with status incomplete", async () => {
    const json = (await (
      await post(fake, "/v1/responses", responsesBody({ max_output_tokens: 3 }))
    ).json()) as Record<string, unknown>
    expect(json).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      max_output_tokens: 3,
      output: [{ status: "incomplete", content: [{ text: outputText(3) }] }],
      usage: { output_tokens: 3 },
    })
  })

  it("rejects a body without a model with a 400 OpenAI error", async () => {
    const response = await post(fake, "/v1/responses", { input: "hi" })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: {
        message: "Missing required parameter: 'model'.",
        type: "invalid_request_error",
        param: null,
        code: null,
      },
    })
  })

  it("is logged in /_fake/requests like every request", async () => {
    await (await post(fake, "/v1/responses", responsesBody())).text()
    expect(lastRequest(fake)).toMatchObject({ method: "POST", path: "/v1/responses", body: responsesBody() })
  })
})

describe("POST /v1/responses streaming", () => {
  it("sends the real event sequence with consecutive sequence numbers and no [DONE]", async () => {
    const text = await (
      await post(fake, "/v1/responses", responsesBody({ stream: true, max_output_tokens: 20 }))
    ).text()
    expect(sseEvents(text)).toEqual([...textEvents(16), "response.completed"])
    const data = sseData(text)
    expect(data).not.toContain("[DONE]")
    const events = data.map((payload) => JSON.parse(payload) as Record<string, unknown>)
    expect(events.map((event) => event["sequence_number"])).toEqual(events.map((_, index) => index))
    expect(events.map((event) => event["type"])).toEqual(sseEvents(text))
    expect(events[0]).toMatchObject({ response: { status: "in_progress", output: [], usage: null } })
    expect(events.at(-1)).toMatchObject({
      response: { status: "completed", usage: { input_tokens: 4, output_tokens: 16, total_tokens: 20 } },
    })
  })

  it("ends with response.incomplete when the output limit was reached", async () => {
    const text = await (
      await post(fake, "/v1/responses", responsesBody({ stream: true, max_output_tokens: 2 }))
    ).text()
    expect(sseEvents(text)).toEqual([...textEvents(2), "response.incomplete"])
    expect(JSON.parse(sseData(text).at(-1) ?? "")).toMatchObject({
      response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } },
    })
  })
})

describe("the OpenAI SDK on /v1/responses", () => {
  it("reads responses.create with output_text and usage", async () => {
    const response = await openai().responses.create({
      model: "gpt-test",
      instructions: "Be brief.",
      input: prompt,
    })
    expect(response.output_text).toBe(outputText(16))
    expect(response.status).toBe("completed")
    expect(response.usage).toMatchObject({ input_tokens: 8, output_tokens: 16, total_tokens: 24 })
  })

  it("iterates responses.create({stream: true}) event by event", async () => {
    const stream = await openai().responses.create({
      model: "gpt-test",
      input: prompt,
      stream: true,
      max_output_tokens: 30,
    })
    const types: Array<string> = []
    let text = ""
    let usage: OpenAI.Responses.ResponseUsage | undefined
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "response.output_text.delta") text += event.delta
      if (event.type === "response.completed") usage = event.response.usage
    }
    expect(types).toEqual([...textEvents(16), "response.completed"])
    expect(text).toBe(outputText(16))
    expect(usage).toMatchObject({ input_tokens: 5, output_tokens: 16 })
  })

  it("accumulates responses.stream() into finalResponse()", async () => {
    const stream = openai().responses.stream({
      model: "gpt-test",
      input: [{ role: "user", content: prompt }],
      max_output_tokens: 4,
    })
    const deltas: Array<string> = []
    stream.on("response.output_text.delta", (event) => deltas.push(event.delta))
    const response = await stream.finalResponse()
    expect(deltas).toEqual(["tok0 ", "tok1 ", "tok2 ", "tok3 "])
    expect(response.output_text).toBe(outputText(4))
    expect(response.status).toBe("incomplete")
    expect(response.usage?.output_tokens).toBe(4)
  })
})

describe("responsesInputTokens", () => {
  it("counts instructions, string input, message strings, text parts and function_call_output", () => {
    expect(responsesInputTokens({ instructions: "Be brief.", input: "one two" })).toBe(5)
    const body = {
      input: [
        { role: "user", content: "a b" },
        {
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: "c." }, { type: "input_image" }],
        },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "d" }] },
        { type: "function_call", call_id: "call_1", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "call_1", output: "e f" },
      ],
    }
    expect(responsesInputTokens(body)).toBe(7)
  })
})
