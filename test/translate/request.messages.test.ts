import { describe, expect, it } from "vitest"
import { requestTranslator } from "./requestHelpers.js"

const { ok, refusal } = requestTranslator("/v1/messages", "/v1/chat/completions", "gpt-up")
const base = { model: "claude-client", max_tokens: 256 }

describe("translateRequest from Anthropic Messages to Chat Completions", () => {
  it("puts system first and maps the limit, sampling, stop sequences, stream and user", () => {
    const out = ok({
      ...base,
      system: [
        { type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } },
        { type: "text", text: "Use French." },
      ],
      messages: [{ role: "user", content: "Hi" }],
      temperature: 0.2,
      top_p: 0.8,
      top_k: 40,
      stop_sequences: ["END"],
      stream: true,
      metadata: { user_id: "u-1" },
      thinking: { type: "disabled" },
      service_tier: "auto",
    })
    expect(out).toEqual({
      model: "gpt-up",
      messages: [
        {
          role: "system",
          content: [
            { type: "text", text: "Be brief." },
            { type: "text", text: "Use French." },
          ],
        },
        { role: "user", content: "Hi" },
      ],
      max_completion_tokens: 256,
      temperature: 0.2,
      top_p: 0.8,
      stop: ["END"],
      stream: true,
      stream_options: { include_usage: true },
      user: "u-1",
    })
    expect(
      ok({ ...base, system: "Short.", messages: [{ role: "user", content: "Hi" }] })["messages"],
    ).toEqual([
      { role: "system", content: "Short." },
      { role: "user", content: "Hi" },
    ])
  })

  it("translates a tool loop over several turns into tool_calls and tool messages", () => {
    const out = ok({
      ...base,
      tools: [
        {
          name: "weather",
          description: "Weather",
          input_schema: { type: "object", properties: { city: { type: "string" } } },
        },
      ],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      messages: [
        { role: "user", content: "Paris and Rome?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "two calls", signature: "sig" },
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "toolu_1", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "weather", input: { city: "Rome" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: "12C" },
            {
              type: "tool_result",
              tool_use_id: "toolu_2",
              content: [{ type: "text", text: "18C" }],
              is_error: false,
            },
            { type: "text", text: "And Oslo?" },
          ],
        },
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "toolu_3", name: "weather", input: { city: "Oslo" } }],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_3" }] },
      ],
    })
    expect(out["messages"]).toEqual([
      { role: "user", content: "Paris and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "toolu_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "toolu_2", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "12C" },
      { role: "tool", tool_call_id: "toolu_2", content: "18C" },
      { role: "user", content: "And Oslo?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "toolu_3", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: "tool", tool_call_id: "toolu_3", content: "" },
    ])
    expect(out["tools"]).toEqual([
      {
        type: "function",
        function: {
          name: "weather",
          description: "Weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    ])
    expect(out["tool_choice"]).toBe("required")
    expect(out["parallel_tool_calls"]).toBe(false)
  })

  it("maps every tool_choice", () => {
    const tools = [{ name: "f", input_schema: { type: "object" } }]
    const choice = (tool_choice: unknown) =>
      ok({ ...base, tools, tool_choice, messages: [{ role: "user", content: "Hi" }] })
    expect(choice({ type: "auto" })["tool_choice"]).toBe("auto")
    expect(choice({ type: "none" })["tool_choice"]).toBe("none")
    expect(choice({ type: "tool", name: "f" })["tool_choice"]).toEqual({
      type: "function",
      function: { name: "f" },
    })
    expect(choice({ type: "auto" })).not.toHaveProperty("parallel_tool_calls")
  })

  it("translates images into image_url parts with data: URLs", () => {
    const out = ok({
      ...base,
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/4AAQ" } },
            { type: "image", source: { type: "url", url: "https://example.com/a.png" } },
            { type: "text", text: "Compare." },
          ],
        },
      ],
    })
    expect(out["messages"]).toEqual([
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/4AAQ" } },
          { type: "image_url", image_url: { url: "https://example.com/a.png" } },
          { type: "text", text: "Compare." },
        ],
      },
    ])
  })

  it("keeps a system message inside the conversation where it stands", () => {
    const out = ok({
      ...base,
      messages: [
        { role: "user", content: "Hi" },
        { role: "system", content: "Now in French." },
        { role: "user", content: "Encore" },
      ],
    })
    expect(out["messages"]).toEqual([
      { role: "user", content: "Hi" },
      { role: "system", content: "Now in French." },
      { role: "user", content: "Encore" },
    ])
  })

  it("refuses what changes the answer and has no Chat equivalent, naming the field", () => {
    const messages = [{ role: "user", content: "Hi" }]
    expect(refusal({ ...base, messages, thinking: { type: "enabled", budget_tokens: 2048 } })).toMatch(
      /^thinking: /,
    )
    expect(
      refusal({ ...base, messages, output_config: { format: { type: "json_schema", schema: {} } } }),
    ).toMatch(/^output_config: /)
    expect(
      refusal({ ...base, messages, mcp_servers: [{ type: "url", url: "https://x", name: "x" }] }),
    ).toMatch(/^mcp_servers: /)
    expect(refusal({ ...base, messages, container: "c1" })).toMatch(/^container: /)
    expect(
      refusal({ ...base, messages, tools: [{ type: "web_search_20250305", name: "web_search" }] }),
    ).toMatch(/^tools\[0\]\.type: the built-in tool "web_search_20250305"/)
    expect(
      refusal({
        ...base,
        messages: [{ role: "user", content: [{ type: "document", source: { type: "text", data: "x" } }] }],
      }),
    ).toMatch(/^messages\[0\]\.content\[0\]\.type: /)
    expect(
      refusal({
        ...base,
        messages: [
          {
            role: "user",
            content: [
              {
                type: "tool_result",
                tool_use_id: "t",
                content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }],
              },
            ],
          },
        ],
      }),
    ).toMatch(/^messages\[0\]\.content\[0\]\.content\[0\]: /)
    expect(
      refusal({
        ...base,
        messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "f" } }] }],
      }),
    ).toMatch(/^messages\[0\]\.content\[0\]\.source\.type: /)
    expect(refusal({ ...base, messages: [] })).toMatch(/^messages: /)
  })

  it("accepts adaptive thinking and drops it with the other Anthropic-only extras", () => {
    const out = ok({
      ...base,
      messages: [{ role: "user", content: "Hi" }],
      thinking: { type: "adaptive" },
      output_config: { effort: "high" },
      cache_control: { type: "ephemeral" },
      speed: "standard",
    })
    expect(Object.keys(out).sort()).toEqual(["max_completion_tokens", "messages", "model"])
  })
})
