import { describe, expect, it } from "vitest"
import { translateErrorBody, translateResponse, type Wire } from "../../src/translate/index.js"

const bytes = (value: unknown) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value))
const translate = (from: Wire, to: Wire, body: unknown) => {
  const out = translateResponse(from, to, bytes(body), { model: "client-model" })
  return out === undefined ? undefined : JSON.parse(out.toString("utf8"))
}

const anthropicMessage = {
  id: "msg_up",
  type: "message",
  role: "assistant",
  model: "claude-up",
  content: [
    { type: "thinking", thinking: "hidden", signature: "s" },
    { type: "text", text: "Let me check." },
    { type: "tool_use", id: "toolu_9", name: "weather", input: { city: "Oslo" } },
  ],
  stop_reason: "tool_use",
  stop_sequence: null,
  usage: {
    input_tokens: 100,
    output_tokens: 20,
    cache_read_input_tokens: 30,
    cache_creation_input_tokens: 5,
  },
}

describe("translateResponse", () => {
  it("turns an Anthropic message into a Chat completion with tool calls and all input counted in prompt_tokens", () => {
    const out = translate("/v1/messages", "/v1/chat/completions", anthropicMessage)
    expect(out).toMatchObject({
      object: "chat.completion",
      model: "client-model",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: "Let me check.",
            refusal: null,
            tool_calls: [
              {
                id: "toolu_9",
                type: "function",
                function: { name: "weather", arguments: '{"city":"Oslo"}' },
              },
            ],
          },
          logprobs: null,
          finish_reason: "tool_calls",
        },
      ],
      usage: {
        prompt_tokens: 135,
        completion_tokens: 20,
        total_tokens: 155,
        prompt_tokens_details: { cached_tokens: 30 },
      },
    })
    expect(out.id).toMatch(/^chatcmpl-[A-Za-z0-9]{24}$/)
    expect(Number.isInteger(out.created)).toBe(true)
  })

  it("maps each Anthropic stop reason to a finish reason", () => {
    const finish = (stop_reason: string) =>
      translate("/v1/messages", "/v1/chat/completions", { ...anthropicMessage, content: [], stop_reason })
        .choices[0].finish_reason
    expect(finish("end_turn")).toBe("stop")
    expect(finish("stop_sequence")).toBe("stop")
    expect(finish("max_tokens")).toBe("length")
    expect(finish("tool_use")).toBe("tool_calls")
    expect(finish("refusal")).toBe("content_filter")
  })

  it("turns a Chat completion into an Anthropic message with input_tokens net of cached tokens", () => {
    const out = translate("/v1/chat/completions", "/v1/messages", {
      id: "chatcmpl-up",
      object: "chat.completion",
      created: 1,
      model: "gpt-up",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: "Sure.",
            tool_calls: [{ id: "call_7", type: "function", function: { name: "f", arguments: '{"x":1}' } }],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage: {
        prompt_tokens: 2006,
        completion_tokens: 300,
        total_tokens: 2306,
        prompt_tokens_details: { cached_tokens: 1920 },
      },
    })
    expect(out).toMatchObject({
      type: "message",
      role: "assistant",
      model: "client-model",
      content: [
        { type: "text", text: "Sure." },
        { type: "tool_use", id: "call_7", name: "f", input: { x: 1 } },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: {
        input_tokens: 86,
        output_tokens: 300,
        cache_read_input_tokens: 1920,
        cache_creation_input_tokens: 0,
      },
    })
    expect(out.id).toMatch(/^msg_/)
    const finish = (finish_reason: string) =>
      translate("/v1/chat/completions", "/v1/messages", {
        choices: [{ message: { content: "x" }, finish_reason }],
      }).stop_reason
    expect([finish("stop"), finish("length"), finish("content_filter")]).toEqual([
      "end_turn",
      "max_tokens",
      "refusal",
    ])
  })

  it("turns an Anthropic message into a Responses response with message and function call items", () => {
    const out = translate("/v1/messages", "/v1/responses", anthropicMessage)
    expect(out).toMatchObject({
      object: "response",
      status: "completed",
      incomplete_details: null,
      error: null,
      model: "client-model",
      output: [
        {
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: "Let me check.", annotations: [] }],
        },
        {
          type: "function_call",
          status: "completed",
          call_id: "toolu_9",
          name: "weather",
          arguments: '{"city":"Oslo"}',
        },
      ],
      usage: {
        input_tokens: 135,
        input_tokens_details: { cached_tokens: 30, cache_write_tokens: 5 },
        output_tokens: 20,
        total_tokens: 155,
      },
    })
    expect(out.id).toMatch(/^resp_/)
    expect(out.output[0].id).toMatch(/^msg_/)
    expect(out.output[1].id).toMatch(/^fc_/)
  })

  it("says incomplete for max_output_tokens when the Anthropic message hit max_tokens", () => {
    const out = translate("/v1/messages", "/v1/responses", {
      ...anthropicMessage,
      content: [{ type: "text", text: "Cut" }],
      stop_reason: "max_tokens",
    })
    expect(out.status).toBe("incomplete")
    expect(out.incomplete_details).toEqual({ reason: "max_output_tokens" })
    expect(out.output[0].status).toBe("incomplete")
  })

  it("is undefined for a body that is not a response of the upstream's format", () => {
    expect(translate("/v1/messages", "/v1/chat/completions", "not json")).toBeUndefined()
    expect(translate("/v1/messages", "/v1/chat/completions", { choices: [] })).toBeUndefined()
    expect(translate("/v1/messages", "/v1/responses", { type: "error", error: {} })).toBeUndefined()
    expect(
      translate("/v1/chat/completions", "/v1/messages", { type: "message", content: [] }),
    ).toBeUndefined()
    expect(translate("/v1/chat/completions", "/v1/responses", { choices: [{ message: {} }] })).toBeUndefined()
  })
})

