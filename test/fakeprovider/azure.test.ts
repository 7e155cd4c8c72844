import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText } from "../../fakeprovider/tokens.js"
import {
  chatBody,
  embeddingsBody,
  post,
  postWith,
  readUntil,
  responsesBody,
  sseData,
  stillPending,
  expectHangBeforeHeaders,
} from "./helpers.js"

const DEPLOYMENT = "my-gpt5-mini"
const KEY = { "api-key": "azure-key" }

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "azure" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

/** POSTs to an Azure v1 path with an `api-key`. */
const azurePost = postWith(() => fake, KEY, "/openai/v1/")

const contentFilterError = {
  error: {
    message: expect.stringMatching(
      /^The response was filtered due to the prompt triggering Azure OpenAI's content management policy\./,
    ),
    type: null,
    param: "prompt",
    code: "content_filter",
    status: 400,
    innererror: {
      code: "ResponsibleAIPolicyViolation",
      content_filter_result: {
        hate: { filtered: true, severity: "high" },
        self_harm: { filtered: false, severity: "safe" },
        sexual: { filtered: false, severity: "safe" },
        violence: { filtered: false, severity: "safe" },
      },
    },
  },
}

describe("Azure OpenAI v1 api-key", () => {
  it("a missing, empty or 'wrong' api-key is 401 with Azure's body", async () => {
    for (const headers of [{}, { "api-key": "" }, { "api-key": "wrong" }, { authorization: "Bearer sk-x" }]) {
      const response = await post(fake, "/openai/v1/chat/completions", chatBody(), { headers })
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual({
        error: {
          code: "401",
          message:
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for " +
            "an active subscription and use a correct regional API endpoint for your resource.",
        },
      })
    }
  })

  it("the api-key is checked before the scenario applies", async () => {
    const response = await post(fake, "/openai/v1/chat/completions", chatBody(), { scenario: "status:429" })
    expect(response.status).toBe(401)
    await response.text()
  })
})

describe("Azure OpenAI v1 endpoints", () => {
  it("chat completions: the OpenAI answer with the deployment as model, logged with its path and key", async () => {
    const response = await azurePost("chat/completions", chatBody({ model: DEPLOYMENT, max_tokens: 3 }))
    expect(response.status).toBe(200)
    expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    expect(response.headers.get("apim-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    const completion = (await response.json()) as Record<string, unknown>
    const direct = (await (
      await post(fake, "/v1/chat/completions", chatBody({ model: DEPLOYMENT, max_tokens: 3 }))
    ).json()) as Record<string, unknown>
    expect(completion).toEqual({ ...direct, id: completion["id"], created: completion["created"] })
    expect(completion["model"]).toBe(DEPLOYMENT)
    const logged = fake.requests().recent[0]!
    expect(logged.path).toBe("/openai/v1/chat/completions")
    expect(logged.headers["api-key"]).toBe("azure-key")
  })

  it("the OpenAI SDK reads chat, a chat stream, responses and embeddings from /openai/v1", async () => {
    const client = new OpenAI({
      baseURL: `${fake.url}/openai/v1`,
      apiKey: "unused",
      defaultHeaders: KEY,
      maxRetries: 0,
    })
    const chat = await client.chat.completions.create({
      model: DEPLOYMENT,
      max_tokens: 4,
      messages: [{ role: "user", content: "hi" }],
    })
    expect(chat.choices[0]!.message.content).toBe(outputText(4))
    const stream = await client.chat.completions.create({
      model: DEPLOYMENT,
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hi" }],
    })
    let text = ""
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ""
      usage = chunk.usage ?? usage
    }
    expect(text).toBe(outputText(3))
    expect(usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 3 })
    const response = await client.responses.create({
      model: DEPLOYMENT,
      input: "hello",
      max_output_tokens: 2,
    })
    expect(response.output_text).toBe(outputText(2))
    expect(response.model).toBe(DEPLOYMENT)
    const embeddings = await client.embeddings.create({ model: "my-embeddings", input: ["one", "two"] })
    expect(embeddings.data).toHaveLength(2)
    expect(fake.requests().recent.map((request) => request.path)).toEqual([
      "/openai/v1/chat/completions",
      "/openai/v1/chat/completions",
      "/openai/v1/responses",
      "/openai/v1/embeddings",
    ])
  })
})

