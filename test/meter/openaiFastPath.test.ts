import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ChatFast, type FastFold, OUTPUT_DELTA_TYPES, ResponsesFast } from "../../src/meter/openaiFast.js"
import { makeStreamMeter, type StreamMeter } from "../../src/meter/stream.js"
import { chunkingsOf } from "./fixtures.js"
import {
  anyValue,
  edited,
  MALFORMED_UTF8,
  member,
  members,
  pads,
  render,
  textBytes,
  texts,
  withTextBytes,
  type Value,
} from "./jsonValues.js"

const toolCall = members(
  member("index", fc.nat(3)),
  member("id", texts),
  member("type", fc.constant("function")),
  member("function", members(member("name", texts), member("arguments", texts))),
)
const delta = members(
  member("role", fc.constant("assistant")),
  member("content", fc.oneof(texts, fc.constant(null))),
  member("refusal", fc.oneof(texts, fc.constant(null))),
  member("reasoning_content", texts),
  member("reasoning", texts),
  member("tool_calls", fc.array(toolCall, { maxLength: 2 })),
  member("other", anyValue),
)
const choice = members(
  member("index", fc.nat(2)),
  member("delta", delta),
  member("logprobs", fc.constant(null)),
  member("finish_reason", fc.oneof(fc.constant(null), fc.constantFrom("stop", "length", "tool_calls"))),
)
const chatChunk = members(
  member("id", fc.constant("chatcmpl-1")),
  member("object", fc.constant("chat.completion.chunk")),
  member("created", fc.nat()),
  member("model", fc.constantFrom("gpt-5", "other")),
  member("system_fingerprint", fc.oneof(fc.constant(null), texts)),
  member("service_tier", fc.constant("default")),
  member("choices", fc.array(choice, { maxLength: 2 })),
  member("usage", fc.oneof({ weight: 5, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: anyValue })),
  fc.oneof(
    { weight: 9, arbitrary: fc.constant<Array<[string, Value]>>([]) },
    { weight: 1, arbitrary: member("error", anyValue) },
  ),
  member("obfuscation", texts),
)

/** What a meter knows after a stream: everything the relay reads. */
const stateOf = (meter: StreamMeter) => ({
  usage: { ...meter.usage },
  failure: meter.failure,
  inbandError: meter.inbandError,
  contentStarted: meter.contentStarted,
  finished: meter.finished,
  outputChars: meter.outputChars,
  responseId: meter.responseId,
})

/** The same stream through the meter with its fast path and through the parse-everything reference. */
const bothWays = (endpoint: "/v1/chat/completions" | "/v1/responses", chunks: ReadonlyArray<Uint8Array>) => {
  const fast = makeStreamMeter(endpoint)
  const reference = makeStreamMeter(endpoint, { fast: false })
  for (const chunk of chunks) {
    fast.push(chunk)
    reference.push(chunk)
  }
  fast.end()
  reference.end()
  return { fast: stateOf(fast), reference: stateOf(reference) }
}

const CHAT_HEAD =
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
const CHAT_USAGE =
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4}}}\n\n'
const DONE = "data: [DONE]\n\n"

/** OpenAI's chunk as it sends it. */
const chatEvent = (content: string) =>
  `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1"}\n\n`

const readChat = (event: string): { end: number; out: FastFold } => {
  const out = { bytes: -1, started: false }
  return { end: new ChatFast().read(Buffer.from(event), 0, out), out }
}

