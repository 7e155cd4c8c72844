import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { decodeRecord, encodeRecord, type UsageRecord } from "../../src/meter/record.js"
import { isoTime, jsonNumber, jsonString, parseIsoTime } from "../../src/ops/jsonText.js"
import { requestLine } from "../../src/ops/logger.js"

/** Any string, including lone surrogates, control characters, quotes and backslashes. */
const anyString = fc.oneof(
  fc.string({ unit: "binary" }),
  fc.string({
    unit: fc.constantFrom("a", '"', "\\", "\n", "\u0000", "\u001f", "\u007f", "é", "\ud800", "\udc00"),
  }),
)

const record: fc.Arbitrary<UsageRecord> = fc.record({
  ts: anyString,
  request_id: anyString,
  tenant: anyString,
  key_id: anyString,
  route: anyString,
  endpoint: anyString,
  stream: fc.boolean(),
  provider: fc.option(anyString),
  model: fc.option(anyString),
  attempts: fc.integer(),
  status: fc.integer(),
  input_tokens: fc.double(),
  output_tokens: fc.integer(),
  cache_read_tokens: fc.integer(),
  cache_write_tokens: fc.integer(),
  reserved_micro_usd: fc.maxSafeInteger(),
  cost_micro_usd: fc.maxSafeInteger(),
  usage_estimated: fc.boolean(),
  incomplete: fc.boolean(),
  session: fc.option(anyString),
  duration_ms: fc.double(),
  error: fc.option(anyString),
  upstream_endpoint: fc.option(anyString),
  trace_id: fc.option(anyString),
  budget: fc.option(anyString),
  cache_saved_micro_usd: fc.maxSafeInteger(),
  moved_from: fc.option(anyString),
  moved_reason: fc.option(anyString),
})

const stringified = (r: UsageRecord): string =>
  JSON.stringify({
    ts: r.ts,
    request_id: r.request_id,
    tenant: r.tenant,
    key_id: r.key_id,
    route: r.route,
    endpoint: r.endpoint,
    stream: r.stream,
    provider: r.provider,
    model: r.model,
    attempts: r.attempts,
    status: r.status,
    input_tokens: r.input_tokens,
    output_tokens: r.output_tokens,
    cache_read_tokens: r.cache_read_tokens,
    cache_write_tokens: r.cache_write_tokens,
    reserved_micro_usd: r.reserved_micro_usd,
    cost_micro_usd: r.cost_micro_usd,
    usage_estimated: r.usage_estimated,
    incomplete: r.incomplete,
    session: r.session,
    duration_ms: r.duration_ms,
    error: r.error,
    upstream_endpoint: r.upstream_endpoint,
    trace_id: r.trace_id,
    budget: r.budget,
    cache_saved_micro_usd: r.cache_saved_micro_usd,
    moved_from: r.moved_from,
    moved_reason: r.moved_reason,
  }) + "\n"

