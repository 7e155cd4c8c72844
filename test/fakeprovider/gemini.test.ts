import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { signatureFor } from "../../fakeprovider/gemini.js"
import { outputText } from "../../fakeprovider/tokens.js"
import {
  lastRequest,
  messagesBody,
  post,
  postWith,
  readUntil,
  stillPending,
  until,
  expectHangBeforeHeaders,
} from "./helpers.js"

const MODEL = "gemini-2.5-flash"
const generatePath = `/v1beta/models/${MODEL}:generateContent`
const streamPath = `/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`
const vertexBase = `/v1/projects/my-project/locations/us-central1/publishers/google/models/${MODEL}`
const KEY = { "x-goog-api-key": "gemini-key" }

// "be brief" = 2 tokens; "hello gemini, how are you" = 6 tokens.
const geminiBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  systemInstruction: { parts: [{ text: "be brief" }] },
  contents: [{ role: "user", parts: [{ text: "hello gemini, how are you" }] }],
  ...extra,
})

const WEATHER = {
  functionDeclarations: [
    { name: "get_weather", description: "The weather", parameters: { type: "object" } },
    { name: "get_time", description: "The time", parameters: { type: "object" } },
  ],
}

interface Usage {
  promptTokenCount: number
  candidatesTokenCount: number
  totalTokenCount: number
  thoughtsTokenCount?: number
  cachedContentTokenCount?: number
}

interface GenerateContentResponse {
  candidates: Array<{
    content: { role: string; parts: Array<{ text?: string; functionCall?: { name: string; args: unknown } }> }
    finishReason?: string
    index: number
  }>
  usageMetadata?: Usage
  modelVersion: string
  responseId: string
}

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "gemini" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

const geminiPost = postWith(() => fake, KEY)

/** The SSE events of a Gemini stream: each `data: …\r\n\r\n`; throws when the framing is not CRLF. */
const sseEvents = (text: string): Array<string> => {
  const events = text.split("\r\n\r\n")
  expect(events.pop()).toBe("")
  return events.map((event) => {
    expect(event.startsWith("data: ")).toBe(true)
    return event.slice("data: ".length)
  })
}

const streamResponses = async (response: Response): Promise<Array<GenerateContentResponse>> =>
  sseEvents(await response.text()).map((data) => JSON.parse(data) as GenerateContentResponse)

const textOf = (responses: ReadonlyArray<GenerateContentResponse>): string =>
  responses.map((r) => r.candidates[0]!.content.parts.map((part) => part.text ?? "").join("")).join("")

describe("Gemini credentials", () => {
  it("no API key is 403 PERMISSION_DENIED; 'wrong' is 400 API_KEY_INVALID; ?key= works too", async () => {
    const missing = await post(fake, generatePath, geminiBody())
    expect(missing.status).toBe(403)
    const body = (await missing.json()) as { error: Record<string, unknown> }
    expect(body.error).toEqual({
      code: 403,
      message: expect.stringMatching(/^Method doesn't allow unregistered callers/),
      status: "PERMISSION_DENIED",
    })
    const wrong = await post(fake, generatePath, geminiBody(), { headers: { "x-goog-api-key": "wrong" } })
    expect(wrong.status).toBe(400)
    expect(await wrong.json()).toMatchObject({
      error: { code: 400, status: "INVALID_ARGUMENT", details: [{ reason: "API_KEY_INVALID" }] },
    })
    const query = await post(fake, `${generatePath}?key=abc`, geminiBody())
    expect(query.status).toBe(200)
    await query.text()
  })

  it("Vertex's publishers/google paths need a bearer token", async () => {
    const missing = await post(fake, `${vertexBase}:generateContent`, geminiBody())
    expect(missing.status).toBe(401)
    expect(await missing.json()).toMatchObject({ error: { code: 401, status: "UNAUTHENTICATED" } })
    const ok = await post(fake, `${vertexBase}:generateContent`, geminiBody(), {
      headers: { authorization: "Bearer ya29.token" },
    })
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as GenerateContentResponse).modelVersion).toBe(MODEL)
    const stream = await post(fake, `${vertexBase}:streamGenerateContent?alt=sse`, geminiBody(), {
      headers: { authorization: "Bearer ya29.token" },
    })
    expect(stream.headers.get("content-type")).toBe("text/event-stream")
    expect(textOf(await streamResponses(stream))).toBe(outputText(16))
  })
})

