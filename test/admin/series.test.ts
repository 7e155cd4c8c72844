import { Effect, Result } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ChunkedRows } from "../../src/admin/chunks.js"
import { Chunk, Tables } from "../../src/admin/columns.js"
import { toRow } from "../../src/admin/load.js"
import { parseSeriesQuery, parseUsageQuery, usageFormat } from "../../src/admin/params.js"
import {
  MAX_BUCKETS,
  RESOLUTION_MS,
  startSeries,
  seriesBody,
  type Resolution,
  type Series,
  type SeriesQuery,
} from "../../src/admin/series.js"
import { make } from "../../src/admin/UsageIndex.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { usageRecord } from "./fixtures.js"

/** The series of the usage index alone: bucket math, ranges, defaults, tenant, errors, the cap, live adds. */

const at = (text: string) => Date.parse(text)
const iso = (ms: number) => new Date(ms).toISOString()
const seconds = (text: string) => at(text) / 1000

/** The records in chunks of 7 rows (in memory), added as the gateway adds them. */
const columnsOf = (records: ReadonlyArray<UsageRecord>): ChunkedRows => {
  const rows = new ChunkedRows({ rowsPerChunk: 7 })
  const index = make(rows)
  for (const r of records) index.add(r)
  return rows
}

/** The series as the index runs it, with `now` as the clock's time. */
const runSeries = (rows: ChunkedRows, query: SeriesQuery, now: number) =>
  Result.map(
    startSeries(rows.tables, query, now, (mine, until) => rows.firstBefore(mine, until)),
    (run) => {
      Effect.runSync(rows.scan(run.since, run.until, run.visit))
      return run.result()
    },
  )

const NOW = at("2026-12-03T12:00:00.000Z")

const series = (
  records: ReadonlyArray<UsageRecord> | ChunkedRows,
  q: Partial<SeriesQuery>,
  now = NOW,
): Series => {
  const columns = records instanceof ChunkedRows ? records : columnsOf(records)
  const result = runSeries(
    columns,
    { tenant: undefined, since: undefined, until: undefined, resolution: undefined, ...q },
    now,
  )
  if (Result.isFailure(result)) throw new Error(result.failure.message)
  return result.success
}

const record = (ts: string, fields: Partial<UsageRecord> = {}) => usageRecord({ ts, ...fields })

