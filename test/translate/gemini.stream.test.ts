import { describe, expect, it } from "vitest"
import { GeminiToChatStream } from "../../src/translate/gemini/index.js"
import { events, normalized, type Json } from "./streamHelpers.js"

/** Runs the translator over `chunks`; the client's whole output. */
const run = (chunks: ReadonlyArray<string | Uint8Array>): string => {
  const translator = new GeminiToChatStream("client-model")
  let out = ""
  for (const chunk of chunks)
    out += translator.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)?.toString("utf8") ?? ""
  return out + (translator.end()?.toString("utf8") ?? "")
}

/** Gemini SSE events as the real API writes them: `data: <json>` separated by CRLF CRLF. */
const gemini = (responses: ReadonlyArray<unknown>, separator = "\r\n\r\n") =>
  responses.map((r) => `data: ${JSON.stringify(r)}${separator}`).join("")

const usage = (prompt: number, candidates: number, extra: Json = {}) => ({
  promptTokenCount: prompt,
  candidatesTokenCount: candidates,
  totalTokenCount: prompt + candidates,
  ...extra,
})
const candidate = (parts: Array<Json>, finishReason?: string) => ({
  candidates: [{ content: { role: "model", parts }, ...(finishReason ? { finishReason } : {}), index: 0 }],
})

const STREAM = gemini([
  { ...candidate([{ text: "Let me think", thought: true }]), usageMetadata: usage(10, 0), responseId: "r1" },
  { ...candidate([{ text: "Hel" }]), usageMetadata: usage(10, 1), responseId: "r1" },
  { ...candidate([{ text: "lo 🌍" }]), usageMetadata: usage(10, 2), responseId: "r1" },
  {
    ...candidate(
      [
        { functionCall: { name: "weather", args: { city: "Oslo" } }, thoughtSignature: "c2ln" },
        { functionCall: { id: "g-2", name: "ping" } },
      ],
      "STOP",
    ),
    usageMetadata: usage(10, 5, { thoughtsTokenCount: 4, cachedContentTokenCount: 6 }),
    responseId: "r1",
  },
])

const deltas = (out: Array<[string, Json | string]>) =>
  out.map(([, data]) => (typeof data === "string" ? data : data["choices"]?.[0]?.["delta"]))

