import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Wire } from "../../src/translate/index.js"
import { events, normalized, run, script } from "./streamHelpers.js"
import { anthropicSse, chatSse, chunked, scriptArb, type Script } from "./upstream.js"

describe("every stream translator", () => {
  const pairs: ReadonlyArray<readonly [Wire, Wire, (s: Script) => string]> = [
    ["/v1/messages", "/v1/chat/completions", anthropicSse],
    ["/v1/chat/completions", "/v1/messages", chatSse],
    ["/v1/messages", "/v1/responses", anthropicSse],
  ]

  it("writes the same stream whatever the chunking of the upstream bytes", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...pairs),
        scriptArb({ cacheWrite: true }),
        fc.array(fc.nat(3000), { maxLength: 20 }),
        ([from, to, serialize], s, cuts) => {
          const upstream = serialize(s)
          const whole = run(from, to, [upstream])
          expect(normalized(run(from, to, chunked(Buffer.from(upstream), cuts)))).toBe(normalized(whole))
        },
      ),
      { numRuns: 50 },
    )
  })

  it("ignores malformed upstream events", () => {
    for (const [from, to, serialize] of pairs) {
      const upstream = serialize(script)
      const at = upstream.indexOf("\n\n", 400) + 2
      const garbage =
        upstream.slice(0, at) + "data: {not json\n\n" + 'data: ["an","array"]\n\n' + upstream.slice(at)
      expect(normalized(run(from, to, [garbage]))).toBe(normalized(run(from, to, [upstream])))
    }
  })

  it("stops without throwing at an event larger than the parser's bound", () => {
    for (const [from, to, serialize] of pairs) {
      const upstream = serialize(script)
      const huge = `data: "${"x".repeat(5 * 1024 * 1024)}"\n\n`
      expect(() => run(from, to, [upstream.slice(0, 300), huge, upstream.slice(300)])).not.toThrow()
    }
  })

  it("passes the same format through and answers an untranslated pair with one error event", () => {
    expect(run("/v1/messages", "/v1/messages", ["event: ping\ndata: {}\n\n"])).toBe(
      "event: ping\ndata: {}\n\n",
    )
    const refused = events(run("/v1/chat/completions", "/v1/responses", ["data: {}\n\n", "data: [DONE]\n\n"]))
    expect(refused).toEqual([
      [
        "error",
        {
          type: "error",
          code: "api_error",
          message: expect.stringMatching(/cannot be translated/),
          param: null,
          sequence_number: 0,
        },
      ],
    ])
  })
})