describe("the Chat Completions chunk fast path", () => {
  it("reads OpenAI's own chunks from their bytes: content, tool-call arguments, a finish", () => {
    const one = chatEvent("Hello there")
    expect(readChat(one)).toEqual({ end: Buffer.byteLength(one), out: { bytes: 11, started: true } })
    expect(readChat(chatEvent("")).out).toEqual({ bytes: 0, started: false })
    expect(readChat(chatEvent('say "hi"\\n')).out.bytes).toBe(Buffer.byteLength('say "hi"\\n'))
    const tool =
      'data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":"}}]},"finish_reason":null}]}\n\n'
    expect(readChat(tool).out).toEqual({ bytes: Buffer.byteLength('{"city":'), started: true })
    const finish = 'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    expect(readChat(finish).out).toEqual({ bytes: 0, started: true })
    // Text outside ASCII, as OpenAI sends it (raw UTF-8): its bytes are its length.
    for (const text of ["é", "€", "日本語の文", "😀", "Grüße, мир", "\u2028"]) {
      const event = chatEvent(text)
      expect(readChat(event), text).toEqual({
        end: Buffer.byteLength(event),
        out: { bytes: Buffer.byteLength(text), started: true },
      })
    }
  })

  it("declines what it does not read exactly: errors, usage, escaped surrogates, CRLF, more lines, bad JSON", () => {
    for (const event of [
      CHAT_USAGE,
      'data: {"error":{"message":"overloaded"}}\n\n',
      chatEvent("ok").replace('"ok"', '"\\ud83d\\ude00"'),
      chatEvent("ok").replace(/\n/g, "\r\n"),
      chatEvent("ok").slice(0, -1),
      `id: 7\n${chatEvent("ok")}`,
      chatEvent("ok").replace('"usage":null', '"usage":nul'),
      chatEvent("ok").replace('"created":1', '"created":01'),
      chatEvent("ok").replace('"content"', '"con\\u0074ent"'),
      chatEvent("ok").replace("]", ",]"),
      'data: {"choices":[1]}\n\n',
      'data: {"choices":null}\n\n',
      DONE,
    ]) {
      expect(readChat(event).end, event).toBe(-1)
    }
    // Bytes that are not well-formed UTF-8 decode to U+FFFD, whose length is not theirs: declined.
    for (const bytes of MALFORMED_UTF8) {
      const event = withTextBytes(chatEvent("ok"), "ok", bytes)
      expect(new ChatFast().read(event, 0, { bytes: -1, started: false }), bytes.join(",")).toBe(-1)
    }
  })

  it("meters text of any bytes, well-formed UTF-8 or not, exactly as parsing does", () => {
    fc.assert(
      fc.property(textBytes, (bytes) => {
        const event = withTextBytes(chatEvent("ok"), "ok", bytes)
        const { fast, reference } = bothWays("/v1/chat/completions", [
          Buffer.from(CHAT_HEAD),
          event,
          Buffer.from(CHAT_USAGE),
          Buffer.from(DONE),
        ])
        expect(fast).toEqual(reference)
      }),
      { numRuns: 2000 },
    )
  })

  it("meters any stream of chunks exactly as parsing every event does, however it is cut", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(chatChunk, pads), { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (parts, cuts) => {
          const events = [
            CHAT_HEAD,
            ...parts.map(([chunk, pad]) => `data: ${render(chunk, pad)}\n\n`),
            CHAT_USAGE,
            DONE,
          ]
          for (const chunks of chunkingsOf(events, cuts)) {
            const { fast, reference } = bothWays("/v1/chat/completions", chunks)
            expect(fast).toEqual(reference)
          }
        },
      ),
      { numRuns: 400 },
    )
  })

  it("meters a chunk with any one byte changed, added or taken out exactly as parsing does", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("Hello", "", 'a "q"', "x\\y"),
        fc.nat(),
        fc.constantFrom("replace", "insert", "delete"),
        fc.constantFrom(...' "{}[],:\\0123456789.-+eEntrufalsx\t\n\r\u0000é'.split("")),
        (text, at, edit, byte) => {
          const event = Buffer.from(chatEvent(text))
          const mutated = edited(event, at, edit, byte)
          const { fast, reference } = bothWays("/v1/chat/completions", [
            Buffer.from(CHAT_HEAD),
            mutated,
            Buffer.from(chatEvent("after")),
            Buffer.from(DONE),
          ])
          expect(fast).toEqual(reference)
        },
      ),
      { numRuns: 2000 },
    )
  })

  it("reads no chunk from its bytes before the stream's model is known", () => {
    // The first chunk names the model: were it read from its bytes, the model would be lost.
    const { fast, reference } = bothWays("/v1/chat/completions", [Buffer.from(chatEvent("hi") + DONE)])
    expect(fast).toEqual(reference)
    expect(fast.usage.model).toBe("gpt-5")
  })
})

const OUTPUT_TYPES = OUTPUT_DELTA_TYPES
const responsesEvent = members(
  member(
    "type",
    fc.constantFrom(
      ...OUTPUT_TYPES,
      "response.output_text.done",
      "response.in_progress",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.created",
      "response.completed",
      "response.failed",
      "error",
    ),
  ),
  member("sequence_number", fc.nat()),
  member("item_id", fc.constant("msg_1")),
  member("output_index", fc.nat(2)),
  member("content_index", fc.nat(2)),
  member("delta", texts),
  member("logprobs", fc.constant([])),
  member("obfuscation", texts),
)
const RESPONSES_HEAD =
  'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-5","status":"in_progress"}}\n\n'
const RESPONSES_END =
  'event: response.completed\ndata: {"type":"response.completed","sequence_number":99,"response":{"id":"resp_1","model":"gpt-5","status":"completed","usage":{"input_tokens":10,"output_tokens":5,"input_tokens_details":{"cached_tokens":2}}}}\n\n'
