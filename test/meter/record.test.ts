import { describe, expect, it } from "vitest"
import { decodeRecord, encodeRecord } from "../../src/meter/record.js"
import { sampleRecord } from "./fixtures.js"

const SPEC_ORDER = [
  "ts",
  "request_id",
  "tenant",
  "key_id",
  "route",
  "endpoint",
  "stream",
  "provider",
  "model",
  "attempts",
  "status",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "reserved_micro_usd",
  "cost_micro_usd",
  "usage_estimated",
  "incomplete",
  "session",
  "duration_ms",
  "error",
  "upstream_endpoint",
  "trace_id",
  "budget",
  "cache_saved_micro_usd",
  "moved_from",
  "moved_reason",
]

describe("encodeRecord", () => {
  it("writes one JSON line with the fields in SPEC order, whatever the input key order", () => {
    const line = encodeRecord(sampleRecord())
    expect(line.endsWith("\n")).toBe(true)
    expect(line.indexOf("\n")).toBe(line.length - 1)
    expect(Object.keys(JSON.parse(line))).toEqual(SPEC_ORDER)
    expect(line.startsWith('{"ts":"2026-12-02T10:04:05.123Z","request_id":"req_1","tenant":"acme"')).toBe(
      true,
    )
  })

  it("writes nulls for a request that no target served", () => {
    const parsed = JSON.parse(
      encodeRecord(sampleRecord({ provider: null, model: null, error: "rate_limit_error" })),
    )
    expect(parsed.provider).toBeNull()
    expect(parsed.model).toBeNull()
    expect(parsed.error).toBe("rate_limit_error")
  })
})

describe("decodeRecord", () => {
  it("round-trips an encoded record", () => {
    expect(decodeRecord(encodeRecord(sampleRecord()).trimEnd())).toEqual(sampleRecord())
  })

  it("reads a record written before upstream_endpoint and trace_id existed with both null", () => {
    const line = encodeRecord(sampleRecord())
      .trimEnd()
      .replace(',"upstream_endpoint":"/v1/messages"', "")
      .replace(',"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"', "")
    expect(line).not.toContain("upstream_endpoint")
    expect(line).not.toContain("trace_id")
    expect(decodeRecord(line)).toEqual(sampleRecord({ upstream_endpoint: null, trace_id: null }))
  })

  it("reads a record written with upstream_endpoint but before trace_id existed with trace_id null", () => {
    const line = encodeRecord(sampleRecord())
      .trimEnd()
      .replace(',"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"', "")
    expect(decodeRecord(line)).toEqual(sampleRecord({ trace_id: null }))
    expect(
      decodeRecord(line.replace('"upstream_endpoint":"/v1/messages"', '"upstream_endpoint":7')),
    ).toBeUndefined()
  })

  it("keeps the refusing budget, and reads a record written before budget existed with budget null", () => {
    const refused = sampleRecord({ status: 402, error: "budget_exceeded", budget: "key.day" })
    const line = encodeRecord(refused).trimEnd()
    expect(
      line.endsWith(
        ',"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","budget":"key.day","cache_saved_micro_usd":0,"moved_from":null,"moved_reason":null}',
      ),
    ).toBe(true)
    expect(decodeRecord(line)).toEqual(refused)
    const older = encodeRecord(sampleRecord()).trimEnd().replace(',"budget":null', "")
    expect(older).not.toContain("budget")
    expect(decodeRecord(older)).toEqual(sampleRecord({ budget: null }))
    expect(decodeRecord(line.replace('"budget":"key.day"', '"budget":3'))).toBeUndefined()
  })

  it("keeps the cache saving and a sticky session's move, and reads a record written before them with 0 and null", () => {
    const moved = sampleRecord({
      cache_saved_micro_usd: 2700,
      moved_from: "a/claude",
      moved_reason: "breaker_open",
    })
    const line = encodeRecord(moved).trimEnd()
    expect(
      line.endsWith(',"cache_saved_micro_usd":2700,"moved_from":"a/claude","moved_reason":"breaker_open"}'),
    ).toBe(true)
    expect(decodeRecord(line)).toEqual(moved)
    const older = line.replace(
      ',"cache_saved_micro_usd":2700,"moved_from":"a/claude","moved_reason":"breaker_open"',
      "",
    )
    expect(decodeRecord(older)).toEqual(sampleRecord())
    expect(
      decodeRecord(line.replace('"cache_saved_micro_usd":2700', '"cache_saved_micro_usd":"2700"')),
    ).toBeUndefined()
    expect(decodeRecord(line.replace('"moved_from":"a/claude"', '"moved_from":1'))).toBeUndefined()
  })

  it("rejects a torn line and a line with a wrong field type", () => {
    const line = encodeRecord(sampleRecord()).trimEnd()
    expect(decodeRecord(line.slice(0, 60))).toBeUndefined()
    expect(decodeRecord(line.replace('"cost_micro_usd":6700', '"cost_micro_usd":"6700"'))).toBeUndefined()
    expect(decodeRecord("null")).toBeUndefined()
  })
})
