/**
 * What a response costs, in integer micro-USD.
 */
import type { MicroUsd, PriceEntry } from "../config/model.js"
import type { TokenCounts } from "../domain/usage.js"

const PER_MILLION = 1_000_000
const PER_MILLION_BIG = 1_000_000n

/**
 * The cost of `usage` at `price` (micro-USD per million tokens), in micro-USD,
 * rounded up once for the whole request:
 * ceil((in·p_in + out·p_out + cacheRead·p_cr + cacheWrite·p_cw) / 1,000,000).
 * Integer math (exact; BigInt past 2^53). Prices are integers after config
 * decoding; a fractional price falls back to float math.
 */
export const costMicroUsd = (usage: TokenCounts, price: PriceEntry): MicroUsd => {
  const total =
    usage.inputTokens * price.input +
    usage.outputTokens * price.output +
    usage.cacheReadTokens * price.cacheRead +
    usage.cacheWriteTokens * price.cacheWrite
  if (Number.isSafeInteger(total)) {
    const rest = total % PER_MILLION
    return (total - rest) / PER_MILLION + (rest > 0 ? 1 : 0)
  }
  const integral =
    Number.isSafeInteger(price.input) &&
    Number.isSafeInteger(price.output) &&
    Number.isSafeInteger(price.cacheRead) &&
    Number.isSafeInteger(price.cacheWrite)
  if (!integral || !Number.isFinite(total)) {
    return Math.ceil(total / PER_MILLION)
  }
  const big =
    BigInt(usage.inputTokens) * BigInt(price.input) +
    BigInt(usage.outputTokens) * BigInt(price.output) +
    BigInt(usage.cacheReadTokens) * BigInt(price.cacheRead) +
    BigInt(usage.cacheWriteTokens) * BigInt(price.cacheWrite)
  return Number((big + PER_MILLION_BIG - 1n) / PER_MILLION_BIG)
}

/**
 * What the prompt cache saved on `cacheReadTokens` at `price`, in micro-USD,
 * rounded down (never claims a saving it did not make; ADR 0073):
 * floor(cacheRead · (p_in − p_cr) / 1,000,000). Negative only when a price
 * table makes cache reads dearer than input.
 */
export const cacheSavedMicroUsd = (cacheReadTokens: number, price: PriceEntry): MicroUsd => {
  if (cacheReadTokens === 0) return 0
  const total = cacheReadTokens * (price.input - price.cacheRead)
  if (Number.isSafeInteger(total)) {
    const rest = total % PER_MILLION
    return (total - rest) / PER_MILLION - (rest < 0 ? 1 : 0)
  }
  if (!Number.isSafeInteger(price.input) || !Number.isSafeInteger(price.cacheRead) || !Number.isFinite(total))
    return Math.floor(total / PER_MILLION)
  const big = BigInt(cacheReadTokens) * BigInt(price.input - price.cacheRead)
  const quotient = big / PER_MILLION_BIG
  return Number(big % PER_MILLION_BIG < 0n ? quotient - 1n : quotient)
}

/** All tokens of a response: input + output + cache read + cache write (what `tokens_per_minute` counts). */
export const tokensOf = (usage: TokenCounts): number =>
  usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