describe("JSON text by concatenation", () => {
  it("jsonString and jsonNumber write what JSON.stringify writes", () => {
    fc.assert(
      fc.property(anyString, (s) => {
        expect(jsonString(s)).toBe(JSON.stringify(s))
      }),
      { numRuns: 2000 },
    )
    fc.assert(
      fc.property(fc.double(), (n) => {
        expect(jsonNumber(n)).toBe(JSON.stringify(n))
      }),
      { numRuns: 2000 },
    )
    expect(jsonString("\ud83d\ude00")).toBe('"\ud83d\ude00"')
    expect(jsonString("\ud83d")).toBe('"\\ud83d"')
    expect(jsonNumber(-0)).toBe("0")
  })

  it("encodeRecord writes the usage record JSON.stringify writes, keys in SPEC order, and it decodes back", () => {
    fc.assert(
      fc.property(record, (r) => {
        const line = encodeRecord(r)
        expect(line).toBe(stringified(r))
        expect(Object.keys(JSON.parse(line))).toEqual(Object.keys(JSON.parse(stringified(r))))
      }),
      { numRuns: 1000 },
    )
    const r: UsageRecord = {
      ts: "2026-12-02T10:04:05.123Z",
      request_id: "req_1",
      tenant: 'acme "eu"',
      key_id: "k1",
      route: "claude",
      endpoint: "/v1/messages",
      stream: true,
      provider: "anthropic",
      model: null,
      attempts: 2,
      status: 200,
      input_tokens: 12,
      output_tokens: 7,
      cache_read_tokens: 0,
      cache_write_tokens: 3,
      reserved_micro_usd: 1500,
      cost_micro_usd: 99,
      usage_estimated: false,
      incomplete: false,
      session: "s\n1",
      duration_ms: 41,
      error: null,
      upstream_endpoint: "/v1/chat/completions",
      trace_id: null,
      budget: null,
      cache_saved_micro_usd: 0,
      moved_from: null,
      moved_reason: null,
    }
    expect(decodeRecord(encodeRecord(r).trimEnd())).toEqual(r)
  })

  it("the request line is the JSON of ts, level, message and the record's request fields", () => {
    fc.assert(
      fc.property(record, anyString, (r, ts) => {
        expect(requestLine(r, ts)).toBe(
          JSON.stringify({
            ts,
            level: "info",
            message: "request",
            request_id: r.request_id,
            ...(r.trace_id === null ? {} : { trace_id: r.trace_id }),
            tenant: r.tenant,
            key_id: r.key_id,
            route: r.route,
            provider: r.provider,
            model: r.model,
            attempts: r.attempts,
            status: r.status,
            duration_ms: r.duration_ms,
            cost_micro_usd: r.cost_micro_usd,
            error: r.error,
          }) + "\n",
        )
      }),
      { numRuns: 500 },
    )
  })

  it("isoTime is toISOString, in and across seconds and outside the four-digit years", () => {
    const ms = fc.oneof(
      fc.integer({ min: 0, max: 253402300799999 }),
      fc.integer({ min: 1796256000000, max: 1796256003000 }),
      fc.integer({ min: -8.64e15, max: 8.64e15 }),
    )
    fc.assert(
      fc.property(ms, (t) => {
        expect(isoTime(t)).toBe(new Date(t).toISOString())
      }),
      { numRuns: 5000 },
    )
    for (const t of [
      0, 999, 1000, 1001, 1796256000999, 1796256001000, 253402300799999, 253402300800000, -1, 1.5,
    ]) {
      expect(isoTime(t)).toBe(new Date(t).toISOString())
    }
    expect(() => isoTime(Number.NaN)).toThrow(RangeError)
  })

  it("parseIsoTime is Date.parse, for times in one second, across seconds and for strings that are not times", () => {
    const near = fc.integer({ min: 1796256000000, max: 1796256003000 }).map((t) => new Date(t).toISOString())
    const edited = fc
      .tuple(near, fc.nat({ max: 23 }), fc.constantFrom("0", "9", "x", ":", "Z", "."))
      .map(([s, i, c]) => s.slice(0, i) + c + s.slice(i + 1))
    fc.assert(
      fc.property(fc.oneof(near, edited, anyString), (s) => {
        expect(parseIsoTime(s)).toEqual(Date.parse(s))
      }),
      { numRuns: 5000 },
    )
    // A second that is not a valid time in its own form is never reused for the next millisecond.
    for (const s of [
      "2026-12-02T24:00:00.000Z",
      "2026-12-02T24:00:00.001Z",
      "2026-02-30T00:00:00.000Z",
      "2026-02-30T00:00:00.001Z",
      "2026-12-02T10:04:05.123Z",
      "2026-12-02T10:04:05.124Z",
      "2026-12-02T10:04:05.12aZ",
      "2026-12-02T10:04:05,124Z",
    ]) {
      expect(parseIsoTime(s)).toEqual(Date.parse(s))
    }
  })
})
