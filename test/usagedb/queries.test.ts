import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { UsageRecord } from "../../src/meter/record.js"
import {
  ADMIN_ENV,
  ADMIN_TOKEN,
  adminGet,
  groupRecords,
  sumRecords,
  usageRecord,
  writeUsageFile,
} from "../admin/fixtures.js"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startPostgres, type PostgresHandle } from "../support/postgres.js"
import { DB_ENV, migratedDatabase } from "./fixtures.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * `/admin/usage` and `/admin/usage/series` over the usage database agree
 * with a plain sum of the records for ranges that start and end inside an
 * hour, on an hour, or are open: whole hours come from the hourly totals,
 * the ends from the records (ADR 0069). The records span three days and
 * reach the table as a backlog of a usage file written before the start.
 */

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const T0 = Math.floor((Date.now() - 3 * 86_400_000) / HOUR) * HOUR

let pg: PostgresHandle
let fake: FakeProviderHandle
let h: Harness
let records: Array<UsageRecord>

beforeAll(async () => {
  pg = await startPostgres()
  fake = await startFakeProvider({})
  const url = await migratedDatabase(pg, "queries", fake.url)
  const dir = tempDir("tollgate-usagedb-queries-")
  // 600 records, one every 7 minutes and 13 s over ~3 days: tenants, keys, routes, models, failures, sessions.
  records = Array.from({ length: 600 }, (_, i) =>
    usageRecord({
      ts: new Date(T0 + i * (7 * MINUTE + 13_000) + (i % 1000)).toISOString(),
      request_id: `q-${i}`,
      tenant: i % 3 === 0 ? "beta" : "acme",
      key_id: `k${i % 2}`,
      route: i % 4 === 0 ? "sonnet" : "claude",
      provider: i % 11 === 0 ? null : "anthropic",
      model: i % 11 === 0 ? null : i % 2 === 0 ? "claude-sonnet-5-5" : "claude-haiku-5",
      status: i % 9 === 0 ? 529 : 200,
      input_tokens: 10 + i,
      output_tokens: i % 17,
      cache_read_tokens: i % 5,
      cache_write_tokens: i % 3,
      cost_micro_usd: 1000 + i * 37,
      session: i % 6 === 0 ? null : `s-${i % 6}`,
    }),
  )
  writeUsageFile(join(dir, "usage.jsonl"), records)
  h = await startHarness({
    sharedFakes: [fake],
    dir,
    logLevel: "Error",
    env: { [ADMIN_ENV]: ADMIN_TOKEN, [DB_ENV]: url },
    config: (urls, keyHash, d) => ({
      server: { listen: "127.0.0.1:0" },
      admin: { token_env: ADMIN_ENV },
      usage: { file: join(d, "usage.jsonl"), database: { url_env: DB_ENV } },
      providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
      routes: {
        claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
      },
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
    }),
  })
  await eventually(() => Number(pg.psql("SELECT count(*) FROM tollgate_usage", "queries")) === 600, 15_000)
}, 60_000)

afterAll(async () => {
  await h?.close()
  await fake?.close()
  await pg?.stop()
})

const iso = (ms: number) => new Date(ms).toISOString()
const ts = (r: UsageRecord) => Date.parse(r.ts)

// Ranges: inside one hour, across hours from and to minutes inside them, on whole hours, open on either side.
const RANGES: ReadonlyArray<readonly [number | undefined, number | undefined]> = [
  [T0 + 5 * MINUTE, T0 + 50 * MINUTE],
  [T0 + 17 * MINUTE, T0 + 5 * HOUR + 3 * MINUTE],
  [T0 + HOUR, T0 + 30 * HOUR],
  [T0 + 90 * MINUTE + 7_000, T0 + 48 * HOUR],
  [undefined, T0 + 20 * HOUR + 59 * MINUTE],
  [T0 + 40 * HOUR + 1, undefined],
  [undefined, undefined],
  [T0 + 70 * HOUR + 1234, T0 + 71 * HOUR + 5678],
]

const GROUPINGS: Record<string, (r: UsageRecord) => string | null> = {
  tenant: (r) => r.tenant,
  route: (r) => r.route,
  key: (r) => `${r.tenant}/${r.key_id}`,
  model: (r) => r.model,
  provider: (r) => r.provider,
  session: (r) => r.session,
  day: (r) => r.ts.slice(0, 10),
  target: (r) => (r.provider === null ? null : `${r.route}/${r.provider}/${r.model ?? ""}`),
}