describe("Gemini generateContent", () => {
  it("answers the GenerateContentResponse JSON with text, STOP and usageMetadata", async () => {
    const response = await geminiPost(generatePath, geminiBody())
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/json; charset=UTF-8")
    const answer = (await response.json()) as GenerateContentResponse
    expect(answer).toEqual({
      candidates: [
        { content: { parts: [{ text: outputText(16) }], role: "model" }, finishReason: "STOP", index: 0 },
      ],
      usageMetadata: {
        promptTokenCount: 8,
        candidatesTokenCount: 16,
        totalTokenCount: 24,
        promptTokensDetails: [{ modality: "TEXT", tokenCount: 8 }],
      },
      modelVersion: MODEL,
      responseId: expect.stringMatching(/^[0-9A-Za-z]{24}$/),
    })
    expect(lastRequest(fake).path).toBe(generatePath)
  })

  it("honours maxOutputTokens like max_tokens: MAX_TOKENS at the limit", async () => {
    const answer = (await (
      await geminiPost(generatePath, geminiBody({ generationConfig: { maxOutputTokens: 3 } }))
    ).json()) as GenerateContentResponse
    expect(answer.candidates[0]!.content.parts[0]!.text).toBe(outputText(3))
    expect(answer.candidates[0]!.finishReason).toBe("MAX_TOKENS")
    expect(answer.usageMetadata?.candidatesTokenCount).toBe(3)
  })

  it("calls the first declared function unless the last content is a functionResponse or mode is NONE", async () => {
    const call = (await (
      await geminiPost(
        generatePath,
        geminiBody({ tools: [WEATHER], generationConfig: { maxOutputTokens: 2 } }),
      )
    ).json()) as GenerateContentResponse
    expect(call.candidates[0]).toEqual({
      content: {
        parts: [{ functionCall: { name: "get_weather", args: { query: outputText(2) } } }],
        role: "model",
      },
      finishReason: "STOP",
      index: 0,
    })
    expect(call.usageMetadata?.candidatesTokenCount).toBe(2)

    const forced = (await (
      await geminiPost(
        generatePath,
        geminiBody({
          tools: [WEATHER],
          toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_time"] } },
        }),
      )
    ).json()) as GenerateContentResponse
    expect(forced.candidates[0]!.content.parts[0]!.functionCall?.name).toBe("get_time")

    const none = (await (
      await geminiPost(
        generatePath,
        geminiBody({ tools: [WEATHER], toolConfig: { functionCallingConfig: { mode: "NONE" } } }),
      )
    ).json()) as GenerateContentResponse
    expect(none.candidates[0]!.content.parts[0]!.text).toBe(outputText(16))

    const answered = (await (
      await geminiPost(
        generatePath,
        geminiBody({
          tools: [WEATHER],
          contents: [
            { role: "user", parts: [{ text: "weather?" }] },
            { role: "model", parts: [{ functionCall: { name: "get_weather", args: {} } }] },
            {
              role: "user",
              parts: [{ functionResponse: { name: "get_weather", response: { sky: "sunny" } } }],
            },
          ],
        }),
      )
    ).json()) as GenerateContentResponse
    expect(answered.candidates[0]!.content.parts[0]!.text).toBe(outputText(16))
  })

  it("Gemini 3 signs its calls and refuses a history whose first call of a model turn comes back unsigned", async () => {
    const gemini3 = "/v1beta/models/gemini-3-flash-preview:generateContent"
    const answer = (await (
      await geminiPost(gemini3, geminiBody({ tools: [WEATHER], generationConfig: { maxOutputTokens: 2 } }))
    ).json()) as GenerateContentResponse
    const part = answer.candidates[0]!.content.parts[0] as Record<string, unknown>
    expect(part["functionCall"]).toMatchObject({ name: "get_weather" })
    expect(part["thoughtSignature"]).toBe(signatureFor("get_weather"))

    const history = (signature?: string) =>
      geminiBody({
        tools: [WEATHER],
        contents: [
          { role: "user", parts: [{ text: "weather?" }] },
          {
            role: "model",
            parts: [
              {
                functionCall: { name: "get_weather", args: {} },
                ...(signature !== undefined ? { thoughtSignature: signature } : {}),
              },
            ],
          },
          {
            role: "user",
            parts: [{ functionResponse: { name: "get_weather", response: { sky: "sunny" } } }],
          },
        ],
      })
    const unsigned = await geminiPost(gemini3, history())
    expect(unsigned.status).toBe(400)
    expect(await unsigned.json()).toMatchObject({
      error: { code: 400, status: "INVALID_ARGUMENT", message: expect.stringContaining("thought_signature") },
    })
    expect((await geminiPost(gemini3, history("bm90IG91cnM="))).status).toBe(400)
    expect((await geminiPost(gemini3, history(signatureFor("get_weather")))).status).toBe(200)
    expect((await geminiPost(gemini3, history("skip_thought_signature_validator"))).status).toBe(200)
    // Gemini 2.5 neither signs nor checks.
    expect((await geminiPost(generatePath, history())).status).toBe(200)
  })

  it("thoughts:N and cached:N: thoughtsTokenCount, cachedContentTokenCount inside promptTokenCount", async () => {
    const answer = (await (
      await geminiPost(generatePath, geminiBody({ generationConfig: { maxOutputTokens: 6 } }), {
        scenario: "thoughts:7,cached:2",
      })
    ).json()) as GenerateContentResponse
    expect(answer.usageMetadata).toMatchObject({
      promptTokenCount: 10,
      candidatesTokenCount: 6,
      totalTokenCount: 23,
      cachedContentTokenCount: 2,
      thoughtsTokenCount: 7,
    })
  })

  it("rejects bodies Gemini rejects with 400 INVALID_ARGUMENT", async () => {
    for (const body of [
      {},
      { contents: [] },
      { contents: [{ role: "assistant", parts: [{ text: "x" }] }] },
      { contents: [{ role: "user", parts: [] }] },
      "not json",
    ]) {
      const response = await geminiPost(generatePath, body)
      expect(response.status).toBe(400)
      expect(await response.json()).toMatchObject({ error: { code: 400, status: "INVALID_ARGUMENT" } })
    }
  })
})

