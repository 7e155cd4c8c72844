/**
 * The soak's RSS rule (#35, ADR 0076, bench/lib/soakRule.mjs): the slope is judged over minutes 20–60 of a
 * 60-minute run, after the heap's plateau, and bounded by 0.5 MB per 10 minutes. Shaped samples stand in for a
 * run: these are the rule's figures, not a soak.
 */
import { describe, expect, it } from "vitest"
// @ts-expect-error: a plain .mjs module of the bench, without types
import * as rule from "../../bench/lib/soakRule.mjs"

interface Judged {
  readonly slope: number | null
  readonly judged: boolean
  readonly pass: boolean | null
  readonly warmupMs: number
}
const judgeSlope = rule.judgeSlope as (
  samples: ReadonlyArray<Record<string, number>>,
  key: string,
  durationMs: number,
  limitMb?: number,
) => Judged
const warmupMsOf = rule.warmupMsOf as (durationMs: number) => number

const MINUTE = 60_000

/** One sample every 10 s over `minutes`, RSS from `rss(minute)`. */
const run = (minutes: number, rss: (minute: number) => number): Array<Record<string, number>> =>
  Array.from({ length: minutes * 6 }, (_, i) => ({ t_s: i * 10, rss_mb: rss((i * 10) / 60) }))

/** The shape ADR 0068 measured: RSS climbs about 4 MB while the heap finds its high, then stays. */
const plateauAt = (minute: number) => (m: number) => 174 + (4 * Math.min(m, minute)) / minute

describe("the soak's RSS rule", () => {
  it("warms up for a third of the run, at most 20 minutes", () => {
    expect(warmupMsOf(3 * MINUTE)).toBe(1 * MINUTE)
    expect(warmupMsOf(30 * MINUTE)).toBe(10 * MINUTE)
    expect(warmupMsOf(60 * MINUTE)).toBe(20 * MINUTE)
    expect(warmupMsOf(120 * MINUTE)).toBe(20 * MINUTE)
  })

  it("passes a 60-minute run whose RSS rose for 20 minutes and then stayed", () => {
    const judged = judgeSlope(run(60, plateauAt(20)), "rss_mb", 60 * MINUTE)
    expect(judged.warmupMs).toBe(20 * MINUTE)
    expect(judged.judged).toBe(true)
    expect(judged.slope).toBeCloseTo(0, 6)
    expect(judged.pass).toBe(true)
  })

  it("fails a 60-minute run that still grows after minute 20 by 0.5 MB per 10 minutes or more", () => {
    const growing = judgeSlope(
      run(60, (m) => 174 + 0.06 * m),
      "rss_mb",
      60 * MINUTE,
    )
    expect(growing.slope).toBeCloseTo(0.6, 6)
    expect(growing.pass).toBe(false)
    const justUnder = judgeSlope(
      run(60, (m) => 174 + 0.049 * m),
      "rss_mb",
      60 * MINUTE,
    )
    expect(justUnder.pass).toBe(true)
    // A heap still rising until minute 45: its rise falls in the window, and it fails.
    expect(judgeSlope(run(60, plateauAt(45)), "rss_mb", 60 * MINUTE).pass).toBe(false)
  })

  it("does not judge a run too short to pass its warm-up and 35 minutes after it", () => {
    // The 30-minute soak of ADR 0068 (still rising): reported, not judged.
    const thirty = judgeSlope(run(30, plateauAt(20)), "rss_mb", 30 * MINUTE)
    expect(thirty.slope).toBeGreaterThan(0.5)
    expect(thirty.judged).toBe(false)
    expect(thirty.pass).toBeNull()
    // The CI run of the script: 3 minutes.
    expect(judgeSlope(run(3, plateauAt(20)), "rss_mb", 3 * MINUTE).pass).toBeNull()
    // 50 minutes has the whole warm-up but only 30 minutes after it.
    expect(judgeSlope(run(50, plateauAt(20)), "rss_mb", 50 * MINUTE).pass).toBeNull()
  })

  it("takes a looser bound when asked", () => {
    const growing = judgeSlope(
      run(60, (m) => 174 + 0.06 * m),
      "rss_mb",
      60 * MINUTE,
      1,
    )
    expect(growing.pass).toBe(true)
  })
})
