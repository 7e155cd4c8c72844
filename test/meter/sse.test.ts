import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeSseParser } from "../../src/meter/sse.js"

type Ev = readonly [string, string]

const parse = (chunks: ReadonlyArray<Uint8Array | string>, max?: number) => {
  const events: Array<Ev> = []
  const parser = makeSseParser((event, data) => events.push([event, data]), max)
  for (const c of chunks) parser.push(typeof c === "string" ? Buffer.from(c, "utf8") : c)
  parser.end()
  return { events, parser }
}

const anthropicStream = [
  "event: message_start",
  'data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":25,"output_tokens":1}}}',
  "",
  "event: ping",
  'data: {"type": "ping"}',
  "",
  "event: content_block_start",
  'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
  "",
  "event: content_block_delta",
  'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Grüße, 世界 🌍"}}',
  "",
  "event: message_delta",
  'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}',
  "",
  "event: message_stop",
  'data: {"type":"message_stop"}',
  "",
  "",
].join("\n")

describe("makeSseParser", () => {
  it("parses an Anthropic stream into its events", () => {
    const { events, parser } = parse([anthropicStream])
    expect(events.map((e) => e[0])).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "message_delta",
      "message_stop",
    ])
    expect(JSON.parse(events[3][1]).delta.text).toBe("Grüße, 世界 🌍")
    expect(parser.failure).toBeUndefined()
  })

  it("yields the same events when the stream is split at every byte offset into two chunks", () => {
    const bytes = Buffer.from(anthropicStream, "utf8")
    const whole = parse([bytes]).events
    expect(whole).toHaveLength(6)
    for (let i = 0; i <= bytes.length; i++) {
      expect(parse([bytes.subarray(0, i), bytes.subarray(i)]).events).toEqual(whole)
    }
  })

  it("yields the same events for any split into many chunks, whatever the line ends", () => {
    fc.assert(
      fc.property(fc.constantFrom("\n", "\r", "\r\n"), fc.array(fc.nat(), { maxLength: 20 }), (eol, cuts) => {
        const bytes = Buffer.from(anthropicStream.replaceAll("\n", eol), "utf8")
        const offsets = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
        const chunks: Array<Uint8Array> = []
        let prev = 0
        for (const o of offsets) {
          chunks.push(new Uint8Array(bytes.subarray(prev, o)))
          prev = o
        }
        chunks.push(bytes.subarray(prev))
        expect(parse(chunks).events).toEqual(parse([Buffer.from(anthropicStream, "utf8")]).events)
      }),
    )
  })

  it("accepts CRLF, lone CR and LF line ends, mixed", () => {
    const { events } = parse(["event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n"])
    expect(events).toEqual([
      ["a", "1"],
      ["b", "2"],
      ["message", "3"],
    ])
  })

  it("treats a CR at the end of one chunk and a LF at the start of the next as one line end", () => {
    const { events } = parse(["data: 1\r", "\ndata: 2\r", "\n\r", "\ndata: 3\r", "\r"])
    expect(events).toEqual([
      ["message", "1\n2"],
      ["message", "3"],
    ])
  })

  it("treats a CR at the end of a chunk followed by a non-LF as a line end of its own", () => {
    const { events } = parse(["data: 1\r", "\r", "data: 2\r", "", "\n", "\n"])
    expect(events).toEqual([
      ["message", "1"],
      ["message", "2"],
    ])
  })

  it("ignores comment lines, id, retry and unknown fields", () => {
    const { events } = parse([": keep-alive\n\n:\nid: 7\nretry: 100\nfoo: bar\ndata: x\n: inside\n\n"])
    expect(events).toEqual([["message", "x"]])
  })

  it("joins multi-line data with LF and keeps colons and extra spaces in values", () => {
    const { events } = parse(['data: {"a":\ndata:  1}\ndata:b:c\n\n'])
    expect(events).toEqual([["message", '{"a":\n 1}\nb:c']])
  })

  it("handles fields without a colon, empty data, and dispatches nothing for blank-only events", () => {
    const { events } = parse(["data\n\nevent: e\n\ndata:\n\nevent\ndata: z\n\n"])
    expect(events).toEqual([
      ["message", ""],
      ["message", ""],
      ["message", "z"],
    ])
  })

  it("uses the last event name and resets it after dispatch", () => {
    const { events } = parse(["event: a\nevent: b\ndata: 1\n\ndata: 2\n\n"])
    expect(events).toEqual([
      ["b", "1"],
      ["message", "2"],
    ])
  })

  it("decodes a multi-byte UTF-8 character split across chunks", () => {
    const bytes = Buffer.from("data: 🌍é\n\n", "utf8")
    const at = bytes.indexOf(0xf0) + 2
    expect(parse([bytes.subarray(0, at), bytes.subarray(at)]).events).toEqual([["message", "🌍é"]])
  })

  it("strips a leading byte-order mark", () => {
    expect(parse([Buffer.from([0xef, 0xbb]), Buffer.from([0xbf]), "data: 1\n\n"]).events).toEqual([
      ["message", "1"],
    ])
  })

  it("discards an unfinished event at the end of the stream", () => {
    const { events } = parse(["data: 1\n\ndata: 2\n"])
    expect(events).toEqual([["message", "1"]])
  })

  it("fails an event over 4 MiB with event_too_large, without throwing, holding bounded memory", () => {
    const events: Array<Ev> = []
    const parser = makeSseParser((e, d) => events.push([e, d]))
    parser.push(Buffer.from("data: small\n\n"))
    const chunk = Buffer.alloc(32 * 1024, 0x61)
    parser.push(Buffer.from("data: "))
    let pushed = 0
    for (let i = 0; i < 256; i++) {
      expect(() => parser.push(chunk)).not.toThrow()
      pushed += chunk.length
      expect(parser.heldBytes).toBeLessThanOrEqual(4 * 1024 * 1024)
    }
    expect(pushed).toBeGreaterThan(4 * 1024 * 1024)
    expect(parser.failure).toBe("event_too_large")
    expect(parser.heldBytes).toBe(0)
    parser.push(Buffer.from("\n\ndata: after\n\n"))
    parser.end()
    expect(events).toEqual([["message", "small"]])
    expect(parser.heldBytes).toBe(0)
  })

  it("counts data lines of one event together against the bound", () => {
    const line = "data: " + "x".repeat(1000) + "\n"
    const { events, parser } = parse([line.repeat(5) + "\n"], 4500)
    expect(parser.failure).toBe("event_too_large")
    expect(events).toEqual([])
    const ok = parse([line.repeat(4) + "\n" + line.repeat(4) + "\n"], 4500)
    expect(ok.parser.failure).toBeUndefined()
    expect(ok.events).toHaveLength(2)
  })

  it("bounds the raw bytes of an event the same way whatever the chunking", () => {
    const event = "data: " + "y".repeat(100) + "\ndata: z\n\n"
    const bytes = Buffer.from(event)
    for (let i = 0; i <= bytes.length; i++) {
      const chunks = [bytes.subarray(0, i), bytes.subarray(i)]
      const exact = parse(chunks, 106 + 7)
      expect(exact.parser.failure).toBeUndefined()
      expect(exact.events[0][1]).toHaveLength(102)
      expect(parse(chunks, 106 + 6).parser.failure).toBe("event_too_large")
    }
  })
})
