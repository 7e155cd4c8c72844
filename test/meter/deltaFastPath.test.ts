import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { deltaChunkBytes, deltaOutputBytes, makeStreamMeter } from "../../src/meter/stream.js"
import { chunkingsOf } from "./fixtures.js"

/** What the meter counted before the fast path: JSON.parse, then the UTF-8 bytes of the delta's output field. */
const parsedBytes = (data: string): number | "invalid" => {
  let value: unknown
  try {
    value = JSON.parse(data)
  } catch {
    return "invalid"
  }
  const delta = (value as { delta?: Record<string, unknown> }).delta ?? {}
  let bytes = 0
  for (const key of ["text", "partial_json", "thinking"]) {
    const v = delta[key]
    if (typeof v === "string") bytes += Buffer.byteLength(v, "utf8")
  }
  return bytes
}

const shapes = [
  ["text_delta", "text"],
  ["input_json_delta", "partial_json"],
  ["thinking_delta", "thinking"],
] as const

const event = (index: number, shape: number, text: string): string => {
  const [type, field] = shapes[shape]!
  return JSON.stringify({ type: "content_block_delta", index, delta: { type, [field]: text } })
}

const awkward = fc.constantFrom(
  '"',
  "\\",
  "/",
  "\n",
  "\r",
  "\t",
  "\b",
  "\f",
  "\u0000",
  "\u001f",
  "é",
  "€",
  "😀",
  "\ud800",
  "\u2028",
)
const texts = fc.oneof(
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: "binary" }),
  fc.array(fc.oneof(awkward, fc.string()), { maxLength: 12 }).map((parts) => parts.join("")),
)

const START =
  'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":7,"output_tokens":1}}}\n\n'
const STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n'
/** One text delta event, as Anthropic sends it. */
const deltaEvent = (text: string) =>
  `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })}\n\n`