describe("runSeries bucket math", () => {
  it("counts minute buckets exact to the millisecond at both edges, with empty minutes as zeros", () => {
    const records = [
      record("2026-12-02T10:00:00.000Z", { cost_micro_usd: 1, input_tokens: 10, output_tokens: 100 }),
      record("2026-12-02T10:00:59.999Z", { cost_micro_usd: 2, input_tokens: 20, output_tokens: 200 }),
      record("2026-12-02T10:01:00.000Z", { cost_micro_usd: 4, input_tokens: 40, output_tokens: 400 }),
      record("2026-12-02T10:03:59.999Z", { cost_micro_usd: 8, input_tokens: 80, output_tokens: 800 }),
      record("2026-12-02T10:04:00.000Z", { cost_micro_usd: 16 }),
    ]
    const s = series(records, {
      since: at("2026-12-02T10:00:00Z"),
      until: at("2026-12-02T10:04:00Z"),
      resolution: "minute",
    })
    expect(s.t).toEqual([
      seconds("2026-12-02T10:00:00Z"),
      seconds("2026-12-02T10:01:00Z"),
      seconds("2026-12-02T10:02:00Z"),
      seconds("2026-12-02T10:03:00Z"),
    ])
    expect(s.requests).toEqual([2, 1, 0, 1])
    expect(s.cost_micro_usd).toEqual([3, 4, 0, 8])
    expect(s.input_tokens).toEqual([30, 40, 0, 80])
    expect(s.output_tokens).toEqual([300, 400, 0, 800])
    expect(s.errors).toEqual([0, 0, 0, 0])
  })

  it("counts hour buckets across an empty hour, the record at the hour's last ms in the earlier one", () => {
    const records = [
      record("2026-12-02T09:59:59.999Z"),
      record("2026-12-02T10:00:00.000Z", { cost_micro_usd: 5 }),
      record("2026-12-02T10:59:59.999Z", { cost_micro_usd: 7 }),
      record("2026-12-02T11:00:00.000Z", { cost_micro_usd: 11 }),
      record("2026-12-02T13:30:00.000Z", { cost_micro_usd: 13 }),
    ]
    const s = series(records, {
      since: at("2026-12-02T10:00:00Z"),
      until: at("2026-12-02T14:00:00Z"),
      resolution: "hour",
    })
    expect(s.t).toEqual(["10", "11", "12", "13"].map((h) => seconds(`2026-12-02T${h}:00:00Z`)))
    expect(s.requests).toEqual([2, 1, 0, 1])
    expect(s.cost_micro_usd).toEqual([12, 11, 0, 13])
  })

  it("counts UTC day buckets across midnight and an empty day, whatever the offset the bounds were given in", () => {
    const records = [
      record("2026-11-30T23:59:59.999Z"),
      record("2026-12-01T00:00:00.000Z"),
      record("2026-12-01T23:59:59.999Z"),
      record("2026-12-02T00:00:00.000Z"),
      record("2026-12-04T12:00:00.000Z"),
    ]
    const s = series(records, {
      since: at("2026-12-01T01:00:00+01:00"),
      until: at("2026-12-05T00:00:00Z"),
      resolution: "day",
    })
    expect(s.t).toEqual(["01", "02", "03", "04"].map((d) => seconds(`2026-12-${d}T00:00:00Z`)))
    expect(s.requests).toEqual([2, 1, 0, 1])
  })

  it("keeps the partial first and last buckets of an unaligned range, counting only records inside it", () => {
    const records = [
      record("2026-12-02T10:00:29.999Z", { cost_micro_usd: 1 }),
      record("2026-12-02T10:00:30.000Z", { cost_micro_usd: 2 }),
      record("2026-12-02T10:02:09.999Z", { cost_micro_usd: 4 }),
      record("2026-12-02T10:02:10.000Z", { cost_micro_usd: 8 }),
    ]
    const s = series(records, {
      since: at("2026-12-02T10:00:30Z"),
      until: at("2026-12-02T10:02:10Z"),
      resolution: "minute",
    })
    expect(s.t).toEqual(["00", "01", "02"].map((m) => seconds(`2026-12-02T10:${m}:00Z`)))
    expect(s.requests).toEqual([1, 0, 1])
    expect(s.cost_micro_usd).toEqual([2, 0, 4])
    expect(s.since).toBe(at("2026-12-02T10:00:30Z"))
    expect(s.until).toBe(at("2026-12-02T10:02:10Z"))
  })

  it("has no bucket for an until on a bucket edge, and no buckets at all for since equal to until", () => {
    const records = [record("2026-12-02T10:01:00.000Z")]
    const edge = series(records, {
      since: at("2026-12-02T10:00:00Z"),
      until: at("2026-12-02T10:01:00Z"),
      resolution: "minute",
    })
    expect(edge.t).toEqual([seconds("2026-12-02T10:00:00Z")])
    expect(edge.requests).toEqual([0])
    const empty = series(records, {
      since: at("2026-12-02T10:01:00Z"),
      until: at("2026-12-02T10:01:00Z"),
      resolution: "minute",
    })
    expect(seriesBody(empty)).toEqual({
      tenant: null,
      since: "2026-12-02T10:01:00.000Z",
      until: "2026-12-02T10:01:00.000Z",
      resolution: "minute",
      t: [],
      requests: [],
      errors: [],
      cost_micro_usd: [],
      input_tokens: [],
      output_tokens: [],
    })
  })

  it("gives every bucket the same sums as /admin/usage over that bucket's part of the range, for any records and range", () => {
    const base = at("2026-12-01T22:00:00.000Z")
    const arbitrary = fc.record({
      offset: fc.integer({ min: 0, max: 4 * 86_400_000 }),
      tenant: fc.constantFrom("acme", "globex"),
      status: fc.constantFrom(200, 201, 400, 429, 499, 502),
      input: fc.nat(5_000),
      output: fc.nat(5_000),
      cost: fc.nat(1_000_000),
    })
    fc.assert(
      fc.property(
        fc.array(arbitrary, { maxLength: 80 }),
        fc.integer({ min: -3_600_000, max: 4 * 86_400_000 }),
        fc.integer({ min: 0, max: 4 * 86_400_000 }),
        fc.constantFrom<Resolution>("minute", "hour", "day"),
        fc.option(fc.constantFrom("acme", "globex", "nobody"), { nil: undefined }),
        (drawn, sinceOffset, length, resolution, tenant) => {
          const records = drawn.map((a) =>
            record(iso(base + a.offset), {
              tenant: a.tenant,
              status: a.status,
              input_tokens: a.input,
              output_tokens: a.output,
              cost_micro_usd: a.cost,
            }),
          )
          const columns = columnsOf(records)
          const since = base + sinceOffset
          // Minutes over at most 2 days (2,881 buckets), under the cap.
          const until = since + (resolution === "minute" ? length % (2 * 86_400_000) : length)
          const s = series(columns, { since, until, resolution, tenant })
          const size = RESOLUTION_MS[resolution]
          expect(s.t.length).toBe(since === until ? 0 : Math.ceil(until / size) - Math.floor(since / size))
          s.t.forEach((start, i) => {
            const from = Math.max(since, start * 1000)
            const to = Math.min(until, start * 1000 + size)
            const totals = Effect.runSync(
              make(columns).query({ tenant, since: from, until: to, groupBy: undefined }),
            ).totals
            expect(s.requests[i]).toBe(totals.requests)
            expect(s.cost_micro_usd[i]).toBe(totals.cost_micro_usd)
            expect(s.input_tokens[i]).toBe(totals.input_tokens)
            expect(s.output_tokens[i]).toBe(totals.output_tokens)
            const inBucket = records.filter((r) => {
              const ts = Date.parse(r.ts)
              return ts >= from && ts < to && (tenant === undefined || r.tenant === tenant)
            })
            expect(s.errors[i]).toBe(inBucket.filter((r) => r.status < 200 || r.status > 299).length)
          })
        },
      ),
      { numRuns: 200 },
    )
  })
})

