import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { parseInstant, parseUsageQuery } from "../../src/admin/params.js"

/** The `/admin/usage` query string. */

const parse = (query: string) => parseUsageQuery(new URLSearchParams(query))

const error = (query: string) => {
  const result = parse(query)
  if (Result.isSuccess(result)) throw new Error(`expected ${query} to be refused`)
  return { param: result.failure.param, message: result.failure.message }
}

describe("parseInstant", () => {
  it("reads dates as UTC midnight and date-times with Z or an offset", () => {
    expect(parseInstant("2026-12-02")).toBe(Date.parse("2026-12-02T00:00:00.000Z"))
    expect(parseInstant("2026-12-02T10:04:05.123Z")).toBe(Date.parse("2026-12-02T10:04:05.123Z"))
    expect(parseInstant("2026-12-02T10:04Z")).toBe(Date.parse("2026-12-02T10:04:00.000Z"))
    expect(parseInstant("2026-12-02T10:00:00+01:30")).toBe(Date.parse("2026-12-02T08:30:00.000Z"))
    expect(parseInstant("2026-12-02T10:00:00-02:00")).toBe(Date.parse("2026-12-02T12:00:00.000Z"))
    expect(parseInstant("0099-03-01T00:00:00Z")).toBe(Date.parse("0099-03-01T00:00:00.000Z"))
  })

  it("reads an unencoded + that arrived as a space as +", () => {
    expect(parseInstant("2026-12-02T10:00:00 01:00")).toBe(Date.parse("2026-12-02T09:00:00.000Z"))
  })

  it("rounds an instant finer than a millisecond up, so ts >= since and ts < until stay exact", () => {
    expect(parseInstant("2026-12-02T10:00:00.1234Z")).toBe(Date.parse("2026-12-02T10:00:00.124Z"))
    expect(parseInstant("2026-12-02T10:00:00.123000000Z")).toBe(Date.parse("2026-12-02T10:00:00.123Z"))
  })

  it("refuses what is not a real ISO-8601 instant", () => {
    for (const text of [
      "yesterday",
      "2026-02-30",
      "2026-13-01",
      "2026-12-02T24:00:00Z",
      "2026-12-02T10:00:00",
      "2026-12-02T10:61Z",
      "1764669845123",
      "2026-12-02T10:00:00+25:00",
    ]) {
      expect(parseInstant(text), text).toBeUndefined()
    }
  })
})

describe("parseUsageQuery", () => {
  it("reads every parameter and treats empty ones as absent", () => {
    expect(parse("tenant=acme&since=2026-12-01&until=2026-12-02&group_by=day")).toEqual(
      Result.succeed({
        tenant: "acme",
        since: Date.parse("2026-12-01T00:00:00Z"),
        until: Date.parse("2026-12-02T00:00:00Z"),
        groupBy: "day",
      }),
    )
    expect(parse("tenant=&since=&until=&group_by=")).toEqual(
      Result.succeed({ tenant: undefined, since: undefined, until: undefined, groupBy: undefined }),
    )
  })

  it("refuses a bad date, an unknown grouping, since after until, unknown and repeated parameters", () => {
    expect(error("since=soon")).toMatchObject({ param: "since", message: expect.stringContaining('"soon"') })
    expect(error("until=2026-02-30")).toMatchObject({ param: "until" })
    expect(error("group_by=team")).toMatchObject({
      param: "group_by",
      message:
        'group_by: unknown grouping "team"; expected one of model, provider, route, tenant, key, day, session, target',
    })
    expect(error("since=2026-12-02&until=2026-12-01")).toEqual({
      param: "since",
      message: "since is after until",
    })
    expect(error("groupby=day")).toMatchObject({ param: "groupby" })
    expect(error("tenant=a&tenant=b")).toMatchObject({
      param: "tenant",
      message: "tenant: given more than once",
    })
  })

  it("accepts since equal to until (an empty range)", () => {
    expect(Result.isSuccess(parse("since=2026-12-01T00:00:00Z&until=2026-12-01"))).toBe(true)
  })
})
