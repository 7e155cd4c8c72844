import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeUsageChunkFilter } from "../../src/gateway/usageChunk.js"
import { makeStreamMeter } from "../../src/meter/stream.js"

const chunk = (choices: string, usage = "") =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":${choices}${usage}}\n\n`
const content = (text: string) =>
  chunk(`[{"index":0,"delta":{"content":${JSON.stringify(text)}}}]`, `,"usage":null`)
const usageOnly = chunk("[]", `,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)

/** The filter's output for `body` cut at `cuts`. */
const filtered = (body: string, cuts: ReadonlyArray<number>): string => {
  const filter = makeUsageChunkFilter()
  const bytes = Buffer.from(body)
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
  let out = ""
  let at = 0
  for (const point of [...points, bytes.length]) {
    if (point <= at) continue
    out += filter.push(bytes.subarray(at, point))?.toString() ?? ""
    at = point
  }
  return out + (filter.end()?.toString() ?? "")
}

describe("the usage-chunk filter of Chat Completions streams", () => {
  it("drops only the usage-only chunk, keeping every other byte", () => {
    const body = content("hel") + content("lo") + chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`)
    expect(filtered(body + usageOnly + "data: [DONE]\n\n", [])).toBe(body + "data: [DONE]\n\n")
  })

  it("keeps text that holds [] or spaced empty choices, and drops the spaced usage-only chunk, with any line ends", () => {
    const spaced = usageOnly.replace('"choices":[]', '"choices": []')
    const body = content("[]") + content('"choices":[]') + content("x")
    for (const end of ["\n\n", "\r\n\r\n", "\r\r"]) {
      const cut = (s: string) => s.replace(/\n\n$/, end)
      const events = [content("[]"), content('"choices":[]'), content("x")].map(cut).join("")
      expect(filtered(events + cut(spaced) + cut("data: [DONE]\n\n"), [])).toBe(
        events + cut("data: [DONE]\n\n"),
      )
      expect(filtered(events + cut(usageOnly) + cut("data: [DONE]\n\n"), [7, 50])).toBe(
        events + cut("data: [DONE]\n\n"),
      )
    }
    expect(filtered(body, [])).toBe(body)
  })

  it("keeps a finish chunk that also carries usage (it has a choice)", () => {
    const finish = chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`, `,"usage":{"prompt_tokens":1}`)
    expect(filtered(finish + "data: [DONE]\n\n", [])).toBe(finish + "data: [DONE]\n\n")
  })

  it("gives the same bytes however the stream is cut into chunks", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ maxLength: 12 }), { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.constantFrom("\n\n", "\r\n\r\n"),
        (texts, cuts, end) => {
          const events = [...texts.map(content), usageOnly, "data: [DONE]\n\n"].map((e) =>
            e.replaceAll("\n\n", end),
          )
          const expected = events.filter((_, i) => i !== texts.length).join("")
          expect(filtered(events.join(""), cuts)).toBe(expected)
        },
      ),
      { numRuns: 200 },
    )
  })

  it("with the stream's meter beside it, gives the same bytes as filtering every chunk, however the stream is cut", () => {
    // As the relay runs it: the meter sees each chunk first, then the filter, which skips its search while the
    // meter has no usage and the chunk ends with a blank line.
    const withMeter = (body: string, cuts: ReadonlyArray<number>): { out: string; skipped: boolean } => {
      const meter = makeStreamMeter("/v1/chat/completions")
      const filter = makeUsageChunkFilter(meter.usage)
      const bytes = Buffer.from(body)
      const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
      let out = ""
      let at = 0
      let skipped = false
      for (const point of [...points, bytes.length]) {
        if (point <= at) continue
        const part = bytes.subarray(at, point)
        meter.push(part)
        const passed = filter.push(part)
        if (passed === part) skipped = true
        out += passed?.toString() ?? ""
        at = point
      }
      return { out: out + (filter.end()?.toString() ?? ""), skipped }
    }
    const event = fc.oneof(
      { weight: 5, arbitrary: fc.string({ maxLength: 12 }).map(content) },
      { weight: 1, arbitrary: fc.constant(usageOnly) },
      { weight: 1, arbitrary: fc.constant(usageOnly.replace('"choices":[]', '"choices": []')) },
      // A content chunk with usage (some providers send it on every chunk), a finish with usage, usage null.
      {
        weight: 1,
        arbitrary: fc.constant(
          chunk(
            `[{"index":0,"delta":{"content":"u"}}]`,
            `,"usage":{"prompt_tokens":2,"completion_tokens":1}`,
          ),
        ),
      },
      { weight: 1, arbitrary: fc.constant(chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`)) },
      { weight: 1, arbitrary: fc.constant(": keep-alive\n\n") },
    )
    fc.assert(
      fc.property(
        fc.array(event, { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.constantFrom("\n\n", "\r\n\r\n", "\r\r", "\n\r\n", "\r\n\n"),
        (events, cuts, end) => {
          const head = chunk(`[{"index":0,"delta":{"role":"assistant","content":""}}]`, `,"model":"gpt-5"`)
          const body = [head, ...events, "data: [DONE]\n\n"].map((e) => e.replaceAll("\n\n", end)).join("")
          expect(withMeter(body, cuts).out).toBe(filtered(body, cuts))
        },
      ),
      { numRuns: 1000 },
    )
    // And it does skip: a stream of whole content chunks before its usage goes through untouched.
    const body = [content("a"), content("b"), usageOnly, "data: [DONE]\n\n"].join("")
    const cuts = [content("a").length, 2 * content("a").length]
    expect(withMeter(body, cuts)).toEqual({ out: filtered(body, cuts), skipped: true })
    expect(filtered(body, cuts)).toBe(content("a") + content("b") + "data: [DONE]\n\n")
  })

  it("passes a partial event longer than 64 KiB through as it is", () => {
    const long = `data: {"choices":[{"index":0,"delta":{"content":"${"x".repeat(70_000)}`
    const filter = makeUsageChunkFilter()
    expect(filter.push(Buffer.from(long))?.toString()).toBe(long)
    expect(filter.end()).toBeUndefined()
  })
})
