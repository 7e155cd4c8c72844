import { describe, expect, it } from "vitest"
import { InvalidRequest } from "../../src/domain/errors.js"
import { translateRequest } from "../../src/translate/index.js"
import { requestTranslator } from "./requestHelpers.js"

const { refusal } = requestTranslator("/v1/chat/completions", "/v1/messages", "claude-up")
const user = (content: unknown) => ({ role: "user", content })

describe("translateRequest from Chat Completions to Anthropic Messages, refusing", () => {
  it("refuses what changes the answer and has no Anthropic equivalent, naming the field", () => {
    const base = { messages: [user("Hi")] }
    expect(refusal({ ...base, n: 2 })).toMatch(/^n: /)
    expect(refusal({ ...base, logprobs: true })).toMatch(/^logprobs: /)
    expect(refusal({ ...base, top_logprobs: 3 })).toMatch(/^top_logprobs: /)
    expect(refusal({ ...base, audio: { voice: "alloy", format: "mp3" } })).toMatch(/^audio: /)
    expect(refusal({ ...base, modalities: ["text", "audio"] })).toMatch(/^modalities: /)
    expect(refusal({ ...base, functions: [{ name: "f" }] })).toMatch(/^functions: /)
    expect(refusal({ ...base, function_call: "auto" })).toMatch(/^function_call: /)
    expect(refusal({ ...base, logit_bias: { "50256": -100 } })).toMatch(/^logit_bias: /)
    expect(refusal({ ...base, web_search_options: {} })).toMatch(/^web_search_options: /)
    expect(refusal({ ...base, response_format: { type: "json_object" } })).toMatch(/^response_format: /)
    expect(refusal({ ...base, temperature: 1.5 })).toMatch(/^temperature: .*0 to 1/)
    expect(refusal({ ...base, max_completion_tokens: -1 })).toMatch(/^max_completion_tokens: /)
    expect(refusal({ ...base, tools: [{ type: "custom", custom: { name: "x" } }] })).toMatch(
      /^tools\[0\]\.type: /,
    )
    expect(
      refusal({
        ...base,
        tools: [{ type: "function", function: { name: "f", parameters: { type: "array" } } }],
      }),
    ).toMatch(/^tools\[0\]\.function\.parameters\.type: /)
    expect(
      refusal({
        ...base,
        tool_choice: { type: "allowed_tools", allowed_tools: { mode: "auto", tools: [] } },
      }),
    ).toMatch(/^tool_choice: /)
    expect(
      refusal({ messages: [user([{ type: "input_audio", input_audio: { data: "", format: "wav" } }])] }),
    ).toMatch(/^messages\[0\]\.content\[0\]\.type: /)
    expect(refusal({ messages: [{ role: "function", name: "f", content: "x" }] })).toMatch(
      /^messages\[0\]\.role: /,
    )
    expect(refusal({ messages: [] })).toMatch(/^messages: /)
    expect(refusal({ messages: [{ role: "system", content: "only" }] })).toMatch(/^messages: /)
  })

  it("refuses a tool result that answers no call and a call left without a result", () => {
    const call = {
      role: "assistant",
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
    }
    expect(refusal({ messages: [user("Hi"), { role: "tool", tool_call_id: "c9", content: "x" }] })).toMatch(
      /^messages\[1\]\.tool_call_id: /,
    )
    expect(refusal({ messages: [user("Hi"), call, user("next")] })).toMatch(
      /^messages\[1\]\.tool_calls\[0\]\.id: /,
    )
    expect(
      refusal({
        messages: [
          user("Hi"),
          {
            ...call,
            tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "[1]" } }],
          },
        ],
      }),
    ).toMatch(/^messages\[1\]\.tool_calls\[0\]\.function\.arguments: /)
  })

  it("refuses pairs it does not translate", () => {
    for (const [from, to] of [
      ["/v1/messages", "/v1/responses"],
      ["/v1/responses", "/v1/chat/completions"],
      ["/v1/chat/completions", "/v1/responses"],
      ["/v1/messages", "/v1/messages"],
    ] as const) {
      const out = translateRequest(from, to, { messages: [user("Hi")] }, "m")
      expect(out).toBeInstanceOf(InvalidRequest)
      expect((out as InvalidRequest).message).toMatch(/cannot be translated/)
    }
  })
})