describe("runSeries filters and counts", () => {
  const records = [
    record("2026-12-02T10:00:01.000Z", { tenant: "acme", status: 200 }),
    record("2026-12-02T10:00:02.000Z", { tenant: "acme", status: 201 }),
    record("2026-12-02T10:00:03.000Z", { tenant: "acme", status: 299 }),
    record("2026-12-02T10:00:04.000Z", { tenant: "acme", status: 429, error: "rate_limit_error" }),
    record("2026-12-02T10:00:05.000Z", { tenant: "globex", status: 402, error: "budget_exceeded" }),
    record("2026-12-02T10:01:01.000Z", { tenant: "acme", status: 499, error: "client_disconnected" }),
    record("2026-12-02T10:01:02.000Z", { tenant: "acme", status: 502, error: "api_error" }),
    record("2026-12-02T10:01:03.000Z", {
      tenant: "globex",
      status: 404,
      error: "route_not_found",
      route: "x",
    }),
    record("2026-12-02T10:01:04.000Z", { tenant: "acme", status: 304 }),
    record("2026-12-02T10:01:05.000Z", { tenant: "acme", status: 100 }),
    // A stream cut after its first byte keeps the 200 its client got: not an error in the series.
    record("2026-12-02T10:01:06.000Z", { tenant: "acme", status: 200, error: "api_error", incomplete: true }),
    record("2026-12-02T10:02:00.000Z", { tenant: "globex", status: 200 }),
  ]
  const range = {
    since: at("2026-12-02T10:00:00Z"),
    until: at("2026-12-02T10:03:00Z"),
    resolution: "minute" as const,
  }

  it("counts in errors every record whose status is outside 200–299, and nothing else", () => {
    const s = series(records, range)
    expect(s.requests).toEqual([5, 6, 1])
    expect(s.errors).toEqual([2, 5, 0])
  })

  it("filters by tenant, keeping every bucket for a tenant with no records at all", () => {
    expect(series(records, { ...range, tenant: "acme" })).toMatchObject({
      tenant: "acme",
      requests: [4, 5, 0],
      errors: [1, 4, 0],
    })
    expect(series(records, { ...range, tenant: "globex" })).toMatchObject({
      requests: [1, 1, 1],
      errors: [1, 1, 0],
    })
    const nobody = series(records, { ...range, tenant: "nobody" })
    expect(nobody.t.length).toBe(3)
    expect(nobody.requests).toEqual([0, 0, 0])
    expect(nobody.cost_micro_usd).toEqual([0, 0, 0])
  })

  it("shows a record added after the first query (the live add), also one older than the newest", () => {
    const columns = columnsOf(records)
    const index = make(columns)
    const run = () => Effect.runSync(index.series({ tenant: "acme", ...range }))
    expect(run().requests).toEqual([4, 5, 0])
    index.add(record("2026-12-02T10:02:30.000Z", { tenant: "acme", status: 503, cost_micro_usd: 70 }))
    index.add(record("2026-12-02T10:00:30.000Z", { tenant: "acme", status: 200, cost_micro_usd: 30 }))
    const after = run()
    expect(after.requests).toEqual([5, 5, 1])
    expect(after.errors).toEqual([1, 4, 1])
    expect(after.cost_micro_usd).toEqual([4 * 80 + 30, 5 * 80, 70])
  })
})

