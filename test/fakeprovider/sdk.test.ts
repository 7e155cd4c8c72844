import Anthropic from "@anthropic-ai/sdk"
import { AnthropicVertex } from "@anthropic-ai/vertex-sdk"
import { OAuth2Client } from "google-auth-library"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText } from "../../fakeprovider/tokens.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "sdk" })
})
afterAll(() => fake.close())

// "Say hello, please." = Say, hello, ",", please, "." = 5 tokens; system "Be brief." = 3 tokens.
const prompt = "Say hello, please."

const anthropic = () => new Anthropic({ baseURL: fake.url, apiKey: "sk-test", maxRetries: 0 })

const openai = () => new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test", maxRetries: 0 })

const vertex = () => {
  const authClient = new OAuth2Client()
  authClient.setCredentials({ access_token: "static-token" })
  return new AnthropicVertex({
    baseURL: `${fake.url}/v1`,
    projectId: "proj",
    region: "us-east5",
    authClient,
    maxRetries: 0,
  })
}

describe("the Anthropic SDK", () => {
  it("reads a non-stream message with the deterministic text and usage", async () => {
    const message = await anthropic().messages.create({
      model: "claude-test",
      max_tokens: 100,
      system: "Be brief.",
      messages: [{ role: "user", content: prompt }],
    })
    expect(message.id).toMatch(/^msg_/)
    expect(message.model).toBe("claude-test")
    expect(message.content).toEqual([{ type: "text", text: outputText(16) }])
    expect(message.stop_reason).toBe("end_turn")
    expect(message.usage).toEqual({
      input_tokens: 8,
      output_tokens: 16,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    })
  })

  it("reads a stream through messages.stream with the final message and usage", async () => {
    const stream = anthropic().messages.stream({
      model: "claude-test",
      max_tokens: 5,
      messages: [{ role: "user", content: [{ type: "text", text: prompt }] }],
    })
    const deltas: Array<string> = []
    stream.on("text", (text) => deltas.push(text))
    const message = await stream.finalMessage()
    expect(deltas).toEqual(["tok0 ", "tok1 ", "tok2 ", "tok3 ", "tok4 "])
    expect(message.content).toEqual([{ type: "text", text: outputText(5) }])
    expect(message.stop_reason).toBe("max_tokens")
    expect(message.usage.input_tokens).toBe(5)
    expect(message.usage.output_tokens).toBe(5)
  })

  it("reads the raw event sequence of stream: true", async () => {
    const stream = await anthropic().messages.create({
      model: "claude-test",
      max_tokens: 2,
      stream: true,
      messages: [{ role: "user", content: prompt }],
    })
    const types: Array<string> = []
    for await (const event of stream) types.push(event.type)
    expect(types).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ])
  })

  it("counts tokens", async () => {
    const count = await anthropic().messages.countTokens({
      model: "claude-test",
      messages: [{ role: "user", content: prompt }],
    })
    expect(count.input_tokens).toBe(5)
  })

  it("sees a status scenario as an APIError with the error type and retry-after", async () => {
    const error = await anthropic()
      .messages.create(
        { model: "claude-test", max_tokens: 10, messages: [{ role: "user", content: prompt }] },
        { headers: { "x-fake-scenario": "status:529" } },
      )
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    const apiError = error as InstanceType<typeof Anthropic.APIError>
    expect(apiError.status).toBe(529)
    expect(apiError.type).toBe("overloaded_error")
    expect(apiError.requestID).toMatch(/^req_/)
  })

  it("sees an in-band stream error as an APIError", async () => {
    const stream = anthropic().messages.stream(
      { model: "claude-test", max_tokens: 10, messages: [{ role: "user", content: prompt }] },
      { headers: { "x-fake-scenario": "inband-error:overloaded_error" } },
    )
    const error = await stream.finalMessage().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe("overloaded_error")
  })
})

