import { describe, expect, it } from "vitest"
import { okScenario, parseScenario, ScenarioError } from "../../fakeprovider/scenario.js"
import {
  anthropicInputTokens,
  countTokens,
  openaiInputTokens,
  planOutput,
} from "../../fakeprovider/tokens.js"

describe("parseScenario", () => {
  it("reads every item of the seed's table", () => {
    expect(parseScenario("ok")).toEqual(okScenario)
    expect(parseScenario("")).toEqual(okScenario)
    expect(parseScenario("status:500").status).toEqual({ code: 500 })
    expect(parseScenario("status:429:7").status).toEqual({ code: 429, retryAfter: "7" })
    expect(parseScenario("hang-before-headers").hangBeforeHeaders).toBe(true)
    expect(parseScenario("hang-after:2-tokens").after).toEqual({ action: "hang", tokens: 2 })
    expect(parseScenario("reset-after:2-tokens").after).toEqual({ action: "reset", tokens: 2 })
    expect(parseScenario("malformed-after:0-tokens").after).toEqual({ action: "malformed", tokens: 0 })
    expect(parseScenario("no-usage").noUsage).toBe(true)
  })

  it("reads the additional items and comma-separated combinations", () => {
    expect(parseScenario("tokens:40, delay:5")).toEqual({ ...okScenario, tokens: 40, delayMs: 5 })
    expect(parseScenario("max-tokens").maxTokens).toBe(true)
    expect(parseScenario("error-body-stall:503").stallErrorBody).toEqual({ code: 503 })
    expect(parseScenario("inband-error:overloaded_error").inbandError).toBe("overloaded_error")
  })

  it("rejects unknown items and malformed numbers", () => {
    for (const bad of [
      "nope",
      "status:abc",
      "status:99",
      "status:429:",
      "tokens:",
      "delay:-1",
      "hang-after:x-tokens",
    ]) {
      expect(() => parseScenario(bad), bad).toThrow(ScenarioError)
    }
  })
})

describe("token accounting", () => {
  it("counts words and single punctuation marks, not bytes", () => {
    expect(countTokens("Hello, world!")).toBe(4)
    expect(countTokens("  snake_case  42x ")).toBe(2)
    expect(countTokens("héllo wörld…")).toBe(3)
    expect(countTokens("")).toBe(0)
  })

  it("counts the Anthropic system prompt and text blocks, skipping other blocks", () => {
    const body = {
      system: [{ type: "text", text: "Be brief." }],
      messages: [
        { role: "user", content: "one two" },
        {
          role: "user",
          content: [
            { type: "image", source: {} },
            { type: "text", text: "three" },
          ],
        },
      ],
    }
    expect(anthropicInputTokens(body)).toBe(6)
  })

  it("counts OpenAI message strings and text parts", () => {
    const body = {
      messages: [
        { role: "system", content: "a b" },
        {
          role: "user",
          content: [
            { type: "text", text: "c." },
            { type: "image_url", image_url: {} },
          ],
        },
      ],
    }
    expect(openaiInputTokens(body)).toBe(4)
  })

  it("plans min(max_tokens, 16) by default and honours tokens:N and max-tokens", () => {
    expect(planOutput(okScenario, 100)).toEqual({ tokens: 16, hitLimit: false })
    expect(planOutput(okScenario, 5)).toEqual({ tokens: 5, hitLimit: true })
    expect(planOutput(okScenario, undefined)).toEqual({ tokens: 16, hitLimit: false })
    expect(planOutput({ ...okScenario, tokens: 3 }, 100)).toEqual({ tokens: 3, hitLimit: false })
    expect(planOutput({ ...okScenario, maxTokens: true }, 300)).toEqual({ tokens: 300, hitLimit: true })
  })
})