describe("runSeries defaults", () => {
  const records = [
    record("2026-12-01T08:15:00.000Z", { tenant: "globex" }),
    record("2026-12-02T09:30:00.000Z", { tenant: "acme" }),
    record("2026-12-03T11:59:00.000Z", { tenant: "acme" }),
  ]

  it("starts at the first record (of the tenant) and ends now, choosing the resolution from that range", () => {
    const all = series(records, {})
    expect(all.since).toBe(at("2026-12-01T08:15:00Z"))
    expect(all.until).toBe(NOW)
    expect(all.resolution).toBe("hour")
    expect(all.t[0]).toBe(seconds("2026-12-01T08:00:00Z"))
    expect(all.t.at(-1)).toBe(seconds("2026-12-03T11:00:00Z"))
    expect(all.t.length).toBe(16 + 24 + 12)
    expect(all.requests.reduce((a, b) => a + b, 0)).toBe(3)
    const acme = series(records, { tenant: "acme" })
    expect(acme.since).toBe(at("2026-12-02T09:30:00Z"))
    expect(acme.t[0]).toBe(seconds("2026-12-02T09:00:00Z"))
  })

  it("is an empty series at now without records (or for a tenant that has none)", () => {
    for (const s of [series([], {}), series(records, { tenant: "nobody" })]) {
      expect(s.since).toBe(NOW)
      expect(s.until).toBe(NOW)
      expect(s.t).toEqual([])
      expect(s.requests).toEqual([])
    }
  })

  it("takes since as until when since is later than now and until is absent (an empty range)", () => {
    const later = at("2026-12-10T00:00:00Z")
    const s = series(records, { since: later })
    expect([s.since, s.until, s.t.length]).toEqual([later, later, 0])
  })

  it("picks minute up to 6 hours, hour up to 31 days, day beyond", () => {
    const since = at("2026-12-01T00:00:00Z")
    const pick = (length: number) => series(records, { since, until: since + length }).resolution
    expect(pick(6 * 3_600_000)).toBe("minute")
    expect(pick(6 * 3_600_000 + 1)).toBe("hour")
    expect(pick(31 * 86_400_000)).toBe("hour")
    expect(pick(31 * 86_400_000 + 1)).toBe("day")
    expect(series(records, { since, until: since + 6 * 3_600_000 }).t.length).toBe(360)
  })
})

describe("the bucket cap", () => {
  it("allows 10,000 buckets and refuses 10,001, naming resolution", () => {
    const since = at("2026-12-01T00:00:00Z")
    const ok = series([], { since, until: since + MAX_BUCKETS * 60_000, resolution: "minute" })
    expect(ok.t.length).toBe(10_000)
    expect(ok.requests.length).toBe(10_000)
    // One ms into the 10,001st minute; or a range of exactly 10,000 minutes that starts and ends 1 ms past an edge.
    for (const [from, to] of [
      [since, since + MAX_BUCKETS * 60_000 + 1],
      [since + 1, since + MAX_BUCKETS * 60_000 + 1],
    ] as const) {
      const result = runSeries(
        columnsOf([]),
        { tenant: undefined, since: from, until: to, resolution: "minute" },
        NOW,
      )
      if (Result.isSuccess(result)) throw new Error("expected the cap to refuse")
      expect(result.failure.param).toBe("resolution")
      expect(result.failure.buckets).toBe(10_001)
      expect(result.failure.message).toContain("10001 buckets; at most 10000")
    }
  })

  it("refuses a default since at minute resolution when the records go back further than 10,000 minutes", () => {
    const records = [record("2026-11-01T00:00:00.000Z")]
    const error = Effect.runSync(
      Effect.flip(
        make(columnsOf(records)).series({
          tenant: undefined,
          since: undefined,
          until: NOW,
          resolution: "minute",
        }),
      ),
    )
    expect(error).toMatchObject({ _tag: "TooManyBuckets", param: "resolution", buckets: (32 * 24 + 12) * 60 })
    expect(series(records, { resolution: "hour" }).t.length).toBe(32 * 24 + 12)
  })
})

