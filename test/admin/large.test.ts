import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ChunkedRows, openChunkFile, ROWS_PER_CHUNK } from "../../src/admin/chunks.js"
import { ROW_BYTES } from "../../src/admin/columns.js"
import { loadRows } from "../../src/admin/load.js"
import { encodeRecord } from "../../src/meter/record.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminGet, usageRecord } from "./fixtures.js"

/** A 200,000-record usage file: loaded at start in bounded time and memory, queried without a rescan. */

const RECORDS = 200_000
const DAY_MS = 86_400_000
const start = Date.now() - 40 * DAY_MS
const step = Math.floor((39 * DAY_MS) / RECORDS)

let h: Harness
let file: string
let startMs: number
const expected = {
  requests: 0,
  errors: 0,
  cost: 0,
  input: 0,
  sessions: new Set<string>(),
  tenants: new Map<string, number>(),
}

beforeAll(async () => {
  h = await startHarness({
    env: { [ADMIN_ENV]: ADMIN_TOKEN },
    config: (urls, keyHash, dir) => {
      file = join(dir, "usage.jsonl")
      const lines: Array<string> = []
      for (let i = 0; i < RECORDS; i++) {
        // Near-ts order, as a real file: every 50th record ended 5 s after later ones started.
        const ts = start + i * step - (i % 50 === 0 ? 5_000 : 0)
        const tenant = `tenant-${i % 7}`
        const session = `d-${(i % 20_000).toString(16).padStart(24, "0")}`
        const record = usageRecord({
          ts: new Date(ts).toISOString(),
          request_id: `00000000-0000-4000-8000-${i.toString().padStart(12, "0")}`,
          tenant,
          model: i % 3 === 0 ? "gpt-5-mini" : "claude-sonnet-5-5",
          provider: i % 3 === 0 ? "openai" : "anthropic",
          session,
          input_tokens: 1000 + (i % 977),
          output_tokens: 100 + (i % 211),
          cost_micro_usd: 4000 + (i % 1013),
          status: i % 17 === 0 ? 502 : 200,
        })
        lines.push(encodeRecord(record))
        expected.requests++
        if (record.status !== 200) expected.errors++
        expected.cost += record.cost_micro_usd
        expected.input += record.input_tokens
        expected.sessions.add(session)
        expected.tenants.set(tenant, (expected.tenants.get(tenant) ?? 0) + 1)
      }
      writeFileSync(file, lines.join(""))
      startMs = performance.now()
      return {
        server: { listen: "127.0.0.1:0" },
        admin: { token_env: ADMIN_ENV },
        usage: { file },
        providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
        routes: {
          claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        },
        tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
      }
    },
  })
  // Everything the gateway does at start (the index, the memory store's restore) over this file.
  const startupMs = performance.now() - startMs
  process.stdout.write(`gateway start with ${RECORDS} usage records: ${startupMs.toFixed(0)} ms\n`)
}, 120_000)

afterAll(() => h.close())