const rangeQuery = (since: number | undefined, until: number | undefined) =>
  [since === undefined ? "" : `since=${iso(since)}`, until === undefined ? "" : `until=${iso(until)}`]
    .filter((p) => p !== "")
    .join("&")

describe("usage queries over the database", () => {
  it("totals and every grouping equal the records' sums, for every range and with a tenant", async () => {
    for (const [since, until] of RANGES) {
      for (const tenant of [undefined, "beta"]) {
        const inRange = records.filter(
          (r) =>
            (since === undefined || ts(r) >= since) &&
            (until === undefined || ts(r) < until) &&
            (tenant === undefined || r.tenant === tenant),
        )
        const base = [rangeQuery(since, until), tenant === undefined ? "" : `tenant=${tenant}`]
          .filter((p) => p !== "")
          .join("&")
        const totals = await adminGet(h.url, `/admin/usage?${base}`)
        expect((totals.body as { totals: unknown }).totals, base).toEqual(sumRecords(inRange))
        for (const [groupBy, keyOf] of Object.entries(GROUPINGS)) {
          const grouped = await adminGet(h.url, `/admin/usage?${base}&group_by=${groupBy}`)
          expect((grouped.body as { groups: unknown }).groups, `${base} ${groupBy}`).toEqual(
            groupRecords(inRange, keyOf),
          )
        }
      }
    }
  })

  it("series at minute, hour and day resolution count each record in its bucket", async () => {
    const cases: ReadonlyArray<readonly [string, number, number, number]> = [
      ["minute", T0 + 3 * HOUR + 11 * MINUTE + 5_000, T0 + 7 * HOUR + 2 * MINUTE, MINUTE],
      ["hour", T0 + 17 * MINUTE, T0 + 49 * HOUR + 31 * MINUTE, HOUR],
      ["hour", T0 + 2 * HOUR, T0 + 26 * HOUR, HOUR],
      ["day", T0 + 5 * MINUTE, T0 + 3 * 86_400_000, 86_400_000],
    ]
    for (const [resolution, since, until, size] of cases) {
      for (const tenant of [undefined, "acme"]) {
        const query = `${rangeQuery(since, until)}&resolution=${resolution}${tenant === undefined ? "" : `&tenant=${tenant}`}`
        const response = await adminGet(h.url, `/admin/usage/series?${query}`)
        expect(response.status, query).toBe(200)
        const body = response.body as {
          t: Array<number>
          requests: Array<number>
          errors: Array<number>
          cost_micro_usd: Array<number>
          input_tokens: Array<number>
          output_tokens: Array<number>
        }
        const start = Math.floor(since / size) * size
        const expected = body.t.map(() => ({ requests: 0, errors: 0, cost: 0, input: 0, output: 0 }))
        for (const r of records) {
          if (ts(r) < since || ts(r) >= until || (tenant !== undefined && r.tenant !== tenant)) continue
          const bucket = expected[Math.floor((ts(r) - start) / size)]!
          bucket.requests++
          if (r.status < 200 || r.status > 299) bucket.errors++
          bucket.cost += r.cost_micro_usd
          bucket.input += r.input_tokens
          bucket.output += r.output_tokens
        }
        expect(body.t[0], query).toBe(start / 1000)
        expect(body.requests, query).toEqual(expected.map((e) => e.requests))
        expect(body.errors, query).toEqual(expected.map((e) => e.errors))
        expect(body.cost_micro_usd, query).toEqual(expected.map((e) => e.cost))
        expect(body.input_tokens, query).toEqual(expected.map((e) => e.input))
        expect(body.output_tokens, query).toEqual(expected.map((e) => e.output))
      }
    }
  })

  it("the hourly totals hold each record once: their sums equal the table's", () => {
    const fromTable = pg.psql(
      "SELECT count(*) || ',' || sum(cost_micro_usd) || ',' || sum(input_tokens) FROM tollgate_usage",
      "queries",
    )
    const fromHours = pg.psql(
      "SELECT sum(requests) || ',' || sum(cost_micro_usd) || ',' || sum(input_tokens) FROM tollgate_usage_hourly",
      "queries",
    )
    expect(fromHours).toBe(fromTable)
    expect(fromTable.split(",")[0]).toBe("600")
  })
})
