import { describe, expect, it } from "vitest"
import { events, run, script, type Json } from "./streamHelpers.js"
import { chatSse } from "./upstream.js"

describe("Chat Completions stream → Anthropic stream", () => {
  it("writes message_start, a text block, a tool_use block with input_json_delta, message_delta with the usage, message_stop", () => {
    const out = events(
      run("/v1/chat/completions", "/v1/messages", [
        chatSse({ ...script, usage: { ...script.usage, cacheWrite: 0 } }),
      ]),
    )
    expect(out.map(([name]) => name)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ])
    for (const [name, data] of out) expect((data as Json)["type"]).toBe(name)
    const start = out[0]![1] as Json
    expect(start["message"]).toMatchObject({
      role: "assistant",
      model: "client-model",
      content: [],
      stop_reason: null,
    })
    expect(start["message"]["usage"]).toEqual({
      input_tokens: 0,
      output_tokens: 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    })
    expect(out[6]![1]).toEqual({
      type: "content_block_start",
      index: 1,
      content_block: { type: "tool_use", id: "toolu_1", name: "weather", input: {} },
    })
    expect(out[7]![1]).toEqual({
      type: "content_block_delta",
      index: 1,
      delta: { type: "input_json_delta", partial_json: '{"ci' },
    })
    expect(out[10]![1]).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: {
        input_tokens: 10,
        output_tokens: 7,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 4,
      },
    })
  })

  it("turns a Chat error chunk into an Anthropic error event and writes nothing after it", () => {
    const out = events(
      run("/v1/chat/completions", "/v1/messages", [
        'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n',
        'data: {"error":{"message":"boom","type":"server_error","code":null}}\n\n',
        'data: {"id":"c","choices":[{"index":0,"delta":{"content":"more"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
      ]),
    )
    expect(out[out.length - 1]).toEqual([
      "error",
      { type: "error", error: { type: "api_error", message: "boom" } },
    ])
    expect(out.map(([name]) => name)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "error",
    ])
  })

  it("also reads an error sent as a named error event", () => {
    const out = events(
      run("/v1/chat/completions", "/v1/messages", [
        'event: error\ndata: {"message":"down","type":"overloaded_error"}\n\n',
      ]),
    )
    expect(out).toEqual([["error", { type: "error", error: { type: "overloaded_error", message: "down" } }]])
  })

  it("ends the message when the upstream ends after its finish reason without [DONE], and not before it", () => {
    const chunk = (delta: unknown, finish: string | null) =>
      `data: ${JSON.stringify({ id: "c", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
    const finished = events(
      run("/v1/chat/completions", "/v1/messages", [chunk({ content: "Hi" }, null), chunk({}, "length")]),
    )
    expect(finished.map(([name]) => name).slice(-2)).toEqual(["message_delta", "message_stop"])
    expect((finished[finished.length - 2]![1] as Json)["delta"]["stop_reason"]).toBe("max_tokens")
    const cut = events(run("/v1/chat/completions", "/v1/messages", [chunk({ content: "Hi" }, null)]))
    expect(cut.map(([name]) => name)).toEqual(["message_start", "content_block_start", "content_block_delta"])
  })

  it("opens one block per tool call and drops pieces of a call whose block already closed", () => {
    const chunk = (calls: unknown) =>
      `data: ${JSON.stringify({ id: "c", choices: [{ index: 0, delta: { tool_calls: calls }, finish_reason: null }] })}\n\n`
    const out = events(
      run("/v1/chat/completions", "/v1/messages", [
        chunk([{ index: 0, id: "a", type: "function", function: { name: "f", arguments: "{}" } }]),
        chunk([{ index: 1, id: "b", type: "function", function: { name: "g", arguments: "{" } }]),
        chunk([{ index: 0, function: { arguments: "late" } }]),
        chunk([{ index: 1, function: { arguments: "}" } }]),
        "data: [DONE]\n\n",
      ]),
    )
    const starts = out
      .filter(([name]) => name === "content_block_start")
      .map(([, d]) => (d as Json)["content_block"]["id"])
    expect(starts).toEqual(["a", "b"])
    const pieces = out
      .filter(([name]) => name === "content_block_delta")
      .map(([, d]) => (d as Json)["delta"]["partial_json"])
    expect(pieces).toEqual(["{}", "{", "}"])
    expect((out.find(([name]) => name === "message_delta")![1] as Json)["delta"]["stop_reason"]).toBe(
      "tool_use",
    )
  })
})
