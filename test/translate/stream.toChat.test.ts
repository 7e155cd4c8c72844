import { describe, expect, it } from "vitest"
import { events, run, script, sse, type Json } from "./streamHelpers.js"
import { anthropicSse } from "./upstream.js"

describe("Anthropic stream → Chat Completions stream", () => {
  it("writes the role chunk, content and tool call deltas, the finish chunk, the usage chunk and [DONE]", () => {
    const out = events(run("/v1/messages", "/v1/chat/completions", [anthropicSse(script)]))
    const deltas = out.slice(0, -1).map(([, data]) => (data as Json)["choices"][0]?.["delta"])
    expect(deltas.slice(0, 7)).toEqual([
      { role: "assistant", content: "" },
      { content: "Hel" },
      { content: "lo " },
      { content: "🌍" },
      {
        tool_calls: [
          { index: 0, id: "toolu_1", type: "function", function: { name: "weather", arguments: "" } },
        ],
      },
      { tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] },
      { tool_calls: [{ index: 0, function: { arguments: 'ty":"Oslo"}' } }] },
    ])
    const finish = out[7]![1] as Json
    expect(finish["choices"]).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: "tool_calls" }])
    const usage = out[8]![1] as Json
    expect(usage["choices"]).toEqual([])
    expect(usage["usage"]).toEqual({
      prompt_tokens: 16,
      completion_tokens: 7,
      total_tokens: 23,
      prompt_tokens_details: { cached_tokens: 4 },
    })
    expect(out[9]).toEqual(["message", "[DONE]"])
    expect(out).toHaveLength(10)
    for (const [, data] of out.slice(0, 9))
      expect(data).toMatchObject({ object: "chat.completion.chunk", model: "client-model" })
  })

  it("leaves out the usage chunk when the client did not ask for usage", () => {
    const out = events(run("/v1/messages", "/v1/chat/completions", [anthropicSse(script)], false))
    expect(out.some(([, data]) => typeof data === "object" && data["usage"] !== undefined)).toBe(false)
    expect(out[out.length - 1]).toEqual(["message", "[DONE]"])
  })

  it("skips thinking blocks and writes pings as SSE comments", () => {
    const stream =
      sse("message_start", {
        type: "message_start",
        message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } },
      }) +
      sse("content_block_start", {
        type: "content_block_start",
        index: 0,
        content_block: { type: "thinking", thinking: "" },
      }) +
      sse("content_block_delta", {
        type: "content_block_delta",
        index: 0,
        delta: { type: "thinking_delta", thinking: "hmm" },
      }) +
      sse("content_block_delta", {
        type: "content_block_delta",
        index: 0,
        delta: { type: "signature_delta", signature: "s" },
      }) +
      sse("content_block_stop", { type: "content_block_stop", index: 0 }) +
      sse("ping", { type: "ping" }) +
      sse("content_block_start", {
        type: "content_block_start",
        index: 1,
        content_block: { type: "text", text: "" },
      }) +
      sse("content_block_delta", {
        type: "content_block_delta",
        index: 1,
        delta: { type: "text_delta", text: "Hi" },
      }) +
      sse("content_block_stop", { type: "content_block_stop", index: 1 }) +
      sse("message_delta", {
        type: "message_delta",
        delta: { stop_reason: "max_tokens" },
        usage: { output_tokens: 2 },
      }) +
      sse("message_stop", { type: "message_stop" })
    const raw = run("/v1/messages", "/v1/chat/completions", [stream], false)
    expect(raw).toContain("\n\n: ping\n\n")
    const out = events(raw)
    expect(out.map(([, data]) => (typeof data === "string" ? data : data["choices"][0]))).toEqual([
      { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
      { index: 0, delta: { content: "Hi" }, logprobs: null, finish_reason: null },
      { index: 0, delta: {}, logprobs: null, finish_reason: "length" },
      "[DONE]",
    ])
  })

  it("turns an in-band error into a Chat error chunk, without [DONE] and with nothing after it", () => {
    const stream =
      sse("message_start", {
        type: "message_start",
        message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } },
      }) +
      sse("error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }) +
      sse("message_stop", { type: "message_stop" })
    const out = run("/v1/messages", "/v1/chat/completions", [stream])
    expect(events(out).slice(1)).toEqual([
      ["message", { error: { type: "overloaded_error", message: "Overloaded", code: null } }],
    ])
    expect(out).not.toContain("[DONE]")
  })
})
