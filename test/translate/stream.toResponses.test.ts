import { describe, expect, it } from "vitest"
import { events, run, script, sse, type Json } from "./streamHelpers.js"
import { anthropicSse } from "./upstream.js"

describe("Anthropic stream → Responses stream", () => {
  it("writes the Responses event sequence with contiguous sequence numbers", () => {
    const out = events(run("/v1/messages", "/v1/responses", [anthropicSse(script)]))
    expect(out.map(([name]) => name)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ])
    out.forEach(([name, data], i) => expect(data).toMatchObject({ type: name, sequence_number: i }))
    expect((out[7]![1] as Json)["text"]).toBe("Hello 🌍")
    expect((out[13]![1] as Json)["arguments"]).toBe('{"city":"Oslo"}')
    const completed = (out[15]![1] as Json)["response"]
    expect(completed).toMatchObject({
      status: "completed",
      model: "client-model",
      usage: { input_tokens: 16, output_tokens: 7 },
    })
    expect(completed["output"].map((item: Json) => item["type"])).toEqual(["message", "function_call"])
  })

  it("ends with response.incomplete and an incomplete last item when the upstream hit max_tokens", () => {
    const out = events(
      run("/v1/messages", "/v1/responses", [
        anthropicSse({ ...script, parts: [script.parts[0]!], stop: "max_tokens" }),
      ]),
    )
    const [name, data] = out[out.length - 1]!
    expect(name).toBe("response.incomplete")
    expect((data as Json)["response"]).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
    })
    const itemDone = out.find(([n]) => n === "response.output_item.done")![1] as Json
    expect(itemDone["item"]["status"]).toBe("incomplete")
  })

  it("turns an in-band error into a Responses error event and writes nothing after it", () => {
    const stream =
      sse("message_start", {
        type: "message_start",
        message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } },
      }) +
      sse("error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }) +
      sse("message_stop", { type: "message_stop" })
    const out = events(run("/v1/messages", "/v1/responses", [stream]))
    expect(out[out.length - 1]).toEqual([
      "error",
      { type: "error", code: "overloaded_error", message: "Overloaded", param: null, sequence_number: 2 },
    ])
    expect(out).toHaveLength(3)
  })
})
