import { Effect } from "effect"
import fc from "fast-check"
import { appendFileSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Columns } from "../../src/admin/columns.js"
import { loadColumns, toRow } from "../../src/admin/load.js"
import { GROUP_BY, type GroupBy, type UsageQuery } from "../../src/admin/query.js"
import { make } from "../../src/admin/UsageIndex.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { groupRecords, sumRecords, usageRecord, writeUsageFile } from "./fixtures.js"

/** The usage index alone: columns, out-of-order records, range bounds, grouping, loading. */

const BASE = Date.parse("2026-12-01T23:59:59.990Z")
const iso = (ms: number) => new Date(ms).toISOString()

const query = (records: ReadonlyArray<UsageRecord>, q: Partial<UsageQuery>, bulk = false) => {
  const columns = new Columns(4)
  const index = make(columns)
  if (bulk) {
    // As the loader does: append in file order, sort once.
    for (const r of records) columns.push(toRow(columns, r)!)
    columns.sort()
  } else for (const r of records) index.add(r)
  return Effect.runSync(
    index.query({ tenant: undefined, since: undefined, until: undefined, groupBy: undefined, ...q }),
  )
}

const keyOf =
  (groupBy: GroupBy) =>
  (r: UsageRecord): string | null => {
    switch (groupBy) {
      case "day":
        return r.ts.slice(0, 10)
      case "key":
        return `${r.tenant}/${r.key_id}`
      case "route":
        return r.route === "" ? null : r.route
      default:
        return r[groupBy]
    }
  }

const arbitraryRecord = fc
  .record({
    offset: fc.integer({ min: 0, max: 40 }),
    tenant: fc.constantFrom("acme", "globex"),
    keyId: fc.constantFrom("ci", "web"),
    route: fc.constantFrom("claude", "gpt", ""),
    provider: fc.constantFrom("anthropic", "backup", null),
    model: fc.constantFrom("claude-sonnet-5-5", "gpt-5-mini", null),
    session: fc.constantFrom("s-1", "s-2", null),
    input: fc.nat(5_000),
    output: fc.nat(5_000),
    cacheRead: fc.nat(100),
    cacheWrite: fc.nat(100),
    cost: fc.nat(1_000_000),
  })
  .map((a) =>
    usageRecord({
      ts: iso(BASE + a.offset),
      tenant: a.tenant,
      key_id: a.keyId,
      route: a.route,
      provider: a.provider,
      model: a.model,
      session: a.session,
      input_tokens: a.input,
      output_tokens: a.output,
      cache_read_tokens: a.cacheRead,
      cache_write_tokens: a.cacheWrite,
      cost_micro_usd: a.cost,
    }),
  )

describe("UsageIndex", () => {
  it("answers every range, tenant and grouping exactly like a scan of the records, in any arrival order", () => {
    fc.assert(
      fc.property(
        fc.array(arbitraryRecord, { maxLength: 60 }),
        fc.option(fc.integer({ min: -1, max: 42 }), { nil: undefined }),
        fc.option(fc.integer({ min: -1, max: 42 }), { nil: undefined }),
        fc.option(fc.constantFrom("acme", "globex", "nobody"), { nil: undefined }),
        fc.option(fc.constantFrom(...GROUP_BY), { nil: undefined }),
        (records, since, until, tenant, groupBy) => {
          const sinceMs = since === undefined ? undefined : BASE + since
          const untilMs = until === undefined ? undefined : BASE + until
          const expected = records.filter((r) => {
            const ts = Date.parse(r.ts)
            return (
              (sinceMs === undefined || ts >= sinceMs) &&
              (untilMs === undefined || ts < untilMs) &&
              (tenant === undefined || r.tenant === tenant)
            )
          })
          const q = { since: sinceMs, until: untilMs, tenant, groupBy }
          for (const bulk of [false, true]) {
            const result = query(records, q, bulk)
            expect(result.totals).toEqual(sumRecords(expected))
            if (groupBy === undefined) expect(result.groups).toBeUndefined()
            else expect(result.groups).toEqual(groupRecords(expected, keyOf(groupBy)))
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it("keeps rows sorted by ts when a record arrives after later ones (a long stream ends last)", () => {
    const columns = new Columns(2)
    const index = make(columns)
    for (const offset of [0, 5, 9, 3, 9, 1, 7]) index.add(usageRecord({ ts: iso(BASE + offset) }))
    expect([...columns.ts.subarray(0, columns.size)].map((t) => t - BASE)).toEqual([0, 1, 3, 5, 7, 9, 9])
    expect(columns.sorted).toBe(true)
  })

  it("includes a record at exactly `since` and excludes one at exactly `until`", () => {
    const records = [BASE - 1, BASE, BASE + 1].map((t) =>
      usageRecord({ ts: iso(t), cost_micro_usd: t - BASE + 10 }),
    )
    expect(query(records, { since: BASE }).totals.cost_micro_usd).toBe(10 + 11)
    expect(query(records, { until: BASE }).totals.cost_micro_usd).toBe(9)
    expect(query(records, { since: BASE, until: BASE + 1 }).totals.requests).toBe(1)
    expect(query(records, { since: BASE, until: BASE }).totals.requests).toBe(0)
  })

  it("groups by UTC date across midnight", () => {
    const records = [BASE, BASE + 9, BASE + 10, BASE + 10 + 86_400_000].map((t) =>
      usageRecord({ ts: iso(t) }),
    )
    const groups = query(records, { groupBy: "day" }).groups
    expect(groups?.map((g) => [g.key, g.requests])).toEqual([
      ["2026-12-01", 2],
      ["2026-12-02", 1],
      ["2026-12-03", 1],
    ])
  })

  it("groups records without a model, provider or session under a null key, listed last", () => {
    const records = [
      usageRecord({ ts: iso(BASE), session: "b" }),
      usageRecord({ ts: iso(BASE), session: null }),
    ]
    records.push(usageRecord({ ts: iso(BASE + 1), session: "a" }))
    expect(query(records, { groupBy: "session" }).groups?.map((g) => g.key)).toEqual(["a", "b", null])
  })

  it("loads a file written out of ts order sorted, skipping a torn last line and blank lines", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-index-"))
    const file = join(dir, "usage.jsonl")
    const records = [30, 10, 20, 0].map((o) => usageRecord({ ts: iso(BASE + o), cost_micro_usd: o + 1 }))
    writeUsageFile(file, records)
    appendFileSync(file, '\n{"ts":"2026-12-02T00:00:00.000Z","request_id":"torn","ten')
    const loaded = await loadColumns(file)
    expect(loaded.skipped).toBe(1)
    expect(loaded.skippedLines).toEqual([6])
    expect(loaded.columns.sorted).toBe(true)
    expect([...loaded.columns.cost.subarray(0, loaded.columns.size)]).toEqual([1, 11, 21, 31])
  })

  it("reads a missing file as empty", async () => {
    const loaded = await loadColumns(join(tmpdir(), "tollgate-no-such-dir", "usage.jsonl"))
    expect(loaded.columns.size).toBe(0)
    expect(loaded.skipped).toBe(0)
  })
})