describe("a large usage file", () => {
  it("loads 200,000 records into the index in a few seconds at most, 46 bytes each to the chunk file and two chunks in memory", async () => {
    const t0 = performance.now()
    const { loaded, rows } = await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(openChunkFile(dirname(file)), (chunkFile) =>
          Effect.promise(async () => {
            const rows = new ChunkedRows({ file: chunkFile })
            return { loaded: await loadRows(file, rows), rows }
          }),
        ),
      ),
    )
    const ms = performance.now() - t0
    process.stdout.write(`usage index load of ${RECORDS} records: ${ms.toFixed(0)} ms\n`)
    expect(loaded).toEqual({ records: RECORDS, skipped: 0, skippedLines: [] })
    const full = Math.floor(RECORDS / ROWS_PER_CHUNK)
    expect(rows.diskBytes()).toBe(full * ROWS_PER_CHUNK * ROW_BYTES)
    // The chunk being filled and one spare, not the 9.2 MB of every record.
    expect(rows.memoryBytes()).toBe(2 * ROWS_PER_CHUNK * ROW_BYTES)
    expect(rows.tables.sessions.names.length - 1).toBe(expected.sessions.size)
    expect(ms).toBeLessThan(10_000)
  })

  it("answers totals and groups over every record without reading the usage file", async () => {
    const t0 = performance.now()
    const all = await adminGet(h.url, "/admin/usage")
    const bySession = await adminGet(h.url, "/admin/usage?group_by=session")
    const oneTenant = await adminGet(h.url, "/admin/usage?tenant=tenant-3&group_by=day")
    process.stdout.write(`three queries over ${RECORDS} records: ${(performance.now() - t0).toFixed(0)} ms\n`)
    expect(all.body).toMatchObject({
      totals: { requests: expected.requests, cost_micro_usd: expected.cost, input_tokens: expected.input },
    })
    const groups = (bySession.body as { groups: Array<{ requests: number }> }).groups
    expect(groups.length).toBe(expected.sessions.size)
    expect(groups.reduce((s, g) => s + g.requests, 0)).toBe(RECORDS)
    const days = (oneTenant.body as { totals: { requests: number }; groups: Array<unknown> }).groups
    expect((oneTenant.body as { totals: { requests: number } }).totals.requests).toBe(
      expected.tenants.get("tenant-3"),
    )
    expect(days.length).toBeGreaterThanOrEqual(39)
  })

  it("answers the overview's series over every record in well under a second, end to end", async () => {
    interface SeriesBody {
      readonly resolution: string
      readonly t: Array<number>
      readonly requests: Array<number>
      readonly errors: Array<number>
      readonly cost_micro_usd: Array<number>
    }
    const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)
    const timed = async (path: string) => {
      const t0 = performance.now()
      const response = await adminGet(h.url, path)
      const ms = performance.now() - t0
      expect(response.status, path).toBe(200)
      process.stdout.write(`${path} over ${RECORDS} records: ${ms.toFixed(1)} ms\n`)
      return { body: response.body as SeriesBody, ms }
    }
    // What the overview asks for: the whole file (by day: it spans 40 days), by hour, and one tenant by minute.
    const byDay = await timed("/admin/usage/series")
    expect(byDay.body.resolution).toBe("day")
    expect(byDay.body.t.length).toBeGreaterThanOrEqual(40)
    expect(sum(byDay.body.requests)).toBe(expected.requests)
    expect(sum(byDay.body.errors)).toBe(expected.errors)
    expect(sum(byDay.body.cost_micro_usd)).toBe(expected.cost)
    const byHour = await timed("/admin/usage/series?resolution=hour")
    expect(byHour.body.t.length).toBeGreaterThanOrEqual(40 * 24)
    expect(sum(byHour.body.requests)).toBe(expected.requests)
    expect(sum(byHour.body.errors)).toBe(expected.errors)
    const untilMs = Date.now()
    const sinceMs = untilMs - 6 * DAY_MS
    const since = encodeURIComponent(new Date(sinceMs).toISOString())
    const until = encodeURIComponent(new Date(untilMs).toISOString())
    const byMinute = await timed(
      `/admin/usage/series?tenant=tenant-3&resolution=minute&since=${since}&until=${until}`,
    )
    expect(byMinute.body.t.length).toBe(Math.ceil(untilMs / 60_000) - Math.floor(sinceMs / 60_000))
    const totals = (await adminGet(h.url, `/admin/usage?tenant=tenant-3&since=${since}&until=${until}`))
      .body as {
      totals: { requests: number; cost_micro_usd: number }
    }
    expect(totals.totals.requests).toBeGreaterThan(1000)
    expect(sum(byMinute.body.requests)).toBe(totals.totals.requests)
    expect(sum(byMinute.body.cost_micro_usd)).toBe(totals.totals.cost_micro_usd)
    const overviewMs = byDay.ms + byHour.ms + byMinute.ms
    process.stdout.write(`the three series over ${RECORDS} records: ${overviewMs.toFixed(1)} ms\n`)
    for (const one of [byDay, byHour, byMinute]) expect(one.ms).toBeLessThan(1_000)
    expect(overviewMs).toBeLessThan(1_000)
  })
})
