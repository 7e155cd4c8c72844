import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeUsageChunkFilter } from "../../src/gateway/usageChunk.js"

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

  it("passes a partial event longer than 64 KiB through as it is", () => {
    const long = `data: {"choices":[{"index":0,"delta":{"content":"${"x".repeat(70_000)}`
    const filter = makeUsageChunkFilter()
    expect(filter.push(Buffer.from(long))?.toString()).toBe(long)
    expect(filter.end()).toBeUndefined()
  })
})
