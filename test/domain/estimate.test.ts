import { deriveSessionId } from "../../src/limits/session.js"
import { describe, expect, it } from "vitest"
import { estimateInputTokens } from "../../src/domain/estimate.js"

/**
 * ADR 0003: input tokens = ceil(UTF-8 bytes of the request's text content / 4).
 * Each case names the bytes it expects, so a change of what counts shows up here.
 */

const user = (content: unknown) => ({ role: "user", content })

describe("estimateInputTokens: rounding and bytes", () => {
  it("divides UTF-8 bytes by 4 and rounds up", () => {
    expect(estimateInputTokens({ messages: [] })).toBe(0)
    expect(estimateInputTokens({ messages: [user("a")] })).toBe(1)
    expect(estimateInputTokens({ messages: [user("abcd")] })).toBe(1)
    expect(estimateInputTokens({ messages: [user("abcde")] })).toBe(2)
  })

  it("counts bytes, not characters: CJK 3 bytes, Cyrillic and é 2, emoji 4", () => {
    expect(estimateInputTokens({ messages: [user("日本語")] })).toBe(3) // 9 bytes
    expect(estimateInputTokens({ messages: [user("Привет")] })).toBe(3) // 12 bytes
    expect(estimateInputTokens({ messages: [user("éé")] })).toBe(1) // 4 bytes
    expect(estimateInputTokens({ messages: [user("👍👍👍")] })).toBe(3) // 12 bytes
  })

  it("sums the bytes of the whole request before rounding, not per piece", () => {
    // 1 + 1 + 1 bytes: one token, not three.
    const body = { system: "a", messages: [user("b"), { role: "assistant", content: "c" }] }
    expect(estimateInputTokens(body)).toBe(1)
  })
})

describe("estimateInputTokens: what counts", () => {
  it("counts a system string and string message content, not roles or other fields", () => {
    const body = {
      model: "claude-sonnet-5-5",
      max_tokens: 1024,
      temperature: 0.2,
      metadata: { user_id: "someone-with-a-long-identifier" },
      stop_sequences: ["STOP HERE PLEASE"],
      system: "You are terse.", // 14 bytes
      messages: [user("Hello"), { role: "assistant", content: "Hi there" }], // 5 + 8 bytes
    }
    expect(estimateInputTokens(body)).toBe(7) // ceil(27 / 4)
  })

  it("counts the text of system blocks, not their type or cache_control", () => {
    const body = {
      system: [
        { type: "text", text: "You are terse.", cache_control: { type: "ephemeral" } }, // 14 bytes
        { type: "text", text: "Be kind." }, // 8 bytes
      ],
      messages: [],
    }
    expect(estimateInputTokens(body)).toBe(6) // ceil(22 / 4)
  })

  it("counts the text of message text blocks and thinking, not the signature", () => {
    const body = {
      messages: [
        user([
          { type: "text", text: "abc" },
          { type: "text", text: "defgh" },
        ]), // 8 bytes
        {
          role: "assistant",
          content: [{ type: "thinking", thinking: "Let me see", signature: "EqQBCkgIARABGAIiQL".repeat(20) }], // 10
        },
      ],
    }
    expect(estimateInputTokens(body)).toBe(5) // ceil(18 / 4)
  })

  it("counts a tool_use block's name and its input as JSON, not its id or type", () => {
    const body = {
      messages: [
        {
          role: "assistant",
          content: [
            {
              type: "tool_use",
              id: "toolu_01A09q90qw90lq917835lq9",
              name: "get_weather",
              input: { city: "Paris" },
            },
          ],
        },
      ],
    }
    // "get_weather" 11 + '{"city":"Paris"}' 16 bytes
    expect(estimateInputTokens(body)).toBe(7) // ceil(27 / 4)
  })

  it("counts tool_result content, as a string or as text blocks, not the tool_use_id", () => {
    const asString = {
      messages: [
        user([
          { type: "tool_result", tool_use_id: "toolu_01A09q90qw90lq917835lq9", content: "18 °C and sunny" },
        ]),
      ],
    }
    expect(estimateInputTokens(asString)).toBe(4) // 16 bytes
    const asBlocks = {
      messages: [
        user([
          {
            type: "tool_result",
            tool_use_id: "toolu_01",
            content: [
              { type: "text", text: "18 °C" }, // 6 bytes
              { type: "text", text: "and sunny" }, // 9 bytes
            ],
          },
          { type: "text", text: "Thanks!" }, // 7 bytes
        ]),
      ],
    }
    expect(estimateInputTokens(asBlocks)).toBe(6) // ceil(22 / 4)
  })

  it("counts tool definitions as their JSON", () => {
    const tools = [
      {
        name: "get_weather",
        description: "Current weather",
        input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    ]
    // '[{"name":"get_weather","description":"Current weather","input_schema":{…}}]' is 149 bytes; "Hi" 2.
    expect(estimateInputTokens({ tools, messages: [user("Hi")] })).toBe(38) // ceil(151 / 4)
  })

  it("counts OpenAI tools and legacy functions as their JSON", () => {
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }]
    expect(estimateInputTokens({ tools, messages: [] })).toBe(22) // 86 bytes
    const functions = [{ name: "f", parameters: {} }]
    expect(estimateInputTokens({ functions, messages: [] })).toBe(8) // 30 bytes
  })

  it("counts OpenAI tool_calls' function name and arguments, not their id or type, and tool messages", () => {
    const body = {
      messages: [
        { role: "system", content: "Be brief." }, // 9 bytes
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_abc123",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Paris"}' }, // 11 + 16 bytes
            },
          ],
        },
        { role: "tool", tool_call_id: "call_abc123", content: "sunny" }, // 5 bytes
      ],
    }
    expect(estimateInputTokens(body)).toBe(11) // ceil(41 / 4)
  })

  it("counts OpenAI text content parts", () => {
    const body = {
      messages: [
        user([
          { type: "text", text: "What is" }, // 7 bytes
          { type: "text", text: " this?" }, // 6 bytes
        ]),
      ],
    }
    expect(estimateInputTokens(body)).toBe(4) // ceil(13 / 4)
  })
})

