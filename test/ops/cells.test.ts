import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Histogram, Registry } from "prom-client"
import { cache4, CellHistogram } from "../../src/ops/cells.js"
import { OVERHEAD_BUCKETS, REQUEST_BUCKETS, UPSTREAM_BUCKETS } from "../../src/ops/instruments.js"

const bounds = fc.constantFrom(UPSTREAM_BUCKETS, OVERHEAD_BUCKETS, REQUEST_BUCKETS, [1, 2, 3])
/** Values on, between, below and above the bounds, and some prom-client refuses (not finite). */
const value = (b: ReadonlyArray<number>) =>
  fc.oneof(
    fc.constantFrom(...b),
    fc.double({ min: -1, max: 200, noNaN: true }),
    fc.constantFrom(0, -0, 1e-9, Infinity, -Infinity, Number.NaN),
  )
const labelSet = fc.constantFrom(
  { provider: "anthropic", model: "m1" },
  { provider: "openai", model: "m2" },
  { provider: 'we"ird\\', model: "m\n3" },
)

describe("CellHistogram", () => {
  it("exposes what prom-client's Histogram exposes for the same observations (text and JSON)", async () => {
    await fc.assert(
      fc.asyncProperty(
        bounds.chain((b) =>
          fc.tuple(fc.constant(b), fc.array(fc.tuple(labelSet, value(b)), { maxLength: 40 })),
        ),
        async ([b, observations]) => {
          const theirs = new Registry()
          const ours = new Registry()
          const histogram = new Histogram({
            name: "h_seconds",
            help: "a histogram",
            labelNames: ["provider", "model"] as const,
            buckets: [...b],
            registers: [theirs],
          })
          const cells = new CellHistogram<"provider" | "model">("h_seconds", "a histogram", b, [ours])
          const cellOf = new Map<object, ReturnType<typeof cells.add>>()
          for (const [labels, v] of observations) {
            // A cell shows its label set from its creation on, as prom-client's after `zero`.
            let cell = cellOf.get(labels)
            if (cell === undefined) {
              cell = cells.add(labels)
              cellOf.set(labels, cell)
              histogram.zero(labels)
            }
            // prom-client throws on a value that is not finite; the cell ignores it.
            if (Number.isFinite(v)) histogram.observe(labels, v)
            cell.observe(v)
          }
          expect(await ours.metrics()).toBe(await theirs.metrics())
          expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON())
        },
      ),
      { numRuns: 300 },
    )
  })

  it("a histogram without labels shows zero buckets before its first observation, and reset forgets", async () => {
    const theirs = new Registry()
    const ours = new Registry()
    const histogram = new Histogram({
      name: "o_seconds",
      help: "o",
      buckets: [...OVERHEAD_BUCKETS],
      registers: [theirs],
    })
    const cells = new CellHistogram<never>("o_seconds", "o", OVERHEAD_BUCKETS, [ours])
    const cell = cells.add({})
    expect(await ours.metrics()).toBe(await theirs.metrics())
    expect(await ours.metrics()).toContain('o_seconds_bucket{le="+Inf"} 0')
    histogram.observe(0.003)
    cell.observe(0.003)
    expect(await ours.metrics()).toBe(await theirs.metrics())
    expect(await ours.metrics()).toContain('o_seconds_bucket{le="0.005"} 1')
    ours.resetMetrics()
    theirs.resetMetrics()
    expect(await ours.metrics()).toContain("o_seconds_count 0")
  })
})

describe("cache4", () => {
  it("makes one value per distinct quadruple and returns it again after", () => {
    const made: Array<string> = []
    const cell = cache4((a: string, b: string, c: string, d: number) => {
      made.push(`${a}|${b}|${c}|${d}`)
      return { a, b, c, d }
    })
    const first = cell("acme", "claude", "anthropic", 200)
    expect(cell("acme", "claude", "anthropic", 200)).toBe(first)
    expect(cell("acme", "claude", "anthropic", 500)).not.toBe(first)
    expect(cell("globex", "claude", "anthropic", 200)).toEqual({
      a: "globex",
      b: "claude",
      c: "anthropic",
      d: 200,
    })
    expect(cell("acme", "claude", "", 200)).not.toBe(first)
    expect(made).toEqual([
      "acme|claude|anthropic|200",
      "acme|claude|anthropic|500",
      "globex|claude|anthropic|200",
      "acme|claude||200",
    ])
  })
})
