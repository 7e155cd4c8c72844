import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ChatFast, type FastFold, OUTPUT_DELTA_TYPES, ResponsesFast } from "../../src/meter/openaiFast.js"
import { makeStreamMeter, type StreamMeter } from "../../src/meter/stream.js"
import { chunkingsOf } from "./fixtures.js"

/**
 * A JSON value whose objects are lists of members, so a key may repeat (JSON.parse keeps the last), rendered
 * with the spaces and tabs `pad` puts between tokens.
 */
type Value =
  null | boolean | number | string | { readonly members: ReadonlyArray<[string, Value]> } | Array<Value>

const render = (value: Value, pad: () => string): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value))
    return `[${pad()}${value.map((v) => `${render(v, pad)}${pad()}`).join(`,${pad()}`)}]`
  return `{${pad()}${value.members.map(([k, v]) => `${JSON.stringify(k)}${pad()}:${pad()}${render(v, pad)}${pad()}`).join(`,${pad()}`)}}`
}

const awkward = fc.constantFrom(
  '"',
  "\\",
  "/",
  "\n",
  "\t",
  "\u0000",
  "\u001f",
  "\u007f",
  "é",
  "€",
  "😀",
  "\ud800",
  "\u2028",
)
const texts = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 6 }) },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.oneof(awkward, fc.string({ maxLength: 4 })), { maxLength: 5 })
      .map((p) => p.join("")),
  },
)
const scalar: fc.Arbitrary<Value> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  texts,
)
const anyValue: fc.Arbitrary<Value> = fc.letrec<{ value: Value }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(tie("value"), { maxLength: 3 }),
    fc
      .array(fc.tuple(fc.constantFrom("a", "content", "type", "delta", "x y"), tie("value")), {
        maxLength: 3,
      })
      .map((members) => ({ members })),
  ),
})).value

/** A member that may be missing, repeated, or hold another kind of value than usual. */
const member = (key: string, usual: fc.Arbitrary<Value>): fc.Arbitrary<Array<[string, Value]>> =>
  fc.oneof(
    { weight: 6, arbitrary: usual.map((v): Array<[string, Value]> => [[key, v]]) },
    { weight: 2, arbitrary: fc.constant<Array<[string, Value]>>([]) },
    {
      weight: 1,
      arbitrary: fc.tuple(usual, usual).map(([a, b]): Array<[string, Value]> => [
        [key, a],
        [key, b],
      ]),
    },
    { weight: 1, arbitrary: anyValue.map((v): Array<[string, Value]> => [[key, v]]) },
  )

const members = (...parts: Array<fc.Arbitrary<Array<[string, Value]>>>): fc.Arbitrary<Value> =>
  fc.tuple(...parts).map((lists) => ({ members: lists.flat() }))

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

const pads = fc.oneof(
  { weight: 3, arbitrary: fc.constant(() => "") },
  {
    weight: 1,
    arbitrary: fc.array(fc.constantFrom("", " ", "\t", "  "), { minLength: 1, maxLength: 8 }).map((list) => {
      let k = 0
      return () => list[k++ % list.length]!
    }),
  },
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

/** `event` with the byte at `at` (modulo its length) replaced by `byte`, `byte` inserted there, or it deleted. */
const edited = (event: Buffer, at: number, edit: "replace" | "insert" | "delete", byte: string): Buffer => {
  const i = at % event.length
  const b = Buffer.from(byte)
  if (edit === "replace") return Buffer.concat([event.subarray(0, i), b, event.subarray(i + 1)])
  if (edit === "insert") return Buffer.concat([event.subarray(0, i), b, event.subarray(i)])
  return Buffer.concat([event.subarray(0, i), event.subarray(i + 1)])
}

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

/** `event` with the JSON string `"text"` in it holding `bytes` instead (raw, any bytes at all). */
const withTextBytes = (event: string, text: string, bytes: ReadonlyArray<number>): Buffer => {
  const quoted = `"${text}"`
  const at = event.indexOf(quoted)
  return Buffer.concat([
    Buffer.from(event.slice(0, at + 1)),
    Buffer.from(bytes),
    Buffer.from(event.slice(at + quoted.length - 1)),
  ])
}

/**
 * Byte sequences that are not well-formed UTF-8: stray continuations, overlong forms, encoded surrogates,
 * past U+10FFFF, cut short (before the closing quote), bytes no UTF-8 has.
 */
const MALFORMED_UTF8: ReadonlyArray<ReadonlyArray<number>> = [
  [0x80],
  [0xbf],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0x80],
  [0xe0, 0x9f, 0xbf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf0, 0x80, 0x80, 0x80],
  [0xf0, 0x8f, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xff],
  [0xc3],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0x61, 0xc3, 0x28],
]

/** Text bytes: well-formed characters of every length, malformed sequences, and single bytes from 0x80 up. */
const textBytes: fc.Arbitrary<Array<number>> = fc
  .array(
    fc.oneof(
      { weight: 4, arbitrary: fc.string({ unit: "grapheme", maxLength: 3 }).map((t) => [...Buffer.from(t)]) },
      { weight: 1, arbitrary: fc.constantFrom(...MALFORMED_UTF8).map((b) => [...b]) },
      { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((b) => [b]) },
      { weight: 1, arbitrary: fc.constantFrom([0x61], [0x5c, 0x6e], [0x5c, 0x75, 0x30, 0x30, 0x65, 0x39]) },
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.flat())
  // A quote or a backslash on its own would end or break the string: the escapes above stand for them.
  .filter(
    (bytes) => !bytes.some((b, i) => (b === 0x22 || b === 0x5c) && !(b === 0x5c && i + 1 < bytes.length)),
  )

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
