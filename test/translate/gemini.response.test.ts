import { describe, expect, it } from "vitest"
import {
  chatToGemini,
  geminiErrorToOpenAI,
  geminiToChat,
  geminiUsageCounts,
} from "../../src/translate/gemini/index.js"

type Json = Record<string, any>

const response = (parts: Array<Json>, finishReason = "STOP", extra: Json = {}): Json => ({
  candidates: [{ content: { role: "model", parts }, finishReason, index: 0 }],
  modelVersion: "gemini-2.5-flash",
  responseId: "abc123",
  ...extra,
})
const chat = (body: Json) => geminiToChat(body, "client-model") as Json
const choice = (body: Json) => chat(body)["choices"][0]

describe("geminiToChat", () => {
  it("joins the text parts, skips thoughts, and names the completion after responseId", () => {
    const out = chat(
      response([
        { text: "thinking…", thought: true },
        { text: "Hello " },
        { text: "world", thoughtSignature: "sig" },
      ]),
    )
    expect(out).toEqual({
      id: "chatcmpl-abc123",
      object: "chat.completion",
      created: expect.any(Number),
      model: "client-model",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "Hello world", refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
    })
    expect(Math.abs(out["created"] - Date.now() / 1000)).toBeLessThan(5)
    const { responseId: _, ...noId } = response([{ text: "x" }])
    expect(chat(noId)["id"]).toMatch(/^chatcmpl-[A-Za-z0-9]{24}$/)
  })

  it("turns functionCall parts into tool_calls with finish_reason tool_calls", () => {
    const c = choice(
      response([
        { functionCall: { name: "weather", args: { city: "Oslo" } } },
        { functionCall: { id: "fc-9", name: "ping" } },
      ]),
    )
    expect(c["finish_reason"]).toBe("tool_calls")
    expect(c["message"]["content"]).toBeNull()
    expect(c["message"]["tool_calls"]).toEqual([
      {
        id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
        type: "function",
        function: { name: "weather", arguments: '{"city":"Oslo"}' },
      },
      { id: "fc-9", type: "function", function: { name: "ping", arguments: "{}" } },
    ])
  })

  it("carries a call's thoughtSignature in its id, and the request translation gives it back", () => {
    const signature = "CqQBAdHtim/+sig=="
    const c = choice(
      response([{ functionCall: { id: "fc-1", name: "weather", args: {} }, thoughtSignature: signature }]),
    )
    const call = c["message"]["tool_calls"][0] as {
      id: string
      function: { name: string; arguments: string }
    }
    expect(call.id).toBe(`fc-1__thought__${Buffer.from(signature).toString("base64url")}`)
    expect(call.id).toMatch(/^[A-Za-z0-9_-]+$/)
    const next = chatToGemini({
      model: "m",
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: null, tool_calls: [{ ...call, type: "function" }] },
        { role: "tool", tool_call_id: call.id, content: "sunny" },
      ],
    }) as { contents: Array<{ parts: Array<Json> }> }
    expect(next.contents[1]!.parts).toEqual([
      { functionCall: { name: "weather", args: {} }, thoughtSignature: signature },
    ])
    expect(next.contents[2]!.parts).toEqual([
      { functionResponse: { name: "weather", response: { content: "sunny" } } },
    ])
  })

  it("maps the finish reasons", () => {
    const finish = (reason: string, parts: Array<Json> = [{ text: "x" }]) =>
      choice(response(parts, reason))["finish_reason"]
    expect(finish("STOP")).toBe("stop")
    expect(finish("MAX_TOKENS")).toBe("length")
    expect(finish("MAX_TOKENS", [{ functionCall: { name: "f", args: {} } }])).toBe("length")
    for (const reason of ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"])
      expect(finish(reason)).toBe("content_filter")
    for (const reason of ["OTHER", "LANGUAGE", "MALFORMED_FUNCTION_CALL", "FINISH_REASON_UNSPECIFIED"])
      expect(finish(reason)).toBe("stop")
  })

  it("translates usage, counting thoughts as output and cached content as cache reads", () => {
    const usageMetadata = {
      promptTokenCount: 100,
      cachedContentTokenCount: 60,
      candidatesTokenCount: 20,
      thoughtsTokenCount: 30,
      totalTokenCount: 150,
    }
    expect(chat(response([{ text: "x" }], "STOP", { usageMetadata }))["usage"]).toEqual({
      prompt_tokens: 100,
      completion_tokens: 50,
      total_tokens: 150,
      prompt_tokens_details: { cached_tokens: 60 },
      completion_tokens_details: { reasoning_tokens: 30 },
    })
    expect(
      chat(
        response([{ text: "x" }], "STOP", {
          usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2 },
        }),
      )["usage"],
    ).toEqual({
      prompt_tokens: 5,
      completion_tokens: 2,
      total_tokens: 7,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    })
    expect(chat(response([{ text: "x" }]))["usage"]).toBeUndefined()
  })

  it("answers a blocked prompt with no content and finish_reason content_filter", () => {
    const out = chat({
      promptFeedback: { blockReason: "SAFETY", safetyRatings: [] },
      usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 },
    })
    expect(out["choices"]).toEqual([
      {
        index: 0,
        message: { role: "assistant", content: null, refusal: null },
        logprobs: null,
        finish_reason: "content_filter",
      },
    ])
    expect(out["usage"]["prompt_tokens"]).toBe(8)
  })

  it("returns undefined for a body that is not a Gemini response", () => {
    expect(geminiToChat({ choices: [] }, "m")).toBeUndefined()
    expect(geminiToChat({ candidates: "x" }, "m")).toBeUndefined()
    expect(geminiToChat({}, "m")).toBeUndefined()
  })
})