describe("estimateInputTokens: what adds nothing", () => {
  const png =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

  it("images and documents add nothing; only the text beside them counts", () => {
    const anthropic = {
      messages: [
        user([
          { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
          {
            type: "document",
            source: { type: "base64", media_type: "application/pdf", data: png.repeat(50) },
          },
          { type: "text", text: "Describe it" }, // 11 bytes
        ]),
      ],
    }
    expect(estimateInputTokens(anthropic)).toBe(3)
    const openai = {
      messages: [
        user([
          { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } },
          { type: "text", text: "Describe it" },
        ]),
      ],
    }
    expect(estimateInputTokens(openai)).toBe(3)
  })

  it("a request with only structure counts 0", () => {
    const body = {
      model: "gpt-5",
      messages: [
        { role: "user", content: "" },
        { role: "assistant", content: [] },
        { role: "user", content: [{ type: "text", text: "" }] },
      ],
    }
    expect(estimateInputTokens(body)).toBe(0)
  })

  it("malformed shapes count nothing instead of throwing", () => {
    expect(estimateInputTokens({})).toBe(0)
    expect(estimateInputTokens({ messages: "hello" })).toBe(0)
    expect(
      estimateInputTokens({ system: 42, messages: [null, 7, { content: 12 }, { content: [null, "x", 3] }] }),
    ).toBe(0)
    expect(
      estimateInputTokens({
        messages: [{ role: "assistant", tool_calls: [null, { function: { name: 5 } }] }],
      }),
    ).toBe(0)
  })

  it("counts a Responses request's instructions and input: string, messages, calls and their outputs", () => {
    expect(estimateInputTokens({ instructions: "abcd", input: "efghijkl" })).toBe(3)
    expect(
      estimateInputTokens({
        input: [
          { role: "user", content: [{ type: "input_text", text: "abcd" }] },
          { type: "function_call", call_id: "c", name: "ab", arguments: "{}" },
          { type: "function_call_output", call_id: "c", output: "abcdefgh" },
          { role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,AAAA" }] },
        ],
      }),
    ).toBe(4)
  })

  it("counts embeddings input: strings by bytes, token ids as one token each", () => {
    expect(estimateInputTokens({ input: ["abcd", "efgh"] })).toBe(2)
    expect(estimateInputTokens({ input: [1, 2, 3] })).toBe(3)
    expect(estimateInputTokens({ input: [[1, 2], [3]] })).toBe(3)
  })
})

describe("derived sessions of Responses requests", () => {
  it("use instructions as the system prompt and the first user input as the first message", () => {
    const a = deriveSessionId("/v1/responses", "t", { instructions: "be brief", input: "hi" })
    const b = deriveSessionId("/v1/responses", "t", {
      instructions: "be brief",
      input: ["hi", { role: "user", content: "x" }],
    })
    expect(a).toBe(
      deriveSessionId("/v1/responses", "t", { instructions: "be brief", input: "hi", model: "m" }),
    )
    expect(a).toMatch(/^d-[0-9a-f]{24}$/)
    expect(b).toBe(
      deriveSessionId("/v1/responses", "t", {
        instructions: "be brief",
        input: [
          { role: "user", content: "x" },
          { role: "assistant", content: "y" },
        ],
      }),
    )
    expect(a).not.toBe(b)
    expect(deriveSessionId("/v1/embeddings", "t", { input: "hi" })).toBeUndefined()
  })
})