const textDelta = (sequence: number, text: string) =>
  `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":${sequence},"item_id":"msg_1","output_index":0,"content_index":0,"delta":${JSON.stringify(text)},"logprobs":[],"obfuscation":"a1"}\n\n`

describe("the Responses output-delta fast path", () => {
  it("reads OpenAI's delta events and the events the fold does nothing with from their bytes, and declines the others", () => {
    const read = (event: string) => {
      const out = { bytes: -1, started: false }
      return { end: new ResponsesFast().read(Buffer.from(event), 0, out), out }
    }
    const one = textDelta(5, "Hello")
    expect(read(one)).toEqual({ end: Buffer.byteLength(one), out: { bytes: 5, started: true } })
    for (const text of ["é", "日本語の文", "😀", "Grüße, мир"]) {
      const event = textDelta(5, text)
      expect(read(event), text).toEqual({
        end: Buffer.byteLength(event),
        out: { bytes: Buffer.byteLength(text), started: true },
      })
    }
    for (const bytes of MALFORMED_UTF8) {
      const event = withTextBytes(textDelta(5, "x"), "x", bytes)
      expect(new ResponsesFast().read(event, 0, { bytes: -1, started: false }), bytes.join(",")).toBe(-1)
    }
    const done =
      'event: response.output_text.done\ndata: {"type":"response.output_text.done","sequence_number":9,"item_id":"msg_1","output_index":0,"content_index":0,"text":"tok0 tök1","logprobs":[]}\n\n'
    expect(read(done)).toEqual({ end: Buffer.byteLength(done), out: { bytes: 0, started: false } })
    const inProgress = RESPONSES_HEAD.replace(/response\.created/g, "response.in_progress")
    expect(read(inProgress).end).toBe(Buffer.byteLength(inProgress))
    expect(read(done.replace(/response\.output_text\.done/g, "response.output_item.added")).end).toBe(-1)
    for (const event of [
      RESPONSES_HEAD,
      RESPONSES_END,
      textDelta(5, "x").replace('"x"', '"\\ud800"'),
      textDelta(5, "x").replace(/\n/g, "\r\n"),
      textDelta(5, "x").replace('"type":"response.output_text.delta",', ""),
      textDelta(5, "x").replace(
        '"type":"response.output_text.delta"',
        '"type":"response.output_text.d\\u0065lta"',
      ),
      textDelta(5, "x").replace("data: ", "id: 1\ndata: "),
    ]) {
      expect(read(event).end, event).toBe(-1)
    }
  })

  it("meters any stream of events exactly as parsing every event does, however it is cut", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(responsesEvent, pads, fc.constantFrom(...OUTPUT_TYPES, "other")), { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (parts, cuts) => {
          const events = [
            RESPONSES_HEAD,
            ...parts.map(([event, pad, name]) => `event: ${name}\ndata: ${render(event, pad)}\n\n`),
            RESPONSES_END,
          ]
          for (const chunks of chunkingsOf(events, cuts)) {
            const { fast, reference } = bothWays("/v1/responses", chunks)
            expect(fast).toEqual(reference)
          }
        },
      ),
      { numRuns: 400 },
    )
  })

  it("meters a delta of any bytes, well-formed UTF-8 or not, exactly as parsing does", () => {
    fc.assert(
      fc.property(textBytes, (bytes) => {
        const { fast, reference } = bothWays("/v1/responses", [
          Buffer.from(RESPONSES_HEAD),
          withTextBytes(textDelta(3, "x"), "x", bytes),
          Buffer.from(RESPONSES_END),
        ])
        expect(fast).toEqual(reference)
      }),
      { numRuns: 2000 },
    )
  })

  it("meters a delta event with any one byte changed, added or taken out exactly as parsing does", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("Hello", "", 'a "q"'),
        fc.nat(),
        fc.constantFrom("replace", "insert", "delete"),
        fc.constantFrom(...' "{}[],:\\0123456789.-+eEntrufalsx\t\n\r\u0000é'.split("")),
        (text, at, edit, byte) => {
          const event = Buffer.from(textDelta(3, text))
          const mutated = edited(event, at, edit, byte)
          const { fast, reference } = bothWays("/v1/responses", [
            Buffer.from(RESPONSES_HEAD),
            mutated,
            Buffer.from(textDelta(4, "after")),
            Buffer.from(RESPONSES_END),
          ])
          expect(fast).toEqual(reference)
        },
      ),
      { numRuns: 2000 },
    )
  })
})
