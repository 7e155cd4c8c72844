import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import type { PriceEntry, ProviderConfig } from "../../src/config/model.js"
import { decodePriceTable, priceFor } from "../../src/config/pricing.js"

const FILE = "/etc/tollgate/pricing.yaml"

const anthropic: ProviderConfig = {
  name: "anthropic",
  kind: "anthropic",
  baseUrl: "https://api.anthropic.com",
  apiKeyEnv: "ANTHROPIC_API_KEY",
}
const vertex: ProviderConfig = {
  name: "vertex",
  kind: "vertex",
  project: "p",
  region: "us-east5",
  baseUrl: "https://us-east5-aiplatform.googleapis.com",
  accessTokenEnv: undefined,
}
const local: ProviderConfig = { name: "local", kind: "ollama", baseUrl: "http://localhost:11434" }

const table = (rows: ReadonlyArray<unknown>): ReadonlyArray<PriceEntry> =>
  Result.getOrThrow(decodePriceTable({ prices: rows }, FILE))

describe("price table", () => {
  it("converts USD per million tokens to micro-USD per million tokens", () => {
    const prices = table([
      {
        provider: "vertex",
        model: "claude-sonnet-5-5@20261001",
        input: 3.3,
        output: 11,
        cache_read: 0.33,
        cache_write: 4.125,
      },
    ])
    assert.deepStrictEqual(prices, [
      {
        provider: "vertex",
        model: "claude-sonnet-5-5@20261001",
        input: 3_300_000,
        output: 11_000_000,
        cacheRead: 330_000,
        cacheWrite: 4_125_000,
      },
    ])
  })

  it("defaults cache_read and cache_write to 0 and provider to none", () => {
    assert.deepStrictEqual(table([{ model: "gpt-5-mini", input: 0.25, output: 2 }]), [
      {
        provider: undefined,
        model: "gpt-5-mini",
        input: 250_000,
        output: 2_000_000,
        cacheRead: 0,
        cacheWrite: 0,
      },
    ])
  })

  it("reports problems under prices with the file and their index", () => {
    const result = decodePriceTable(
      {
        prices: [
          { model: "a", input: 1, output: 1 },
          { model: "b", input: -1, output: 1, cache_reed: 1 },
          { input: 1 },
        ],
      },
      FILE,
    )
    assert.deepStrictEqual(
      result,
      Result.fail([
        "pricing.file: /etc/tollgate/pricing.yaml: prices[1].cache_reed: unknown key (expected one of: provider, model, input, output, cache_read, cache_write)",
        "pricing.file: /etc/tollgate/pricing.yaml: prices[1].input: must be a non-negative number of USD, e.g. 5 or 0.25",
        "pricing.file: /etc/tollgate/pricing.yaml: prices[2].model: is required",
        "pricing.file: /etc/tollgate/pricing.yaml: prices[2].output: is required",
      ]),
    )
  })

  it("reports problems outside prices against pricing.file", () => {
    assert.deepStrictEqual(
      decodePriceTable({ prices: [], currency: "USD" }, FILE),
      Result.fail([
        "pricing.file: /etc/tollgate/pricing.yaml: currency: unknown key (expected one of: prices)",
      ]),
    )
    assert.deepStrictEqual(
      decodePriceTable("prices", FILE),
      Result.fail(["pricing.file: /etc/tollgate/pricing.yaml: must be a mapping with a prices list"]),
    )
  })

  it("rejects two entries for the same provider and model", () => {
    const result = decodePriceTable(
      {
        prices: [
          { model: "m", input: 1, output: 1 },
          { provider: "vertex", model: "m", input: 1, output: 1 },
          { model: "m", input: 2, output: 2 },
        ],
      },
      FILE,
    )
    assert.deepStrictEqual(
      result,
      Result.fail([
        'pricing.file: /etc/tollgate/pricing.yaml: prices[2]: duplicate price for model "m", first at prices[0]',
      ]),
    )
  })
})

describe("priceFor", () => {
  const prices = table([
    { model: "claude-sonnet-5-5", input: 3, output: 10 },
    { provider: "vertex", model: "claude-sonnet-5-5", input: 3.3, output: 11 },
    { provider: "local", model: "llama-big", input: 0.5, output: 0.5 },
  ])

  it("prefers a provider+model entry over a model-only entry, whatever the order", () => {
    assert.strictEqual(priceFor(prices, vertex, "claude-sonnet-5-5")?.input, 3_300_000)
    assert.strictEqual(priceFor([...prices].reverse(), vertex, "claude-sonnet-5-5")?.input, 3_300_000)
    assert.strictEqual(priceFor(prices, anthropic, "claude-sonnet-5-5")?.input, 3_000_000)
  })

  it("has no price for an unknown model on a paid provider", () => {
    assert.isUndefined(priceFor(prices, anthropic, "claude-opus-9"))
    assert.isUndefined(priceFor(prices, vertex, "llama-big"))
  })

  it("gives an Ollama target without an entry a zero price, and honours an explicit one", () => {
    assert.deepStrictEqual(priceFor(prices, local, "llama3.2"), {
      provider: "local",
      model: "llama3.2",
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
    })
    assert.strictEqual(priceFor(prices, local, "llama-big")?.output, 500_000)
  })
})
