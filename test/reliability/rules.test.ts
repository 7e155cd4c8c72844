import { assert, describe, it } from "@effect/vitest"
import {
  MAX_RETRY_AFTER_MS,
  parseRetryAfter,
  ruleForInbandError,
  ruleForStatus,
  type Rule,
} from "../../src/reliability/rules.js"

const serve: Rule = { decision: "serve", outcome: "success", cooldown: false }
const rateLimited: Rule = { decision: "next", outcome: "neutral", cooldown: true }
const overloaded: Rule = { decision: "next", outcome: "failure", cooldown: false }
const serverError: Rule = { decision: "retry_same", outcome: "failure", cooldown: false }
const clientError: Rule = { decision: "return", outcome: "neutral", cooldown: false }

/** A fixed "now": 2025-01-15T12:00:00Z. */
const NOW = Date.UTC(2025, 0, 15, 12, 0, 0)
const httpDate = (ms: number) => new Date(ms).toUTCString()

describe("ruleForStatus", () => {
  it("2xx: serve, counts as a success", () => {
    for (const status of [200, 201, 204, 299])
      assert.deepStrictEqual(ruleForStatus(status), serve, `${status}`)
  })

  it("429: next target, neutral, cooldown", () => {
    assert.deepStrictEqual(ruleForStatus(429), rateLimited)
  })

  it("529: next target, failure", () => {
    assert.deepStrictEqual(ruleForStatus(529), overloaded)
  })

  it("other 5xx: retry the same target, failure", () => {
    for (const status of [500, 501, 502, 503, 504, 520, 599]) {
      assert.deepStrictEqual(ruleForStatus(status), serverError, `${status}`)
    }
  })

  it("other 4xx: return it unchanged, neutral", () => {
    for (const status of [400, 401, 403, 404, 408, 409, 413, 422, 428, 430, 499]) {
      assert.deepStrictEqual(ruleForStatus(status), clientError, `${status}`)
    }
  })
})

describe("ruleForInbandError", () => {
  it("overloaded_error follows the 529 rule", () => {
    assert.deepStrictEqual(ruleForInbandError("overloaded_error"), ruleForStatus(529))
  })

  it("rate_limit_error follows the 429 rule", () => {
    assert.deepStrictEqual(ruleForInbandError("rate_limit_error"), ruleForStatus(429))
    assert.deepStrictEqual(ruleForInbandError("rate_limit_exceeded"), ruleForStatus(429))
  })

  it("any other type follows the 5xx rule", () => {
    for (const type of ["api_error", "server_error", "invalid_request_error", "", "Overloaded_Error"]) {
      assert.deepStrictEqual(ruleForInbandError(type), serverError, JSON.stringify(type))
    }
  })
})

describe("parseRetryAfter", () => {
  it("reads delta-seconds as milliseconds", () => {
    assert.strictEqual(parseRetryAfter("7", NOW), 7_000)
    assert.strictEqual(parseRetryAfter("0", NOW), 0)
    assert.strictEqual(parseRetryAfter("599", NOW), 599_000)
    assert.strictEqual(parseRetryAfter("600", NOW), 600_000)
  })

  it("caps delta-seconds at 10 minutes", () => {
    assert.strictEqual(MAX_RETRY_AFTER_MS, 600_000)
    assert.strictEqual(parseRetryAfter("601", NOW), 600_000)
    assert.strictEqual(parseRetryAfter("100000", NOW), 600_000)
    assert.strictEqual(parseRetryAfter("99999999999999999999999", NOW), 600_000)
  })

  it("reads an HTTP date as milliseconds from now", () => {
    assert.strictEqual(httpDate(NOW + 30_000), "Wed, 15 Jan 2025 12:00:30 GMT")
    assert.strictEqual(parseRetryAfter(httpDate(NOW + 30_000), NOW), 30_000)
  })

  it("reads an HTTP date in the past as 0", () => {
    assert.strictEqual(parseRetryAfter(httpDate(NOW - 5_000), NOW), 0)
    assert.strictEqual(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", NOW), 0)
  })

  it("caps an HTTP date at 10 minutes", () => {
    assert.strictEqual(parseRetryAfter(httpDate(NOW + 3_600_000), NOW), 600_000)
  })

  it("reads the obsolete RFC 850 and asctime date forms as GMT, whatever the local time zone", () => {
    const saved = process.env.TZ
    try {
      for (const zone of ["UTC", "America/New_York", "Asia/Tokyo"]) {
        process.env.TZ = zone
        assert.strictEqual(parseRetryAfter("Wednesday, 15-Jan-25 12:00:30 GMT", NOW), 30_000, zone)
        assert.strictEqual(parseRetryAfter("Wed Jan 15 12:00:30 2025", NOW), 30_000, zone)
        assert.strictEqual(parseRetryAfter("Wed Jan  5 12:00:30 2025", NOW), 0, zone)
      }
    } finally {
      if (saved === undefined) delete process.env.TZ
      else process.env.TZ = saved
    }
  })

  it("gives undefined (no cooldown) for a missing or invalid value", () => {
    for (const value of [
      "abc",
      "-5",
      "1.5",
      "",
      " ",
      "7s",
      "+7",
      "0x10",
      "1e3",
      "Wed, 99 Foo 2025 12:00:30 GMT",
    ]) {
      assert.strictEqual(parseRetryAfter(value, NOW), undefined, JSON.stringify(value))
    }
    assert.strictEqual(parseRetryAfter(undefined, NOW), undefined)
    assert.strictEqual(parseRetryAfter(["7"], NOW), undefined)
  })
})