describe("the content_block_delta fast path", () => {
  it("counts exactly what JSON.parse + Buffer.byteLength count, or declines", () => {
    fc.assert(
      fc.property(fc.nat(1000), fc.nat(2), texts, (index, shape, text) => {
        const data = event(index, shape, text)
        const fast = deltaOutputBytes(data)
        const hasSurrogate = /[\ud800-\udfff]/.test(text)
        if (hasSurrogate) expect(fast === -1 || fast === parsedBytes(data)).toBe(true)
        else expect(fast).toBe(parsedBytes(data))
      }),
      { numRuns: 3000 },
    )
  })

  it("declines every variant that is not valid JSON of that shape, so the parser still sees it", () => {
    fc.assert(
      fc.property(
        fc.nat(1000),
        fc.nat(2),
        texts,
        fc.nat(),
        fc.string({ maxLength: 3 }),
        (index, shape, text, at, insert) => {
          const base = event(index, shape, text)
          const cut = at % (base.length + 1)
          for (const data of [
            base.slice(0, cut),
            base.slice(0, cut) + insert + base.slice(cut),
            base.slice(0, cut) + base.slice(cut + 1),
          ]) {
            const fast = deltaOutputBytes(data)
            const parsed = parsedBytes(data)
            if (parsed === "invalid") expect(fast).toBe(-1)
            else if (fast !== -1) expect(fast).toBe(parsed)
          }
        },
      ),
      { numRuns: 3000 },
    )
  })

  it("declines other shapes: whitespace, other fields, other delta types, escapes in the keys, leading zeros", () => {
    for (const data of [
      '{"type": "content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}',
      '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"},"x":1}',
      '{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}',
      '{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"hi"}}',
      '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi","citations":[]}}',
      '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}} ',
      '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\uZZZZ"}}',
    ]) {
      expect(deltaOutputBytes(data)).toBe(-1)
    }
    expect(
      deltaOutputBytes(
        '{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"a\\n\\u00e9€"}}',
      ),
    ).toBe(1 + 1 + 2 + 3)
  })

  it("a stream of deltas meters the same whether or not each event takes the fast path", () => {
    const stream = (pretty: boolean) =>
      [
        START,
        ...["Hello", " wörld", "\n", "😀", '"q"'].map(
          (text, i) =>
            `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }, null, pretty && i % 2 === 0 ? 1 : undefined).replace(/\n/g, "")}\n\n`,
        ),
        'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n',
        STOP,
      ].join("")
    const results = [false, true].map((pretty) => {
      const meter = makeStreamMeter("/v1/messages")
      meter.push(Buffer.from(stream(pretty)))
      meter.end()
      return {
        chars: meter.outputChars,
        started: meter.contentStarted,
        finished: meter.finished,
        usage: meter.usage,
      }
    })
    expect(results[0]).toEqual(results[1])
    expect(results[0]!.chars).toBe(Buffer.byteLength('Hello wörld\n😀"q"'))
  })

  it("a chunk that is exactly one delta event is counted from its bytes; anything else is declined", () => {
    const one = (text: string, index = 0) =>
      `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index, delta: { type: "text_delta", text } })}\n\n`
    expect(deltaChunkBytes(Buffer.from(one("tok1 ")))).toBe(5)
    expect(deltaChunkBytes(Buffer.from(one("", 12)))).toBe(0)
    for (const chunk of [
      one("tok1 ").replace(/\n/g, "\r\n"),
      one("tok1 ").slice(0, -1),
      one("tok1 ") + one("tok2 "),
      one("é"),
      one('a"b'),
      one("a\nb"),
      one("tok1 ").replace("event: ", "event:"),
      " " + one("tok1 "),
    ]) {
      expect(deltaChunkBytes(Buffer.from(chunk))).toBe(-1)
    }
  })

  it("meters a stream the same however it is cut into chunks", () => {
    fc.assert(
      fc.property(
        fc.array(texts, { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (parts, cuts) => {
          const events = [
            START,
            'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
            ...parts.map(deltaEvent),
            'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n',
            STOP,
          ]
          const chunkings = chunkingsOf(events, cuts)
          const results = chunkings.map((chunks) => {
            const meter = makeStreamMeter("/v1/messages")
            for (const chunk of chunks) meter.push(chunk)
            meter.end()
            return {
              chars: meter.outputChars,
              started: meter.contentStarted,
              finished: meter.finished,
              failure: meter.failure,
              usage: { ...meter.usage },
            }
          })
          const expected = parts.reduce((sum, text) => sum + Buffer.byteLength(text, "utf8"), 0)
          for (const result of results) {
            expect(result).toEqual(results[0])
            expect(result.chars).toBe(expected)
            expect(result.finished).toBe(true)
          }
        },
      ),
      { numRuns: 500 },
    )
  })

  it("meters the same when deltas mix with CRLF events, pings and comments, whole or cut anywhere", () => {
    const forms = fc.constantFrom("lf", "crlf", "ping", "comment", "cr")
    fc.assert(
      fc.property(
        fc.array(fc.tuple(texts, forms), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (parts, cuts) => {
          const events = [
            START,
            ...parts.map(([text, form]) => {
              const d = deltaEvent(text)
              if (form === "crlf") return d.replace(/\n/g, "\r\n")
              if (form === "cr") return d.replace(/\n/g, "\r")
              if (form === "ping") return 'event: ping\ndata: {"type": "ping"}\n\n' + d
              if (form === "comment") return ": keep-alive\n\n" + d
              return d
            }),
            'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n',
            STOP,
          ]
          const chunkings = chunkingsOf(events, cuts)
          const expected = parts.reduce((sum, [text]) => sum + Buffer.byteLength(text, "utf8"), 0)
          for (const chunks of chunkings) {
            const meter = makeStreamMeter("/v1/messages")
            for (const chunk of chunks) meter.push(chunk)
            meter.end()
            expect(meter.failure).toBeUndefined()
            expect(meter.outputChars).toBe(expected)
            expect(meter.finished).toBe(true)
            expect(meter.usage).toMatchObject({ inputTokens: 7, outputTokens: 9 })
          }
        },
      ),
      { numRuns: 500 },
    )
  })

  it("does not count a delta from its bytes while the parser holds part of an event: the parser reads it as it would", () => {
    const unfinished = 'event: ping\ndata: {"type":"ping"}\n'
    const delta = deltaEvent("tok ")
    const meter = (chunks: Array<string>) => {
      const m = makeStreamMeter("/v1/messages")
      for (const chunk of chunks) m.push(Buffer.from(chunk))
      return { chars: m.outputChars, failure: m.failure }
    }
    const whole = meter([START + unfinished + delta])
    // The unfinished event and the delta are one event to an SSE parser (no blank line between them).
    expect(whole.failure).toBe("malformed")
    expect(meter([START + unfinished, delta])).toEqual(whole)
    expect(meter([START, unfinished, delta])).toEqual(whole)
  })

  describe("near the parser's 4 MiB event bound, the result does not depend on how the stream is cut", () => {
    const LIMIT = 4 * 1024 * 1024
    const meter = (chunks: Array<Buffer>) => {
      const m = makeStreamMeter("/v1/messages")
      for (const chunk of chunks) m.push(chunk)
      m.end()
      return { chars: m.outputChars, finished: m.finished, failure: m.failure }
    }
    const cut = (all: Buffer, size: number) =>
      Array.from({ length: Math.ceil(all.length / size) }, (_, i) => all.subarray(i * size, (i + 1) * size))

    it("a delta event over the bound fails as too large, in one chunk or in many", () => {
      const all = Buffer.from(START + deltaEvent("x".repeat(LIMIT)) + STOP)
      const whole = meter([all])
      expect(whole.failure).toBe("event_too_large")
      expect(meter(cut(all, 64 * 1024))).toEqual(whole)
    })

    it("an empty event: line before a delta still counts toward the next event's bound", () => {
      // The ping's lines come 3 bytes short of the bound; with the 6 bytes of "event:" they pass it.
      const ping = 'event: ping\ndata: {"type":"ping","p":"' + "x".repeat(LIMIT - 14 - 28) + '"}\n\n'
      const chunks = [
        Buffer.from(START + "event:\n"),
        Buffer.from(deltaEvent("hi")),
        Buffer.from(ping + STOP),
      ]
      const result = meter(chunks)
      expect(meter(cut(Buffer.concat(chunks), 7))).toEqual(result)
      expect(meter([Buffer.concat(chunks)])).toEqual(result)
    })
  })
})
