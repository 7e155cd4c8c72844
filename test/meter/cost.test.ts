import { describe, expect, it } from "vitest"
import type { PriceEntry } from "../../src/config/model.js"
import { costMicroUsd, tokensOf } from "../../src/meter/cost.js"

/** USD per million tokens → micro-USD per million tokens, as the config decoder does. */
const price = (input: number, output: number, cacheRead: number, cacheWrite: number): PriceEntry => ({
  provider: undefined,
  model: "m",
  input: Math.round(input * 1_000_000),
  output: Math.round(output * 1_000_000),
  cacheRead: Math.round(cacheRead * 1_000_000),
  cacheWrite: Math.round(cacheWrite * 1_000_000),
})
const sonnet = price(3, 10, 0.3, 3.75)
const usage = (inputTokens: number, outputTokens = 0, cacheReadTokens = 0, cacheWriteTokens = 0) => ({
  inputTokens,
  outputTokens,
  cacheReadTokens,
  cacheWriteTokens,
})

describe("costMicroUsd", () => {
  it("charges 3 micro-USD for 1 input token at 3 USD per million", () => {
    expect(costMicroUsd(usage(1), sonnet)).toBe(3)
  })

  it("rounds 1 cache-read token at 0.3 USD per million up to 1 micro-USD", () => {
    expect(costMicroUsd(usage(0, 0, 1), sonnet)).toBe(1)
  })

  it("rounds the request total up once, not each field", () => {
    // 1 cache read at 0.3 + 1 cache write at 0.5 = 0.8 micro-USD → 1 (per field it would be 1 + 1 = 2)
    expect(costMicroUsd(usage(0, 0, 1, 1), price(3, 10, 0.3, 0.5))).toBe(1)
    // 1 input at 3 + 1 cache read at 0.3 = 3.3 → 4
    expect(costMicroUsd(usage(1, 0, 1, 0), sonnet)).toBe(4)
    // 5 cache reads at 0.3 = 1.5 → 2
    expect(costMicroUsd(usage(0, 0, 5, 0), sonnet)).toBe(2)
  })

  it("matches the SPEC example: 1200 in, 310 out at 3/10 USD per million", () => {
    expect(costMicroUsd(usage(1200, 310), sonnet)).toBe(6700)
  })

  it("is exact for exact multiples and 0 for no usage", () => {
    expect(costMicroUsd(usage(1_000_000, 1_000_000), sonnet)).toBe(13_000_000)
    expect(costMicroUsd(usage(0), sonnet)).toBe(0)
  })

  it("stays exact past 2^53 with BigInt", () => {
    const expensive = price(1000, 1000, 1000, 1000)
    const big = usage(5_000_000, 5_000_000, 1, 0)
    // total = (10,000,001) × 1e9 = 1.0000001e16 > 2^53 → 10,000,001,000 micro-USD exactly
    expect(costMicroUsd(big, expensive)).toBe(10_000_001_000)
  })
})

describe("tokensOf", () => {
  it("sums all four counts", () => {
    expect(tokensOf(usage(1, 2, 3, 4))).toBe(10)
  })
})
