import { describe, expect, it } from "vitest"
import { makeStreamMeter } from "../../src/meter/stream.js"

const sse = (events: ReadonlyArray<readonly [string | undefined, unknown]>): string =>
  events
    .map(
      ([event, data]) =>
        (event === undefined ? "" : `event: ${event}\n`) +
        `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`,
    )
    .join("")

const anthropic = (events: ReadonlyArray<unknown>): string =>
  sse(events.map((e) => [(e as { type: string }).type, e] as const))

const meterOf = (format: "anthropic" | "openai", body: string, chunkSize = body.length || 1) => {
  const meter = makeStreamMeter(format === "anthropic" ? "/v1/messages" : "/v1/chat/completions")
  const bytes = Buffer.from(body, "utf8")
  for (let i = 0; i < bytes.length; i += chunkSize) meter.push(bytes.subarray(i, i + chunkSize))
  meter.end()
  return meter
}

const messageStart = (usage: Record<string, unknown>) => ({
  type: "message_start",
  message: { id: "msg_1", type: "message", role: "assistant", content: [], usage },
})
const textStart = { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
const textDelta = (text: string) => ({
  type: "content_block_delta",
  index: 0,
  delta: { type: "text_delta", text },
})
const messageDelta = (usage: Record<string, unknown>) => ({
  type: "message_delta",
  delta: { stop_reason: "end_turn", stop_sequence: null },
  usage,
})

describe("Anthropic stream meter", () => {
  const full = anthropic([
    messageStart({
      input_tokens: 1200,
      output_tokens: 1,
      cache_read_input_tokens: 50,
      cache_creation_input_tokens: 7,
    }),
    textStart,
    { type: "ping" },
    textDelta("Hello, "),
    textDelta("wörld"),
    { type: "content_block_stop", index: 0 },
    messageDelta({ output_tokens: 310 }),
    { type: "message_stop" },
  ])

  it("merges input and cache tokens from message_start with output from message_delta", () => {
    const meter = meterOf("anthropic", full)
    expect(meter.usage).toEqual({
      inputTokens: 1200,
      outputTokens: 310,
      cacheReadTokens: 50,
      cacheWriteTokens: 7,
      reported: true,
    })
    expect(meter.finished).toBe(true)
    expect(meter.contentStarted).toBe(true)
    expect(meter.failure).toBeUndefined()
    expect(meter.inbandError).toBeUndefined()
    expect(meter.outputChars).toBe(Buffer.byteLength("Hello, wörld"))
  })

  it("gives the same usage and state whatever the chunk size", () => {
    const whole = meterOf("anthropic", full)
    for (const size of [1, 2, 3, 7, 64]) {
      const meter = meterOf("anthropic", full, size)
      expect(meter.usage).toEqual(whole.usage)
      expect(meter.outputChars).toBe(whole.outputChars)
      expect(meter.finished).toBe(true)
    }
  })

  it("gives the same usage and state when split into two chunks at every byte offset", () => {
    const whole = meterOf("anthropic", full)
    const bytes = Buffer.from(full, "utf8")
    for (let i = 0; i <= bytes.length; i++) {
      const meter = makeStreamMeter("/v1/messages")
      meter.push(bytes.subarray(0, i))
      meter.push(bytes.subarray(i))
      meter.end()
      expect(meter.usage).toEqual(whole.usage)
      expect(meter.outputChars).toBe(whole.outputChars)
      expect([meter.finished, meter.contentStarted, meter.failure]).toEqual([true, true, undefined])
    }
  })

  it("keeps input when message_delta reports it as 0, null or not at all, and takes its lower final output", () => {
    for (const repeat of [{ input_tokens: 0 }, { input_tokens: null }, {}]) {
      const meter = meterOf(
        "anthropic",
        anthropic([
          messageStart({ input_tokens: 42, output_tokens: 1, cache_read_input_tokens: 9 }),
          messageDelta({ ...repeat, output_tokens: 0, cache_read_input_tokens: null }),
          { type: "message_stop" },
        ]),
      )
      expect(meter.usage).toMatchObject({ inputTokens: 42, outputTokens: 0, cacheReadTokens: 9 })
    }
  })

  it("takes the larger input when message_delta repeats a higher count", () => {
    const meter = meterOf(
      "anthropic",
      anthropic([
        messageStart({ input_tokens: 10, output_tokens: 1 }),
        messageDelta({ input_tokens: 12, output_tokens: 5, cache_creation_input_tokens: 3 }),
      ]),
    )
    expect(meter.usage).toMatchObject({ inputTokens: 12, outputTokens: 5, cacheWriteTokens: 3 })
    expect(meter.finished).toBe(false)
  })

  it("reports no usage for a stream without usage", () => {
    const meter = meterOf("anthropic", anthropic([{ type: "message_start", message: {} }, textStart]))
    expect(meter.usage.reported).toBe(false)
    expect(meter.usage.inputTokens).toBe(0)
  })

  it("fails with malformed on an event whose data is not JSON, keeping usage seen before", () => {
    const body =
      anthropic([messageStart({ input_tokens: 5, output_tokens: 1 }), textStart, textDelta("ab")]) +
      "event: content_block_delta\ndata: {not json\n\n" +
      anthropic([messageDelta({ output_tokens: 99 }), { type: "message_stop" }])
    const meter = meterOf("anthropic", body)
    expect(meter.failure).toBe("malformed")
    expect(meter.usage).toMatchObject({ inputTokens: 5, outputTokens: 1 })
    expect(meter.finished).toBe(false)
  })

  it("detects an in-band error event", () => {
    const meter = meterOf(
      "anthropic",
      anthropic([textStart]) +
        sse([["error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }]]),
    )
    expect(meter.inbandError).toEqual({ type: "overloaded_error", message: "Overloaded" })
    expect(meter.failure).toBeUndefined()
  })

  it("does not count an empty text block start as content, but a delta or a tool_use block start", () => {
    expect(
      meterOf("anthropic", anthropic([messageStart({}), textStart, { type: "ping" }])).contentStarted,
    ).toBe(false)
    expect(meterOf("anthropic", anthropic([textStart, textDelta("")])).contentStarted).toBe(true)
    const toolStart = {
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "t1", name: "get", input: {} },
    }
    expect(meterOf("anthropic", anthropic([toolStart])).contentStarted).toBe(true)
  })

  it("counts UTF-8 bytes of tool-call JSON and thinking deltas as output", () => {
    const meter = meterOf(
      "anthropic",
      anthropic([
        { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "hmm…" } },
        { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"a":' } },
      ]),
    )
    expect(meter.outputChars).toBe(Buffer.byteLength("hmm…") + 5)
  })

  it("reports event_too_large for an event over 4 MiB", () => {
    const meter = makeStreamMeter("/v1/messages")
    meter.push(Buffer.from("event: content_block_delta\ndata: "))
    const chunk = Buffer.alloc(64 * 1024, 0x20)
    for (let i = 0; i < 70; i++) meter.push(chunk)
    expect(meter.failure).toBe("event_too_large")
  })
})

const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage: unknown = null) => ({
  id: "c1",
  object: "chat.completion.chunk",
  choices: [{ index: 0, delta, finish_reason: finish }],
  usage,
})

describe("OpenAI stream meter", () => {
  const usageChunk = {
    id: "c1",
    object: "chat.completion.chunk",
    choices: [],
    usage: {
      prompt_tokens: 1500,
      completion_tokens: 40,
      total_tokens: 1540,
      prompt_tokens_details: { cached_tokens: 1024 },
    },
  }
  const full = sse([
    [undefined, chunk({ role: "assistant", content: "" })],
    [undefined, chunk({ content: "Hi ☃" })],
    [undefined, chunk({}, "stop")],
    [undefined, usageChunk],
    [undefined, "[DONE]"],
  ])

  it("maps the final usage chunk with cached tokens", () => {
    const meter = meterOf("openai", full)
    expect(meter.usage).toEqual({
      inputTokens: 476,
      outputTokens: 40,
      cacheReadTokens: 1024,
      cacheWriteTokens: 0,
      reported: true,
    })
    expect(meter.finished).toBe(true)
    expect(meter.failure).toBeUndefined()
    expect(meter.outputChars).toBe(Buffer.byteLength("Hi ☃"))
  })

  it("treats [DONE] as valid and anything else that is not JSON as malformed", () => {
    expect(meterOf("openai", full, 5).failure).toBeUndefined()
    const meter = meterOf(
      "openai",
      sse([
        [undefined, chunk({ content: "a" })],
        [undefined, "[DONE"],
      ]),
    )
    expect(meter.failure).toBe("malformed")
    expect(meter.finished).toBe(false)
  })

  it("detects an in-band error chunk", () => {
    const meter = meterOf(
      "openai",
      sse([
        [undefined, chunk({ content: "a" })],
        [undefined, { error: { type: "server_error", message: "boom" } }],
      ]),
    )
    expect(meter.inbandError).toEqual({ type: "server_error", message: "boom" })
  })

  it("starts content on non-empty content, tool calls, refusal or a finish reason, not on a role-only delta", () => {
    const started = (c: unknown) => meterOf("openai", sse([[undefined, c]])).contentStarted
    expect(started(chunk({ role: "assistant", content: "" }))).toBe(false)
    expect(started(chunk({ content: null }))).toBe(false)
    expect(started(chunk({ content: "x" }))).toBe(true)
    expect(started(chunk({ tool_calls: [{ index: 0, function: { name: "f", arguments: "" } }] }))).toBe(true)
    expect(started(chunk({ refusal: "no" }))).toBe(true)
    expect(started(chunk({}, "length"))).toBe(true)
    expect(started(usageChunk)).toBe(false)
  })

  it("counts tool-call argument bytes as output", () => {
    const meter = meterOf(
      "openai",
      sse([[undefined, chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":"é"}' } }] })]]),
    )
    expect(meter.outputChars).toBe(Buffer.byteLength('{"q":"é"}'))
  })

  it("reports no usage when the stream has none", () => {
    const meter = meterOf(
      "openai",
      sse([
        [undefined, chunk({ content: "x" })],
        [undefined, "[DONE]"],
      ]),
    )
    expect(meter.usage.reported).toBe(false)
    expect(meter.finished).toBe(true)
  })
})