describe("Gemini stream → Chat Completions stream", () => {
  it("writes the role chunk, content and tool call chunks, the finish chunk, the usage chunk and [DONE]", () => {
    const out = events(run([STREAM]))
    expect(deltas(out).slice(0, 5)).toEqual([
      { role: "assistant", content: "" },
      { content: "Hel" },
      { content: "lo 🌍" },
      {
        tool_calls: [
          {
            index: 0,
            // The part's thoughtSignature ("c2ln") rides in the id, base64url: the client sends it back.
            id: expect.stringMatching(/^call_[A-Za-z0-9]{24}__thought__YzJsbg$/),
            type: "function",
            function: { name: "weather", arguments: '{"city":"Oslo"}' },
          },
        ],
      },
      {
        tool_calls: [{ index: 1, id: "g-2", type: "function", function: { name: "ping", arguments: "{}" } }],
      },
    ])
    expect((out[5]![1] as Json)["choices"]).toEqual([
      { index: 0, delta: {}, logprobs: null, finish_reason: "tool_calls" },
    ])
    expect(out[6]![1]).toMatchObject({
      choices: [],
      usage: {
        prompt_tokens: 10,
        completion_tokens: 9,
        total_tokens: 19,
        prompt_tokens_details: { cached_tokens: 6 },
        completion_tokens_details: { reasoning_tokens: 4 },
      },
    })
    expect(out[7]).toEqual(["message", "[DONE]"])
    expect(out).toHaveLength(8)
    for (const [, data] of out.slice(0, 7))
      expect(data).toMatchObject({
        id: "chatcmpl-r1",
        object: "chat.completion.chunk",
        model: "client-model",
        created: (out[0]![1] as Json)["created"],
      })
  })

  it("writes the same stream whatever the chunking, split at every byte offset", () => {
    const bytes = Buffer.from(STREAM)
    const whole = normalized(run([bytes]))
    for (let at = 0; at <= bytes.length; at++)
      expect(normalized(run([bytes.subarray(0, at), bytes.subarray(at)]))).toBe(whole)
    const bytewise = Array.from({ length: bytes.length }, (_, i) => bytes.subarray(i, i + 1))
    expect(normalized(run(bytewise))).toBe(whole)
  })

  it("reads LF, CRLF and CR event separators alike", () => {
    const responses = [
      candidate([{ text: "a" }]),
      { ...candidate([{ text: "b" }], "STOP"), usageMetadata: usage(1, 1) },
    ]
    const crlf = normalized(run([gemini(responses)]))
    expect(normalized(run([gemini(responses, "\n\n")]))).toBe(crlf)
    expect(normalized(run([gemini(responses, "\r\r")]))).toBe(crlf)
    expect(deltas(events(crlf)).slice(0, 3)).toEqual([
      { role: "assistant", content: "" },
      { content: "a" },
      { content: "b" },
    ])
  })

  it("maps the finish reason, once, and names a filtered answer content_filter", () => {
    const out = events(
      run([
        gemini([
          candidate([{ text: "x" }]),
          candidate([], "MAX_TOKENS"),
          candidate([{ text: "late" }], "STOP"),
        ]),
      ]),
    )
    expect(out.map(([, d]) => (typeof d === "string" ? d : d["choices"][0]["finish_reason"]))).toEqual([
      null,
      null,
      "length",
      "[DONE]",
    ])
    const filtered = events(run([gemini([candidate([], "SAFETY")])]))
    expect((filtered[1]![1] as Json)["choices"][0]["finish_reason"]).toBe("content_filter")
    const blocked = events(
      run([gemini([{ promptFeedback: { blockReason: "OTHER" }, usageMetadata: usage(3, 0) }])]),
    )
    expect((blocked[1]![1] as Json)["choices"][0]["finish_reason"]).toBe("content_filter")
    expect(blocked[3]).toEqual(["message", "[DONE]"])
  })

  it("keeps only the last usageMetadata, and writes no usage chunk when there was none", () => {
    const out = events(
      run([
        gemini([
          { ...candidate([{ text: "x" }]), usageMetadata: usage(5, 1) },
          { ...candidate([], "STOP"), usageMetadata: usage(5, 3) },
        ]),
      ]),
    )
    const usages = out.filter(([, d]) => typeof d === "object" && d["usage"] !== undefined)
    expect(usages).toHaveLength(1)
    expect((usages[0]![1] as Json)["usage"]["completion_tokens"]).toBe(3)
    const none = events(run([gemini([candidate([{ text: "x" }], "STOP")])]))
    expect(none.some(([, d]) => typeof d === "object" && d["usage"] !== undefined)).toBe(false)
    expect(none[none.length - 1]).toEqual(["message", "[DONE]"])
  })

  it("writes no [DONE] when the stream ends without a finish reason", () => {
    const out = events(run([gemini([{ ...candidate([{ text: "cut" }]), usageMetadata: usage(4, 1) }])]))
    expect(deltas(out).slice(0, 2)).toEqual([{ role: "assistant", content: "" }, { content: "cut" }])
    expect(out).toHaveLength(3)
    expect((out[2]![1] as Json)["usage"]["prompt_tokens"]).toBe(4)
    expect(run([])).toBe("")
  })

  it("turns an in-band error into an OpenAI error event and ends there", () => {
    const error = { error: { code: 429, message: "Resource exhausted", status: "RESOURCE_EXHAUSTED" } }
    const out = events(run([gemini([candidate([{ text: "x" }]), error, candidate([{ text: "y" }], "STOP")])]))
    expect(out.slice(1)).toEqual([
      [
        "message",
        {
          object: "chat.completion.chunk",
          choices: [{ index: 0, delta: { content: "x" }, logprobs: null, finish_reason: null }],
          id: expect.any(String),
          created: expect.any(Number),
          model: "client-model",
        },
      ],
      [
        "message",
        { error: { message: "Resource exhausted", type: "rate_limit_error", code: "RESOURCE_EXHAUSTED" } },
      ],
    ])
    const early = events(run([gemini([{ error: { code: 500, message: "Internal", status: "INTERNAL" } }])]))
    expect(early).toEqual([
      ["message", { error: { message: "Internal", type: "api_error", code: "INTERNAL" } }],
    ])
  })

  it("passes data that is not a JSON object on as it came, for the meter to see a malformed stream", () => {
    const responses = [candidate([{ text: "a" }]), candidate([{ text: "b" }], "STOP")]
    const garbage = `data: {not json\r\n\r\ndata: ["an","array"]\r\n\r\n`
    const clean = gemini(responses)
    const at = clean.indexOf("\r\n\r\n") + 4
    const out = run([clean.slice(0, at) + garbage + clean.slice(at)])
    expect(out).toContain('data: {not json\n\ndata: ["an","array"]\n\n')
    expect(normalized(out.replace('data: {not json\n\ndata: ["an","array"]\n\n', ""))).toBe(
      normalized(run([clean])),
    )
  })
})
