import { Effect } from "effect"
import fc from "fast-check"
import { appendFileSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { ChunkedRows, openChunkFile, type ChunkFile } from "../../src/admin/chunks.js"
import { Chunk, ROW_BYTES } from "../../src/admin/columns.js"
import { loadRows, toRow } from "../../src/admin/load.js"
import { GROUP_BY, type GroupBy, type UsageQuery } from "../../src/admin/query.js"
import { make } from "../../src/admin/UsageIndex.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { groupRecords, sumRecords, usageRecord, writeUsageFile } from "./fixtures.js"
import { tempDir } from "../support/tempDirs.js"

/** The usage index alone: columns, out-of-order records, range bounds, grouping, loading. */

const BASE = Date.parse("2026-12-01T23:59:59.990Z")
const iso = (ms: number) => new Date(ms).toISOString()

const fullQuery = (q: Partial<UsageQuery>): UsageQuery => ({
  tenant: undefined,
  since: undefined,
  until: undefined,
  groupBy: undefined,
  ...q,
})

/** Chunks of 4 rows in memory (no chunk file); `bulk`: as the loader fills them (file order, sorted when full). */
const query = (records: ReadonlyArray<UsageRecord>, q: Partial<UsageQuery>, bulk = false) => {
  const rows = new ChunkedRows({ rowsPerChunk: 4 })
  const index = make(rows)
  if (bulk) {
    for (const r of records) rows.push(toRow(rows.tables, r)!)
    rows.sort()
  } else for (const r of records) index.add(r)
  return Effect.runSync(index.query(fullQuery(q)))
}

const dir = tempDir("tollgate-index-")

/** `use` with rows whose full chunks (of `rowsPerChunk`) go to a real chunk file in `dir`, closed after. */
const withChunkFile = <A>(rowsPerChunk: number, use: (rows: ChunkedRows) => Promise<A>): Promise<A> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(openChunkFile(dir), (file) =>
        Effect.promise(() => use(new ChunkedRows({ file, rowsPerChunk }))),
      ),
    ),
  )

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
      case "target":
        return r.provider === null ? null : `${r.route}/${r.provider}/${r.model ?? ""}`
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
  it("answers every range, tenant and grouping exactly like a scan of the records, in any arrival order", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(arbitraryRecord, { maxLength: 60 }),
        fc.option(fc.integer({ min: -1, max: 42 }), { nil: undefined }),
        fc.option(fc.integer({ min: -1, max: 42 }), { nil: undefined }),
        fc.option(fc.constantFrom("acme", "globex", "nobody"), { nil: undefined }),
        fc.option(fc.constantFrom(...GROUP_BY), { nil: undefined }),
        async (records, since, until, tenant, groupBy) => {
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
          const check = (result: { totals: unknown; groups: unknown }) => {
            expect(result.totals).toEqual(sumRecords(expected))
            if (groupBy === undefined) expect(result.groups).toBeUndefined()
            else expect(result.groups).toEqual(groupRecords(expected, keyOf(groupBy)))
          }
          for (const bulk of [false, true]) check(query(records, q, bulk))
          // Chunks of 3 rows in a chunk file: queried while writes may be under way, then from the file.
          await withChunkFile(3, async (rows) => {
            const index = make(rows)
            for (const r of records) index.add(r)
            check(await Effect.runPromise(index.query(fullQuery(q))))
            await rows.flushed()
            check(await Effect.runPromise(index.query(fullQuery(q))))
          })
        },
      ),
      { numRuns: 300 },
    )
  })

  it("keeps a chunk's rows sorted by ts when a record arrives after later ones (a long stream ends last)", () => {
    const rows = new ChunkedRows()
    const chunk = new Chunk(8)
    for (const offset of [0, 5, 9, 3, 9, 1, 7])
      chunk.insert(toRow(rows.tables, usageRecord({ ts: iso(BASE + offset) }))!)
    expect([...chunk.ts.subarray(0, chunk.size)].map((t) => t - BASE)).toEqual([0, 1, 3, 5, 7, 9, 9])
    expect(chunk.sorted).toBe(true)
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
    const dir = tempDir("tollgate-index-")
    const file = join(dir, "usage.jsonl")
    const records = [30, 10, 20, 0].map((o) => usageRecord({ ts: iso(BASE + o), cost_micro_usd: o + 1 }))
    writeUsageFile(file, records)
    appendFileSync(file, '\n{"ts":"2026-12-02T00:00:00.000Z","request_id":"torn","ten')
    const rows = new ChunkedRows()
    const loaded = await loadRows(file, rows)
    expect(loaded).toEqual({ records: 4, skipped: 1, skippedLines: [6] })
    const costs: Array<number> = []
    Effect.runSync(
      rows.scan(undefined, undefined, (chunk) => costs.push(...chunk.cost.subarray(0, chunk.size))),
    )
    expect(costs).toEqual([1, 11, 21, 31])
  })

  it("reads a missing file as empty", async () => {
    const rows = new ChunkedRows()
    const loaded = await loadRows(join(tmpdir(), "tollgate-no-such-dir", "usage.jsonl"), rows)
    expect(loaded).toEqual({ records: 0, skipped: 0, skippedLines: [] })
    expect(rows.size).toBe(0)
  })
})