describe("Azure content-filter", () => {
  it("a non-stream chat completion, a Responses request (stream or not) and embeddings get Azure's 400", async () => {
    for (const [path, body] of [
      ["chat/completions", chatBody()],
      ["responses", responsesBody()],
      ["responses", responsesBody({ stream: true })],
      ["embeddings", embeddingsBody()],
    ] as const) {
      const response = await azurePost(path, body, { scenario: "content-filter" })
      expect([path, response.status]).toEqual([path, 400])
      expect(await response.json()).toEqual(contentFilterError)
    }
  })

  it("the OpenAI SDK reads it as a BadRequestError with code content_filter", async () => {
    const client = new OpenAI({
      baseURL: `${fake.url}/openai/v1`,
      apiKey: "x",
      defaultHeaders: KEY,
      maxRetries: 0,
    })
    const error = (await client.chat.completions
      .create(
        { model: DEPLOYMENT, messages: [{ role: "user", content: "hi" }] },
        { headers: { "x-fake-scenario": "content-filter" } },
      )
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error.code).toBe("content_filter")
  })

  it("a chat stream sends its first two tokens, then a finish_reason content_filter chunk and [DONE]", async () => {
    const response = await azurePost(
      "chat/completions",
      chatBody({ stream: true, max_tokens: 6, stream_options: { include_usage: true } }),
      { scenario: "content-filter" },
    )
    expect(response.status).toBe(200)
    const data = sseData(await response.text())
    expect(data.at(-1)).toBe("[DONE]")
    const chunks = data.slice(0, -1).map((payload) => JSON.parse(payload) as Record<string, unknown>)
    const choices = chunks.map((chunk) => (chunk["choices"] as Array<Record<string, unknown>>)[0])
    expect(choices.map((choice) => (choice?.["delta"] as { content?: string } | undefined)?.content)).toEqual(
      ["", "tok0 ", "tok1 ", undefined, undefined],
    )
    expect(choices[3]).toMatchObject({ finish_reason: "content_filter" })
    expect(chunks[4]).toMatchObject({ choices: [], usage: { completion_tokens: 2 } })
  })

  it("the other formats ignore content-filter", async () => {
    const chat = await post(fake, "/v1/chat/completions", chatBody(), { scenario: "content-filter" })
    expect(chat.status).toBe(200)
    await chat.text()
    const messages = await post(
      fake,
      "/v1/messages",
      { model: "m", max_tokens: 2, messages: [] },
      { scenario: "content-filter" },
    )
    expect(messages.status).toBe(200)
    await messages.text()
  })
})

describe("Azure scenarios", () => {
  it("status:429:7 answers the OpenAI error body with retry-after", async () => {
    const response = await azurePost("chat/completions", chatBody(), { scenario: "status:429:7" })
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("7")
    expect(await response.json()).toEqual({
      error: { message: "Rate limited", type: "rate_limit_error", param: null, code: null },
    })
  })

  it("an x-fake-scenario that does not parse is a 400 in the OpenAI format", async () => {
    const response = await azurePost("chat/completions", chatBody(), { scenario: "explode" })
    expect(response.status).toBe(400)
    const body = (await response.json()) as { error: { type: string; message: string } }
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("explode")
  })

  it("hang-before-headers sends nothing until the client aborts", async () => {
    await expectHangBeforeHeaders(fake, (signal) =>
      azurePost("responses", responsesBody(), { scenario: "hang-before-headers", signal }),
    )
  })

  it("hang-after:2-tokens streams two tokens, then waits", async () => {
    const controller = new AbortController()
    const response = await azurePost("chat/completions", chatBody({ stream: true }), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    const { text, reader } = await readUntil(response, (t) => t.includes(`"tok1 "`))
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    expect(sseData(text)).toHaveLength(3)
    controller.abort()
  })

  it("reset-after:2-tokens drops the connection", async () => {
    const response = await azurePost("chat/completions", chatBody({ stream: true }), {
      scenario: "reset-after:2-tokens",
    })
    expect(await response.text().catch((error: unknown) => error)).toBeInstanceOf(Error)
  })

  it("malformed-after:2-tokens ends with data that is not JSON and no [DONE]", async () => {
    const response = await azurePost("chat/completions", chatBody({ stream: true }), {
      scenario: "malformed-after:2-tokens",
    })
    const data = sseData(await response.text())
    expect(data).toHaveLength(4)
    expect(() => JSON.parse(data[3]!)).toThrow()
  })

  it("inband-error on a chat stream sends the role chunk and an error payload", async () => {
    const response = await azurePost("chat/completions", chatBody({ stream: true }), {
      scenario: "inband-error:server_error",
    })
    const data = sseData(await response.text())
    expect(JSON.parse(data.at(-1)!)).toMatchObject({ error: { type: "server_error" } })
  })

  it("no-usage and tokens:N", async () => {
    const plain = (await (
      await azurePost("chat/completions", chatBody(), { scenario: "no-usage,tokens:5" })
    ).json()) as Record<string, unknown>
    expect(plain["usage"]).toBeUndefined()
    expect((plain["choices"] as Array<{ message: { content: string } }>)[0]!.message.content).toBe(
      outputText(5),
    )
  })

  it("--kind azure serves only the Azure paths", async () => {
    const only = await startFakeProvider({ kind: "azure" })
    try {
      const other = await post(only, "/v1/chat/completions", chatBody())
      expect(other.status).toBe(404)
      expect(((await other.json()) as { error: { type: string } }).error.type).toBe("not_found_error")
      const ok = await post(only, "/openai/v1/chat/completions", chatBody(), { headers: KEY })
      expect(ok.status).toBe(200)
      expect(ok.headers.get("x-fake-kind")).toBe("azure")
      await ok.text()
    } finally {
      await only.close()
    }
  })
})