describe("the OpenAI SDK", () => {
  it("reads a non-stream completion with the deterministic text and usage", async () => {
    const completion = await openai().chat.completions.create({
      model: "gpt-test",
      max_completion_tokens: 3,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: prompt }] },
      ],
    })
    expect(completion.id).toMatch(/^chatcmpl-/)
    expect(completion.model).toBe("gpt-test")
    expect(completion.choices[0]?.message.content).toBe(outputText(3))
    expect(completion.choices[0]?.finish_reason).toBe("length")
    expect(completion.usage).toEqual({ prompt_tokens: 8, completion_tokens: 3, total_tokens: 11 })
  })

  it("streams chunks and a final usage chunk with include_usage", async () => {
    const stream = await openai().chat.completions.create({
      model: "gpt-test",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: prompt }],
    })
    let text = ""
    const finishReasons: Array<string> = []
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ""
      const finish = chunk.choices[0]?.finish_reason
      if (finish) finishReasons.push(finish)
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe(outputText(16))
    expect(finishReasons).toEqual(["stop"])
    expect(usage).toEqual({ prompt_tokens: 5, completion_tokens: 16, total_tokens: 21 })
  })

  it("sends no usage chunk when include_usage is not set", async () => {
    const stream = await openai().chat.completions.create({
      model: "gpt-test",
      stream: true,
      max_tokens: 2,
      messages: [{ role: "user", content: prompt }],
    })
    const chunks: Array<OpenAI.ChatCompletionChunk> = []
    for await (const chunk of stream) chunks.push(chunk)
    expect(chunks).toHaveLength(4)
    expect(chunks.every((chunk) => chunk.usage == null && chunk.choices.length === 1)).toBe(true)
  })

  it("sees a 429 with retry-after as a RateLimitError", async () => {
    const error = await openai()
      .chat.completions.create(
        { model: "gpt-test", messages: [{ role: "user", content: prompt }] },
        { headers: { "x-fake-scenario": "status:429:7" } },
      )
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.RateLimitError)
    const apiError = error as InstanceType<typeof OpenAI.RateLimitError>
    expect(apiError.headers.get("retry-after")).toBe("7")
    expect(apiError.type).toBe("rate_limit_error")
  })
})

describe("the Vertex SDK", () => {
  it("reads a non-stream rawPredict message named after the URL's model", async () => {
    fake.reset()
    const message = await vertex().messages.create({
      model: "claude-test@20261001",
      max_tokens: 4,
      messages: [{ role: "user", content: prompt }],
    })
    expect(message.model).toBe("claude-test@20261001")
    expect(message.content).toEqual([{ type: "text", text: outputText(4) }])
    expect(message.usage.input_tokens).toBe(5)
    expect(message.usage.output_tokens).toBe(4)
    const [request] = fake.requests().recent
    expect(request?.path).toBe(
      "/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-test@20261001:rawPredict",
    )
    expect(request?.headers["authorization"]).toBe("Bearer static-token")
    expect(request?.body).toMatchObject({ anthropic_version: expect.any(String) })
    expect(request?.body).not.toHaveProperty("model")
  })

  it("streams through streamRawPredict", async () => {
    const stream = vertex().messages.stream({
      model: "claude-test@20261001",
      max_tokens: 3,
      messages: [{ role: "user", content: prompt }],
    })
    const message = await stream.finalMessage()
    expect(message.content).toEqual([{ type: "text", text: outputText(3) }])
    expect(message.usage.output_tokens).toBe(3)
    expect(fake.requests().recent.at(-1)?.path).toMatch(/:streamRawPredict$/)
  })

  it("counts tokens on the count-tokens:rawPredict path", async () => {
    const count = await vertex().messages.countTokens({
      model: "claude-test@20261001",
      messages: [{ role: "user", content: prompt }],
    })
    expect(count.input_tokens).toBe(5)
    expect(fake.requests().recent.at(-1)?.path).toMatch(/models\/count-tokens:rawPredict$/)
  })
})
