import { describe, expect, it } from "vitest"
import { readJsonBody } from "../../src/meter/json.js"
import { makeUsageAcc, mergeUsage, openaiReport } from "../../src/meter/usage.js"

const none = {
  inputTokens: undefined,
  outputTokens: undefined,
  cacheReadTokens: undefined,
  cacheWriteTokens: undefined,
}

describe("mergeUsage", () => {
  it("never erases a reported count with a later absent one and takes the latest output", () => {
    const acc = makeUsageAcc()
    mergeUsage(acc, { inputTokens: 100, outputTokens: 1, cacheReadTokens: 20, cacheWriteTokens: 5 })
    mergeUsage(acc, { ...none, outputTokens: 0 })
    expect(acc).toEqual({
      inputTokens: 100,
      outputTokens: 0,
      cacheReadTokens: 20,
      cacheWriteTokens: 5,
      reported: true,
    })
    mergeUsage(acc, { inputTokens: 50, outputTokens: 7, cacheReadTokens: 30, cacheWriteTokens: 0 })
    expect(acc).toEqual({
      inputTokens: 100,
      outputTokens: 7,
      cacheReadTokens: 30,
      cacheWriteTokens: 5,
      reported: true,
    })
  })

  it("stays unreported for a report without any field", () => {
    const acc = makeUsageAcc()
    mergeUsage(acc, none)
    expect(acc.reported).toBe(false)
  })

  it("clamps OpenAI input at 0 when cached tokens exceed prompt tokens and ignores junk values", () => {
    expect(openaiReport({ prompt_tokens: 3, prompt_tokens_details: { cached_tokens: 5 } })).toMatchObject({
      inputTokens: 0,
      cacheReadTokens: 5,
    })
    expect(openaiReport({ prompt_tokens: -1, completion_tokens: 1.5 })).toEqual(none)
    expect(openaiReport(null)).toBeUndefined()
  })
})

describe("readJsonBody usage", () => {
  it("reads an Anthropic message's usage, missing cache fields as 0", () => {
    const body = JSON.stringify({
      id: "msg_1",
      type: "message",
      content: [{ type: "text", text: "hi" }],
      usage: { input_tokens: 12, output_tokens: 16, cache_read_input_tokens: 4 },
    })
    expect(readJsonBody("/v1/messages", Buffer.from(body)).usage).toEqual({
      inputTokens: 12,
      outputTokens: 16,
      cacheReadTokens: 4,
      cacheWriteTokens: 0,
    })
  })

  it("reads an OpenAI completion's usage with cached tokens", () => {
    const body = JSON.stringify({
      object: "chat.completion",
      choices: [],
      usage: { prompt_tokens: 2006, completion_tokens: 300, prompt_tokens_details: { cached_tokens: 1920 } },
    })
    expect(readJsonBody("/v1/chat/completions", body).usage).toEqual({
      inputTokens: 86,
      outputTokens: 300,
      cacheReadTokens: 1920,
      cacheWriteTokens: 0,
    })
  })

  it("is undefined when usage is absent, empty or the body is not JSON", () => {
    expect(readJsonBody("/v1/messages", '{"type":"message"}').usage).toBeUndefined()
    expect(readJsonBody("/v1/messages", '{"usage":{}}').usage).toBeUndefined()
    expect(readJsonBody("/v1/chat/completions", '{"usage":null}').usage).toBeUndefined()
    expect(readJsonBody("/v1/chat/completions", "not json").usage).toBeUndefined()
    expect(readJsonBody("/v1/chat/completions", "[1]").usage).toBeUndefined()
  })
})