describe("translateErrorBody", () => {
  const error = (from: Wire, to: Wire, status: number, body: unknown) =>
    JSON.parse(translateErrorBody(from, to, status, bytes(body)).toString("utf8"))

  it("turns an Anthropic error into an OpenAI error with the same type and message", () => {
    const body = { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }
    const expected = { error: { message: "Overloaded", type: "overloaded_error", param: null, code: null } }
    expect(error("/v1/messages", "/v1/chat/completions", 529, body)).toEqual(expected)
    expect(error("/v1/messages", "/v1/responses", 529, body)).toEqual(expected)
  })

  it("turns an OpenAI error into an Anthropic error, replacing a type Anthropic does not know by the status's", () => {
    const body = (type: string) => ({
      error: { message: "Slow down", type, param: null, code: "rate_limit_exceeded" },
    })
    expect(error("/v1/chat/completions", "/v1/messages", 429, body("rate_limit_error"))).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: "Slow down" },
    })
    expect(error("/v1/chat/completions", "/v1/messages", 429, body("insufficient_quota"))).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: "Slow down" },
    })
    expect(error("/v1/chat/completions", "/v1/messages", 500, body("server_error")).error.type).toBe(
      "api_error",
    )
  })

  it("never fails: an unknown body becomes a generic error of the status's type", () => {
    expect(error("/v1/chat/completions", "/v1/messages", 503, "<html>bad gateway</html>")).toEqual({
      type: "error",
      error: { type: "overloaded_error", message: "upstream error 503" },
    })
    expect(error("/v1/messages", "/v1/chat/completions", 404, "")).toEqual({
      error: { message: "upstream error 404", type: "not_found_error", param: null, code: null },
    })
    const long = error("/v1/messages", "/v1/responses", 400, {
      type: "error",
      error: { type: "invalid_request_error", message: "x".repeat(10_000) },
    })
    expect(long.error.message.length).toBeLessThanOrEqual(4097)
  })
})