describe("Gemini streamGenerateContent", () => {
  it("alt=sse: CRLF-framed events, one token each, cumulative usageMetadata on every event, finishReason last", async () => {
    const response = await geminiPost(streamPath, geminiBody({ generationConfig: { maxOutputTokens: 4 } }), {
      scenario: "thoughts:3,cached:1",
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/event-stream")
    const text = await response.text()
    expect(text).not.toMatch(/[^\r]\n/)
    const events = sseEvents(text).map((data) => JSON.parse(data) as GenerateContentResponse)
    expect(events).toHaveLength(5)
    expect(textOf(events)).toBe(outputText(4))
    expect(events.map((event) => event.usageMetadata?.candidatesTokenCount)).toEqual([1, 2, 3, 4, 4])
    for (const event of events) {
      expect(event.usageMetadata).toMatchObject({
        promptTokenCount: 9,
        thoughtsTokenCount: 3,
        cachedContentTokenCount: 1,
      })
      expect(event.usageMetadata!.totalTokenCount).toBe(9 + event.usageMetadata!.candidatesTokenCount + 3)
      expect(event.modelVersion).toBe(MODEL)
      expect(event.responseId).toBe(events[0]!.responseId)
    }
    expect(events.slice(0, -1).every((event) => event.candidates[0]!.finishReason === undefined)).toBe(true)
    expect(events.at(-1)!.candidates[0]!.finishReason).toBe("MAX_TOKENS")
  })

  it("streams a function call as one event", async () => {
    const events = await streamResponses(await geminiPost(streamPath, geminiBody({ tools: [WEATHER] })))
    expect(events).toHaveLength(1)
    expect(events[0]!.candidates[0]).toMatchObject({
      content: { parts: [{ functionCall: { name: "get_weather", args: { query: outputText(16) } } }] },
      finishReason: "STOP",
    })
  })

  it("without alt=sse the stream is one JSON array", async () => {
    const response = await geminiPost(`/v1beta/models/${MODEL}:streamGenerateContent`, geminiBody(), {
      scenario: "tokens:3",
    })
    expect(response.headers.get("content-type")).toBe("application/json; charset=UTF-8")
    const array = JSON.parse(await response.text()) as Array<GenerateContentResponse>
    expect(array).toHaveLength(4)
    expect(textOf(array)).toBe(outputText(3))
  })
})

describe("Gemini scenarios", () => {
  it("status:N answers Google's error body and status name, with retry-after when given", async () => {
    for (const [scenario, code, status] of [
      ["status:429:7", 429, "RESOURCE_EXHAUSTED"],
      ["status:503", 503, "UNAVAILABLE"],
      ["status:529", 529, "UNAVAILABLE"],
      ["status:500", 500, "INTERNAL"],
      ["status:400", 400, "INVALID_ARGUMENT"],
      ["status:404", 404, "NOT_FOUND"],
    ] as const) {
      const response = await geminiPost(streamPath, geminiBody(), { scenario })
      expect(response.status).toBe(code)
      expect(response.headers.get("retry-after")).toBe(scenario === "status:429:7" ? "7" : null)
      expect(await response.json()).toEqual({ error: { code, message: expect.any(String), status } })
    }
    const overloaded = await geminiPost(generatePath, geminiBody(), { scenario: "status:529" })
    expect(((await overloaded.json()) as { error: { message: string } }).error.message).toContain(
      "overloaded",
    )
  })

  it("an x-fake-scenario that does not parse is a 400 INVALID_ARGUMENT", async () => {
    const response = await geminiPost(generatePath, geminiBody(), { scenario: "explode" })
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ error: { status: "INVALID_ARGUMENT" } })
  })

  it("hang-before-headers sends nothing until the client aborts", async () => {
    await expectHangBeforeHeaders(fake, (signal) =>
      geminiPost(streamPath, geminiBody(), { scenario: "hang-before-headers", signal }),
    )
  })

  it("hang-after:2-tokens streams two events, then waits", async () => {
    const controller = new AbortController()
    const response = await geminiPost(streamPath, geminiBody(), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    const { text, reader } = await readUntil(response, (t) => t.includes("tok1 "))
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    expect(textOf(sseEvents(text).map((data) => JSON.parse(data) as GenerateContentResponse))).toBe(
      "tok0 tok1 ",
    )
    controller.abort()
    await until(() => (lastRequest(fake).aborted ? true : undefined))
  })

  it("reset-after:2-tokens drops the connection", async () => {
    const response = await geminiPost(streamPath, geminiBody(), { scenario: "reset-after:2-tokens" })
    expect(await response.text().catch((error: unknown) => error)).toBeInstanceOf(Error)
  })

  it("malformed-after:2-tokens ends with an event whose data is not JSON", async () => {
    const response = await geminiPost(streamPath, geminiBody(), { scenario: "malformed-after:2-tokens" })
    const data = sseEvents(await response.text())
    expect(data).toHaveLength(3)
    expect(data.slice(0, 2).map((d) => JSON.parse(d) as unknown)).toHaveLength(2)
    expect(data[2]).toContain("oops")
    expect(() => JSON.parse(data[2]!)).toThrow()
  })

  it("inband-error:TYPE on a stream: an empty first event, then the error event, then the end", async () => {
    const response = await geminiPost(streamPath, geminiBody(), { scenario: "inband-error:overloaded_error" })
    expect(response.status).toBe(200)
    const data = sseEvents(await response.text()).map((d) => JSON.parse(d) as Record<string, unknown>)
    expect(data).toHaveLength(2)
    expect(textOf([data[0] as unknown as GenerateContentResponse])).toBe("")
    expect(data[1]).toEqual({
      error: { code: 503, message: expect.stringContaining("overloaded_error"), status: "UNAVAILABLE" },
    })
    const json = await geminiPost(generatePath, geminiBody(), { scenario: "inband-error:rate_limit_error" })
    expect(json.status).toBe(429)
    expect(await json.json()).toMatchObject({ error: { code: 429, status: "RESOURCE_EXHAUSTED" } })
  })

  it("no-usage: no usageMetadata on any event", async () => {
    const events = await streamResponses(await geminiPost(streamPath, geminiBody(), { scenario: "no-usage" }))
    expect(events).toHaveLength(17)
    expect(events.every((event) => event.usageMetadata === undefined)).toBe(true)
    const json = (await (
      await geminiPost(generatePath, geminiBody(), { scenario: "no-usage" })
    ).json()) as GenerateContentResponse
    expect(json.usageMetadata).toBeUndefined()
  })

  it("tokens:N gives N tokens whatever maxOutputTokens says", async () => {
    const events = await streamResponses(
      await geminiPost(streamPath, geminiBody({ generationConfig: { maxOutputTokens: 2 } }), {
        scenario: "tokens:30",
      }),
    )
    expect(textOf(events)).toBe(outputText(30))
    expect(events.at(-1)!.usageMetadata?.candidatesTokenCount).toBe(30)
  })

  it("error-body-stall:503 sends the status and half the error body, then nothing", async () => {
    const controller = new AbortController()
    const response = await geminiPost(generatePath, geminiBody(), {
      scenario: "error-body-stall:503",
      signal: controller.signal,
    })
    expect(response.status).toBe(503)
    const { text, reader } = await readUntil(response, (t) => t.length > 0)
    expect(text.startsWith(`{"error":{"code":503`)).toBe(true)
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    controller.abort()
  })

  it("--kind gemini serves only the Gemini paths", async () => {
    const only = await startFakeProvider({ kind: "gemini" })
    try {
      const other = await post(only, "/v1/messages", messagesBody())
      expect(other.status).toBe(404)
      expect(await other.json()).toMatchObject({ error: { code: 404, status: "NOT_FOUND" } })
      const ok = await post(only, generatePath, geminiBody(), { headers: KEY })
      expect(ok.status).toBe(200)
      expect(ok.headers.get("x-fake-kind")).toBe("gemini")
      await ok.text()
    } finally {
      await only.close()
    }
  })
})
