import { describe, expect, it } from "vitest"
import { requestTranslator } from "./requestHelpers.js"

const { ok, refusal } = requestTranslator("/v1/responses", "/v1/messages", "claude-up")

describe("translateRequest from Responses to Anthropic Messages", () => {
  it("takes a string input and instructions, and maps the limit, sampling, stream and user", () => {
    expect(
      ok({
        model: "gpt-client",
        instructions: "Be brief.",
        input: "Hi",
        max_output_tokens: 300,
        temperature: 0.3,
        top_p: 1,
        stream: true,
        user: "u-9",
        store: false,
        reasoning: { effort: "medium", summary: "auto" },
        include: ["reasoning.encrypted_content"],
        text: { format: { type: "text" }, verbosity: "low" },
        truncation: "auto",
      }),
    ).toEqual({
      model: "claude-up",
      max_tokens: 300,
      system: "Be brief.",
      messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
      temperature: 0.3,
      top_p: 1,
      stream: true,
      metadata: { user_id: "u-9" },
    })
  })

  it("translates a tool loop of function_call and function_call_output items over several turns", () => {
    const out = ok({
      instructions: "You check weather.",
      input: [
        { role: "developer", content: "Use Celsius." },
        { role: "user", content: [{ type: "input_text", text: "Paris and Rome?" }] },
        { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "opaque" },
        {
          type: "function_call",
          id: "fc_1",
          call_id: "call_1",
          name: "weather",
          arguments: '{"city":"Paris"}',
        },
        {
          type: "function_call",
          id: "fc_2",
          call_id: "call_2",
          name: "weather",
          arguments: '{"city":"Rome"}',
        },
        { type: "function_call_output", call_id: "call_1", output: "12C" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "18C" }] },
        {
          type: "message",
          role: "assistant",
          id: "msg_1",
          status: "completed",
          content: [{ type: "output_text", text: "Paris 12C, Rome 18C.", annotations: [] }],
        },
        { type: "message", role: "user", content: "Thanks" },
      ],
      tools: [
        {
          type: "function",
          name: "weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
          strict: true,
        },
      ],
      tool_choice: { type: "function", name: "weather" },
      parallel_tool_calls: false,
    })
    expect(out["system"]).toEqual([
      { type: "text", text: "You check weather." },
      { type: "text", text: "Use Celsius." },
    ])
    expect(out["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: "Paris and Rome?" }] },
      {
        role: "assistant",
        content: [
          { type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris" } },
          { type: "tool_use", id: "call_2", name: "weather", input: { city: "Rome" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_1", content: "12C" },
          { type: "tool_result", tool_use_id: "call_2", content: [{ type: "text", text: "18C" }] },
        ],
      },
      { role: "assistant", content: [{ type: "text", text: "Paris 12C, Rome 18C." }] },
      { role: "user", content: [{ type: "text", text: "Thanks" }] },
    ])
    expect(out["tools"]).toEqual([
      {
        name: "weather",
        input_schema: { type: "object", properties: { city: { type: "string" } } },
        strict: true,
      },
    ])
    expect(out["tool_choice"]).toEqual({ type: "tool", name: "weather", disable_parallel_tool_use: true })
  })

  it("translates input images", () => {
    const out = ok({
      input: [
        {
          role: "user",
          content: [
            { type: "input_image", image_url: "data:image/webp;base64,UklGR", detail: "auto" },
            { type: "input_image", image_url: "https://example.com/d.gif", detail: "low" },
          ],
        },
      ],
    })
    expect(out["messages"]).toEqual([
      {
        role: "user",
        content: [
          { type: "image", source: { type: "base64", media_type: "image/webp", data: "UklGR" } },
          { type: "image", source: { type: "url", url: "https://example.com/d.gif" } },
        ],
      },
    ])
  })

  it("refuses what needs OpenAI's stored state or built-in tools, naming the field", () => {
    expect(refusal({ input: "Hi", previous_response_id: "resp_1" })).toMatch(/^previous_response_id: /)
    expect(refusal({ input: "Hi", conversation: "conv_1" })).toMatch(/^conversation: /)
    expect(refusal({ input: "Hi", background: true })).toMatch(/^background: /)
    expect(refusal({ input: "Hi", prompt: { id: "pmpt_1" } })).toMatch(/^prompt: /)
    expect(
      refusal({ input: "Hi", text: { format: { type: "json_schema", name: "x", schema: {} } } }),
    ).toMatch(/^text: /)
    expect(refusal({ input: "Hi", top_logprobs: 2 })).toMatch(/^top_logprobs: /)
    expect(refusal({ input: "Hi", tools: [{ type: "web_search" }] })).toMatch(
      /^tools\[0\]\.type: the built-in tool "web_search"/,
    )
    expect(refusal({ input: "Hi", tools: [{ type: "file_search", vector_store_ids: [] }] })).toMatch(
      /^tools\[0\]\.type: /,
    )
    expect(refusal({ input: "Hi", tool_choice: { type: "web_search_preview" } })).toMatch(/^tool_choice: /)
    expect(refusal({ input: [{ type: "item_reference", id: "msg_1" }] })).toMatch(/^input\[0\]: /)
    expect(refusal({ input: [{ type: "web_search_call", id: "ws_1", status: "completed" }] })).toMatch(
      /^input\[0\]\.type: /,
    )
    expect(
      refusal({ input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] }),
    ).toMatch(/^input\[0\]\.content\[0\]\.type: /)
    expect(
      refusal({
        input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1", detail: "auto" }] }],
      }),
    ).toMatch(/^input\[0\]\.content\[0\]\.file_id: /)
    expect(refusal({ input: [{ type: "function_call_output", call_id: "nope", output: "x" }] })).toMatch(
      /^input\[0\]\.call_id: /,
    )
    expect(refusal({ input: "Hi", temperature: 2 })).toMatch(/^temperature: /)
    expect(refusal({ input: [] })).toMatch(/^input: /)
    expect(refusal({})).toMatch(/^input: /)
  })
})