describe("the query strings", () => {
  const parse = (query: string) => parseSeriesQuery(new URLSearchParams(query))
  const refused = (result: Result.Result<unknown, { param: string; message: string }>) => {
    if (Result.isSuccess(result)) throw new Error("expected a refusal")
    return { param: result.failure.param, message: result.failure.message }
  }

  it("reads tenant, since, until and resolution; empty ones are absent", () => {
    expect(parse("tenant=acme&since=2026-12-01&until=2026-12-02T00:00:00%2B01:00&resolution=hour")).toEqual(
      Result.succeed({
        tenant: "acme",
        since: at("2026-12-01T00:00:00Z"),
        until: at("2026-12-01T23:00:00Z"),
        resolution: "hour",
      }),
    )
    expect(parse("tenant=&since=&until=&resolution=")).toEqual(
      Result.succeed({ tenant: undefined, since: undefined, until: undefined, resolution: undefined }),
    )
  })

  it("refuses an unknown resolution or parameter, a repeated parameter, a bad date and since after until", () => {
    expect(refused(parse("resolution=second"))).toEqual({
      param: "resolution",
      message: 'resolution: unknown resolution "second"; expected one of minute, hour, day',
    })
    expect(refused(parse("group_by=day"))).toEqual({
      param: "group_by",
      message: 'unknown parameter "group_by"; expected tenant, since, until, resolution',
    })
    expect(refused(parse("resolution=hour&resolution=day"))).toEqual({
      param: "resolution",
      message: "resolution: given more than once",
    })
    expect(refused(parse("since=yesterday"))).toMatchObject({ param: "since" })
    expect(refused(parse("until=2026-12-02T10:00:00"))).toMatchObject({ param: "until" })
    expect(refused(parse("since=2026-12-02&until=2026-12-01"))).toEqual({
      param: "since",
      message: "since is after until",
    })
  })

  it("reads /admin/usage's format: json by default, csv, anything else refused", () => {
    const params = (query: string) => new URLSearchParams(query)
    expect(Result.isSuccess(parseUsageQuery(params("format=csv&group_by=model")))).toBe(true)
    expect(usageFormat(params("format=csv"))).toBe("csv")
    expect(usageFormat(params("format=json"))).toBe("json")
    expect(usageFormat(params(""))).toBe("json")
    expect(refused(parseUsageQuery(params("format=xlsx")))).toEqual({
      param: "format",
      message: 'format: unknown format "xlsx"; expected one of json, csv',
    })
    expect(refused(parseUsageQuery(params("format=csv&format=json")))).toMatchObject({ param: "format" })
  })
})

describe("the status column", () => {
  it("holds each record's status through inserts, out-of-order pushes and the sort", () => {
    const tables = new Tables()
    const chunk = new Chunk(8)
    const statuses = [200, 502, 429, 499, 201]
    const offsets = [4, 0, 3, 1, 2]
    offsets.forEach((o, i) =>
      chunk.push(toRow(tables, record(iso(at("2026-12-02T10:00:00Z") + o), { status: statuses[i]! }))!),
    )
    chunk.sort()
    expect([...chunk.status.subarray(0, chunk.size)]).toEqual([502, 499, 201, 429, 200])
    chunk.insert(toRow(tables, record(iso(at("2026-12-02T10:00:00Z") + 2), { status: 503 }))!)
    expect([...chunk.status.subarray(0, chunk.size)]).toEqual([502, 499, 201, 503, 429, 200])
  })
})