describe("the chunk file", () => {
  /** `n` records from second `from`, wrapping back to 0 every `period` seconds. */
  const records = (n: number, from = 0, period = 997) =>
    Array.from({ length: n }, (_, i) =>
      usageRecord({
        ts: iso(BASE + ((from + i) % period) * 1000),
        tenant: i % 3 === 0 ? "globex" : "acme",
        cost_micro_usd: from + i,
        input_tokens: i,
      }),
    )

  it("keeps a few chunks in memory however many records it holds, and 54 bytes per record in the file", async () => {
    await withChunkFile(1000, async (rows) => {
      const index = make(rows)
      const all = records(50_500, 0, Infinity)
      for (const r of all) index.add(r)
      await rows.flushed()
      const stats = index.stats()
      expect(stats.records).toBe(50_500)
      // The chunk being filled and one spare, whatever the count.
      expect(stats.memoryBytes).toBe(2 * 1000 * ROW_BYTES)
      expect(stats.diskBytes).toBe(50_000 * ROW_BYTES)
      const result = await Effect.runPromise(index.query(fullQuery({ groupBy: "tenant" })))
      expect(result.totals).toEqual(sumRecords(all))
      expect(result.groups).toEqual(groupRecords(all, (r) => r.tenant))
      const since = BASE + 10_000_000
      const until = BASE + 20_000_500
      const ranged = await Effect.runPromise(index.query(fullQuery({ since, until, tenant: "acme" })))
      const inRange = all.filter((r) => {
        const ts = Date.parse(r.ts)
        return ts >= since && ts < until && r.tenant === "acme"
      })
      expect(ranged.totals).toEqual(sumRecords(inRange))
    })
  })

  it("has no name in the directory while it is open (the system frees it when the process ends)", async () => {
    const before = readdirSync(dir)
    await withChunkFile(10, async (rows) => {
      const index = make(rows)
      for (const r of records(100)) index.add(r)
      await rows.flushed()
      expect(rows.diskBytes()).toBe(100 * ROW_BYTES)
      expect(readdirSync(dir)).toEqual(before)
    })
    expect(readdirSync(dir)).toEqual(before)
  })

  it("keeps a chunk it could not write in memory, logs through onWriteError, and still answers exactly", async () => {
    const failures: Array<unknown> = []
    // A volume that is full: every write fails as the system fails it.
    const full: ChunkFile = {
      write: () =>
        Promise.reject(Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" })),
      read: () => Promise.reject(new Error("nothing was written")),
    }
    const rows = new ChunkedRows({
      file: full,
      rowsPerChunk: 10,
      onWriteError: (cause) => failures.push(cause),
    })
    const index = make(rows)
    const all = records(105)
    for (const r of all) index.add(r)
    await rows.flushed()
    expect(failures).toHaveLength(10)
    expect(rows.memoryBytes()).toBe(11 * 10 * ROW_BYTES)
    const result = await Effect.runPromise(index.query(fullQuery({})))
    expect(result.totals).toEqual(sumRecords(all))
  })

  it("loads a file larger than a chunk through the chunk file, each chunk sorted, and answers as the records say", async () => {
    const file = join(dir, "big.jsonl")
    // Written out of ts order: the chunks overlap in time.
    const all = [...records(2_500, 0), ...records(2_500, 500)]
    writeUsageFile(file, all)
    await withChunkFile(1000, async (rows) => {
      const loaded = await loadRows(file, rows)
      expect(loaded.records).toBe(5_000)
      expect(rows.diskBytes()).toBe(5_000 * ROW_BYTES)
      let sorted = true
      await Effect.runPromise(
        rows.scan(undefined, undefined, (chunk) => {
          for (let i = 1; i < chunk.size; i++) if (chunk.ts[i - 1]! > chunk.ts[i]!) sorted = false
        }),
      )
      expect(sorted).toBe(true)
      const index = make(rows)
      for (const [since, until] of [
        [BASE, BASE + 997_000],
        [BASE + 250_500, BASE + 251_500],
        [BASE + 996_000, undefined],
      ] as const) {
        const expected = all.filter((r) => {
          const ts = Date.parse(r.ts)
          return ts >= since && (until === undefined || ts < until)
        })
        const result = await Effect.runPromise(index.query(fullQuery({ since, until, groupBy: "day" })))
        expect(result.totals).toEqual(sumRecords(expected))
      }
    })
  })
})
