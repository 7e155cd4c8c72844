import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Endpoint } from "../../src/domain/endpoint.js"
import { JsonCollector, readJsonBody, readJsonBodyFast } from "../../src/meter/json.js"
import { chunkingsOf } from "./fixtures.js"
import { anyValue, edited, member, members, pads, render, textBytes, texts } from "./jsonValues.js"

const ENDPOINTS: ReadonlyArray<Endpoint> = [
  "/v1/messages",
  "/v1/chat/completions",
  "/v1/responses",
  "/v1/embeddings",
]

const count = fc.oneof(fc.nat(100_000), fc.constant(-1), fc.double({ noNaN: true, noDefaultInfinity: true }))
const counts = (...names: Array<string>) => names.map((name) => member(name, count))

/** A `usage` of any of the four APIs' shapes (their names mixed), or something else. */
const usage = fc.oneof(
  members(
    ...counts("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"),
  ),
  members(
    ...counts("prompt_tokens", "completion_tokens", "total_tokens"),
    member("prompt_tokens_details", members(...counts("cached_tokens"))),
  ),
  members(
    ...counts("input_tokens", "output_tokens", "total_tokens"),
    member("input_tokens_details", members(...counts("cached_tokens"))),
    member("output_tokens_details", members(...counts("reasoning_tokens"))),
  ),
  anyValue,
)

/** A response body as the providers send it: an id, a model, content, the usage; members may repeat or be missing. */
const body = members(
  member("id", fc.oneof(fc.constantFrom("msg_1", "resp_abc", "", "x".repeat(257)), texts)),
  member("type", fc.constant("message")),
  member("model", fc.oneof(fc.constantFrom("claude-x", "gpt-5", "m".repeat(300)), texts)),
  member("content", anyValue),
  member("usage", usage),
  member("usage ", anyValue),
  member("other", anyValue),
)

/** What the collector reads with the fast path on, as the reference reads it. */
const agrees = (b: Buffer): void => {
  for (const endpoint of ENDPOINTS) {
    expect(readJsonBodyFast(endpoint, b) ?? readJsonBody(endpoint, b)).toEqual(readJsonBody(endpoint, b))
  }
}

describe("a JSON response body's usage, id and model from its bytes (#35)", () => {
  it("answers as JSON.parse does, and does answer, for bodies with spaces and tabs between tokens", () => {
    fc.assert(
      fc.property(body, pads, (value, pad) => {
        const b = Buffer.from(`${pad()}${render(value, pad)}${pad()}`)
        for (const endpoint of ENDPOINTS) {
          const fast = readJsonBodyFast(endpoint, b)
          expect(fast).toBeDefined()
          expect(fast).toEqual(readJsonBody(endpoint, b))
        }
      }),
      { numRuns: 400 },
    )
  })

  it("falls back to the reference, or agrees with it, for any byte replaced, inserted or deleted", () => {
    const bytes = fc.constantFrom(
      "{",
      "}",
      "[",
      "]",
      '"',
      "\\",
      ":",
      ",",
      " ",
      "\n",
      "\r",
      "1",
      "e",
      "-",
      "é",
      "\u0000",
    )
    fc.assert(
      fc.property(
        body,
        fc.nat(),
        fc.constantFrom("replace", "insert", "delete") as fc.Arbitrary<"replace" | "insert" | "delete">,
        bytes,
        (value, at, edit, byte) => agrees(edited(Buffer.from(render(value, () => "")), at, edit, byte)),
      ),
      { numRuns: 600 },
    )
  })

  it("reads the id and model as JSON.parse decodes them, whatever bytes the strings hold", () => {
    fc.assert(
      fc.property(textBytes, textBytes, (idBytes, modelBytes) => {
        const b = Buffer.concat([
          Buffer.from('{"id":"'),
          Buffer.from(idBytes),
          Buffer.from('","model":"'),
          Buffer.from(modelBytes),
          Buffer.from('","usage":{"input_tokens":3,"output_tokens":4}}'),
        ])
        agrees(b)
        // Well-formed text is read by the fast path itself.
        if (Buffer.from(b.toString("utf8")).equals(b))
          expect(readJsonBodyFast("/v1/messages", b)).toBeDefined()
      }),
      { numRuns: 300 },
    )
  })

  it("keeps the last of a repeated member, as JSON.parse does", () => {
    const b = Buffer.from(
      '{"usage":{"input_tokens":1,"output_tokens":1},"id":"a","model":"m1","usage":{"input_tokens":7,"output_tokens":9},"id":"b","model":"m2"}',
    )
    expect(readJsonBodyFast("/v1/messages", b)).toEqual({
      usage: { inputTokens: 7, outputTokens: 9, cacheReadTokens: 0, cacheWriteTokens: 0 },
      id: "b",
      model: "m2",
    })
  })

  it("does not take a nested usage (a tool's input, say) for the body's", () => {
    const b = Buffer.from(
      '{"id":"msg_1","content":[{"type":"tool_use","input":{"usage":{"input_tokens":0,"output_tokens":0}}}],"usage":{"input_tokens":5,"output_tokens":6}}',
    )
    expect(readJsonBodyFast("/v1/messages", b)?.usage).toEqual({
      inputTokens: 5,
      outputTokens: 6,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    })
    const nestedOnly = Buffer.from('{"content":{"usage":{"input_tokens":5,"output_tokens":6}}}')
    expect(readJsonBodyFast("/v1/messages", nestedOnly)).toEqual({
      usage: undefined,
      id: undefined,
      model: undefined,
    })
  })

  it("declines what it is not sure of: line breaks, an escaped key, trailing bytes, not an object", () => {
    for (const text of [
      '{\n  "id": "a",\n  "usage": {"input_tokens": 1}\n}',
      '{"us\\u0061ge":{"input_tokens":1,"output_tokens":2}}',
      '{"id":"a"} x',
      '[{"id":"a"}]',
      "",
    ])
      expect(readJsonBodyFast("/v1/messages", Buffer.from(text))).toBeUndefined()
    // And the collector still reads the escaped key, through the reference.
    const collector = new JsonCollector()
    collector.push(Buffer.from('{"us\\u0061ge":{"input_tokens":1,"output_tokens":2}}'))
    expect(collector.read("/v1/messages").usage?.outputTokens).toBe(2)
  })

  it("reads a body that came in any number of chunks as the reference reads it whole", () => {
    fc.assert(
      fc.property(body, fc.array(fc.nat(), { maxLength: 4 }), (value, cuts) => {
        const text = render(value, () => "")
        const b = Buffer.from(text)
        for (const chunks of chunkingsOf([text], cuts)) {
          const collector = new JsonCollector()
          for (const chunk of chunks) collector.push(chunk)
          expect(collector.read("/v1/responses")).toEqual(readJsonBody("/v1/responses", b))
        }
      }),
      { numRuns: 100 },
    )
  })
})
