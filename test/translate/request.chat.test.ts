import { describe, expect, it } from "vitest"
import { requestTranslator } from "./requestHelpers.js"

const { ok, refusal } = requestTranslator("/v1/chat/completions", "/v1/messages", "claude-up")
const user = (content: unknown) => ({ role: "user", content })

describe("translateRequest from Chat Completions to Anthropic Messages", () => {
  it("turns system and developer messages into system, wherever they stand, and sets the upstream model", () => {
    const out = ok({
      model: "gpt-client",
      messages: [
        { role: "system", content: "Be brief." },
        user("Hi"),
        { role: "developer", content: [{ type: "text", text: "Use French." }] },
      ],
    })
    expect(out).toEqual({
      model: "claude-up",
      max_tokens: 4096,
      system: [
        { type: "text", text: "Be brief." },
        { type: "text", text: "Use French." },
      ],
      messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
    })
    expect(ok({ messages: [{ role: "system", content: "Only one." }, user("Hi")] })["system"]).toBe(
      "Only one.",
    )
  })

  it("translates a tool loop over several turns into tool_use and tool_result blocks", () => {
    const out = ok({
      messages: [
        user("Weather in Paris and Rome?"),
        {
          role: "assistant",
          content: "Checking.",
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
            { id: "call_2", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_2", content: "18C" },
        { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "12C" }] },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call.3", type: "function", function: { name: "convert", arguments: "" } }],
        },
        { role: "tool", tool_call_id: "call.3", content: "done" },
        user("Thanks"),
      ],
      tools: [
        {
          type: "function",
          function: {
            name: "weather",
            parameters: { type: "object", properties: { city: { type: "string" } } },
          },
        },
      ],
    })
    expect(out["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: "Weather in Paris and Rome?" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Checking." },
          { type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris" } },
          { type: "tool_use", id: "call_2", name: "weather", input: { city: "Rome" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_2", content: "18C" },
          { type: "tool_result", tool_use_id: "call_1", content: [{ type: "text", text: "12C" }] },
        ],
      },
      { role: "assistant", content: [{ type: "tool_use", id: "call_3", name: "convert", input: {} }] },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_3", content: "done" },
          { type: "text", text: "Thanks" },
        ],
      },
    ])
    expect(out["tools"]).toEqual([
      { name: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } },
    ])
  })

  it("merges consecutive messages of one role into one turn", () => {
    const out = ok({
      messages: [
        user("a"),
        user("b"),
        { role: "assistant", content: "c" },
        { role: "assistant", content: "d" },
      ],
    })
    expect(out["messages"]).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "c" },
          { type: "text", text: "d" },
        ],
      },
    ])
  })

  it("opens with a user turn before an assistant greeting, drops blank texts and trims the end of a prefill", () => {
    const out = ok({
      messages: [
        { role: "system", content: "Pirate." },
        { role: "assistant", content: "Ahoy! How may I help?" },
        user([
          { type: "text", text: " " },
          { type: "text", text: "Treasure?" },
        ]),
        { role: "assistant", content: "\n" },
        user("Where?"),
        { role: "assistant", content: "It lies " },
      ],
    })
    expect(out["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: "." }] },
      { role: "assistant", content: [{ type: "text", text: "Ahoy! How may I help?" }] },
      {
        role: "user",
        content: [
          { type: "text", text: "Treasure?" },
          { type: "text", text: "Where?" },
        ],
      },
      { role: "assistant", content: [{ type: "text", text: "It lies" }] },
    ])
    const result = ok({
      messages: [
        user("Go"),
        {
          role: "assistant",
          tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "c1", content: "" },
      ],
    })
    expect(result["messages"]).toContainEqual({
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "c1" }],
    })
  })

  it("translates images: a base64 data: URL to a base64 source, an https URL to a URL source", () => {
    const out = ok({
      messages: [
        user([
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=", detail: "high" } },
          { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
        ]),
      ],
    })
    expect(out["messages"]).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
        ],
      },
    ])
    const image = (url: string) => user([{ type: "image_url", image_url: { url } }])
    expect(refusal({ messages: [image("data:image/tiff;base64,AAAA")] })).toMatch(
      /^messages\[0\]\.content\[0\]\.image_url\.url: /,
    )
    expect(refusal({ messages: [image("data:image/png,rawbytes")] })).toMatch(/must be base64/)
    expect(refusal({ messages: [image("ftp://x/y.png")] })).toMatch(/http\(s\) or a data: URL/)
  })

  it("maps the output limit, sampling, stop sequences, stream and user", () => {
    const out = ok({
      messages: [user("Hi")],
      max_tokens: 50,
      max_completion_tokens: 100,
      temperature: 0.5,
      top_p: 0.9,
      stop: "END",
      stream: true,
      stream_options: { include_usage: true },
      user: "u-42",
    })
    expect(out).toMatchObject({
      max_tokens: 100,
      temperature: 0.5,
      top_p: 0.9,
      stop_sequences: ["END"],
      stream: true,
      metadata: { user_id: "u-42" },
    })
    expect(out).not.toHaveProperty("stream_options")
    expect(ok({ messages: [user("Hi")], max_tokens: 7, stop: ["a", "b"] })).toMatchObject({
      max_tokens: 7,
      stop_sequences: ["a", "b"],
    })
    expect(ok({ messages: [user("Hi")], safety_identifier: "s-1" })["metadata"]).toEqual({ user_id: "s-1" })
  })

  it("maps tool_choice and parallel_tool_calls, and completes a schema without a type", () => {
    const tools = [
      {
        type: "function",
        function: { name: "f", description: "does f", parameters: { properties: {} }, strict: true },
      },
    ]
    const choice = (tool_choice: unknown, parallel_tool_calls?: boolean) =>
      ok({
        messages: [user("Hi")],
        tools,
        tool_choice,
        ...(parallel_tool_calls === undefined ? {} : { parallel_tool_calls }),
      })["tool_choice"]
    expect(choice("auto")).toEqual({ type: "auto" })
    expect(choice("required")).toEqual({ type: "any" })
    expect(choice("none")).toEqual({ type: "none" })
    expect(choice({ type: "function", function: { name: "f" } }, false)).toEqual({
      type: "tool",
      name: "f",
      disable_parallel_tool_use: true,
    })
    expect(choice(undefined, false)).toEqual({ type: "auto", disable_parallel_tool_use: true })
    expect(choice(undefined)).toBeUndefined()
    expect(ok({ messages: [user("Hi")], tools })["tools"]).toEqual([
      { name: "f", description: "does f", input_schema: { type: "object", properties: {} }, strict: true },
    ])
    expect(ok({ messages: [user("Hi")], tool_choice: "required" })).not.toHaveProperty("tool_choice")
  })

  it("drops harmless extras", () => {
    const out = ok({
      messages: [user("Hi")],
      seed: 1,
      presence_penalty: 0.5,
      frequency_penalty: 0.1,
      store: true,
      metadata: { a: "b" },
      n: 1,
      logprobs: false,
      service_tier: "auto",
      reasoning_effort: "low",
      prompt_cache_key: "k",
      response_format: { type: "text" },
    })
    expect(Object.keys(out).sort()).toEqual(["max_tokens", "messages", "model"])
  })
})