describe("geminiUsageCounts", () => {
  it("reads Tollgate's counts, absent or invalid fields as 0", () => {
    expect(
      geminiUsageCounts({
        promptTokenCount: 100,
        cachedContentTokenCount: 40,
        candidatesTokenCount: 7,
        thoughtsTokenCount: 3,
      }),
    ).toEqual({ inputTokens: 60, outputTokens: 10, cacheReadTokens: 40, cacheWriteTokens: 0 })
    expect(geminiUsageCounts({ promptTokenCount: "9", candidatesTokenCount: -1 })).toEqual({
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    })
    expect(geminiUsageCounts(undefined)).toBeUndefined()
    expect(geminiUsageCounts([1])).toBeUndefined()
  })
})

describe("geminiErrorToOpenAI", () => {
  const translate = (status: number, body: unknown) =>
    JSON.parse(
      geminiErrorToOpenAI(
        status,
        Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
      ).toString(),
    )
  const google = (code: number, status: string, message: string) => ({ error: { code, message, status } })

  it("translates Google's error body, the type by status and the code from Google's status", () => {
    expect(translate(429, google(429, "RESOURCE_EXHAUSTED", "Quota exceeded"))).toEqual({
      error: { message: "Quota exceeded", type: "rate_limit_error", param: null, code: "RESOURCE_EXHAUSTED" },
    })
    const type = (status: number) => translate(status, google(status, "X", "m"))["error"]["type"]
    expect(type(400)).toBe("invalid_request_error")
    expect(type(401)).toBe("authentication_error")
    expect(type(403)).toBe("permission_error")
    expect(type(404)).toBe("not_found_error")
    expect(type(429)).toBe("rate_limit_error")
    expect(type(500)).toBe("api_error")
  })

  it("accepts the array form and reads an invalid API key as an authentication error", () => {
    const body = [
      {
        error: {
          code: 400,
          message: "API key not valid.",
          status: "INVALID_ARGUMENT",
          details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID" }],
        },
      },
    ]
    expect(translate(400, body)).toEqual({
      error: {
        message: "API key not valid.",
        type: "authentication_error",
        param: null,
        code: "INVALID_ARGUMENT",
      },
    })
  })

  it("answers a body that does not parse with a generic error", () => {
    expect(translate(502, "<html>Bad gateway</html>")).toEqual({
      error: { message: "upstream error 502", type: "api_error", param: null, code: null },
    })
    expect(translate(404, { nope: 1 })).toEqual({
      error: { message: "upstream error 404", type: "not_found_error", param: null, code: null },
    })
  })
})
