import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { encodeRecord, type UsageRecord } from "../../src/meter/record.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminGet, groupRecords, sumRecords, usageRecord } from "../admin/fixtures.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startPostgres, type PostgresHandle } from "../support/postgres.js"
import { tempDir } from "../support/tempDirs.js"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { generateKey } from "../../src/keys/keys.js"
import { DB_ENV, migratedDatabase } from "./fixtures.js"

/**
 * The usage database on a real PostgreSQL, with in-process gateways: every
 * record of each copy's file reaches the table exactly once with every
 * field, `/admin/usage` on any copy answers for all of them, and a database
 * that is stopped (or killed) while requests come fails none of them.
 */

let pg: PostgresHandle
let fake: FakeProviderHandle
const key = generateKey()
const open: Array<Harness> = []

beforeAll(async () => {
  pg = await startPostgres()
  fake = await startFakeProvider({})
}, 60_000)

afterAll(async () => {
  for (const h of open.splice(0)) await h.close()
  await fake?.close()
  await pg?.stop()
})

const migrated = (name: string): Promise<string> => migratedDatabase(pg, name, fake.url)

/** A copy of the gateway writing `dir/usage.jsonl` and the database at `url`; tenants acme (key ci) and beta (key b1). */
const copy = async (url: string, dir = tempDir("tollgate-usagedb-copy-")): Promise<Harness> => {
  const h = await startHarness({
    sharedFakes: [fake],
    key,
    dir,
    // Failed requests (the fake's 500s) log at warn: keep the test output to errors.
    logLevel: "Error",
    env: { [ADMIN_ENV]: ADMIN_TOKEN, [DB_ENV]: url },
    config: (urls, keyHash, d) => ({
      server: { listen: "127.0.0.1:0" },
      admin: { token_env: ADMIN_ENV },
      usage: { file: join(d, "usage.jsonl"), database: { url_env: DB_ENV } },
      providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
      routes: {
        claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        sonnet: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
      },
      tenants: {
        acme: {
          keys: [
            { id: "ci", sha256: keyHash },
            { id: "ci2", sha256: "1".repeat(64) },
          ],
          routes: "*",
        },
      },
    }),
  })
  open.push(h)
  return h
}

const close = async (h: Harness) => {
  open.splice(open.indexOf(h), 1)
  await h.close()
}

/** Request `i`: every 10th a stream, every 7th upstream failing, every 5th on route sonnet, sessions of 3. */
const send = async (h: Harness, i: number): Promise<number> => {
  const stream = i % 10 === 0
  const response = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-api-key": h.key,
      "x-tollgate-session": `s-${i % 3}`,
      ...(i % 7 === 0 ? { "x-fake-scenario": "status:500" } : {}),
    },
    body: JSON.stringify({
      model: i % 5 === 0 ? "sonnet" : "claude",
      max_tokens: 4 + (i % 9),
      stream,
      messages: [{ role: "user", content: `hello number ${i} ${"word ".repeat(i % 13)}` }],
    }),
  })
  await response.arrayBuffer()
  return response.status
}

const fileRecords = (h: Harness): Array<UsageRecord> =>
  readFileSync(h.config.usageFile, "utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as UsageRecord)

/** Every row of the table, as usage records (the ts as the file writes it). */
const tableRows = (database: string): Array<UsageRecord> => {
  const text = pg.psql(
    `SELECT coalesce(json_agg(row_to_json(t) ORDER BY request_id), '[]') FROM (SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ts, request_id, tenant, key_id, route, endpoint, stream, provider, model, attempts, status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reserved_micro_usd, cost_micro_usd, usage_estimated, incomplete, session, duration_ms, error, upstream_endpoint, trace_id, budget, cache_saved_micro_usd, moved_from, moved_reason FROM tollgate_usage) t`,
    database,
  )
  return JSON.parse(text) as Array<UsageRecord>
}

const byId = (a: UsageRecord, b: UsageRecord) =>
  a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0

const count = (database: string) => Number(pg.psql("SELECT count(*) FROM tollgate_usage", database))

const metric = async (h: Harness, name: string): Promise<number> => {
  const text = await (await fetch(`${h.url}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith(`${name} `))
  return line === undefined ? Number.NaN : Number(line.split(" ")[1])
}

describe("usage.database", () => {
  it("two copies: the table holds each file's records once, every field equal; /admin/usage on either copy is the sum of both files", async () => {
    const url = await migrated("two_copies")
    const a = await copy(url)
    const b = await copy(url)
    const statuses = await Promise.all(Array.from({ length: 120 }, (_, i) => send(i % 2 === 0 ? a : b, i)))
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(90)
    const records = [...fileRecords(a), ...fileRecords(b)]
    expect(records).toHaveLength(120)
    await eventually(() => count("two_copies") === 120, 15_000)
    expect(tableRows("two_copies")).toEqual([...records].sort(byId))
    expect(await metric(a, "tollgate_usage_db_pending_records")).toBe(0)

    for (const h of [a, b]) {
      const totals = await adminGet(h.url, "/admin/usage")
      expect(totals.status).toBe(200)
      expect(totals.headers.get("x-tollgate-usage-source")).toBe("database")
      expect((totals.body as { totals: unknown }).totals).toEqual(sumRecords(records))
      const groupings: Record<string, (r: UsageRecord) => string | null> = {
        tenant: (r) => r.tenant,
        route: (r) => r.route,
        key: (r) => `${r.tenant}/${r.key_id}`,
        model: (r) => r.model,
        provider: (r) => r.provider,
        session: (r) => r.session,
        day: (r) => r.ts.slice(0, 10),
      }
      for (const [groupBy, keyOf] of Object.entries(groupings)) {
        const grouped = await adminGet(h.url, `/admin/usage?group_by=${groupBy}&tenant=acme`)
        expect((grouped.body as { groups: unknown }).groups, groupBy).toEqual(groupRecords(records, keyOf))
      }
    }
    // A time range: only the records inside it.
    const sorted = [...records].sort((x, y) => (x.ts < y.ts ? -1 : x.ts > y.ts ? 1 : 0))
    const since = sorted[30]!.ts
    const until = sorted[90]!.ts
    const inRange = records.filter((r) => r.ts >= since && r.ts < until)
    const ranged = await adminGet(b.url, `/admin/usage?since=${since}&until=${until}`)
    expect((ranged.body as { totals: unknown }).totals).toEqual(sumRecords(inRange))
    // The series sums to the same totals, bucket by bucket from the records' minutes.
    const series = await adminGet(a.url, `/admin/usage/series?tenant=acme&resolution=minute`)
    const body = series.body as {
      requests: Array<number>
      errors: Array<number>
      cost_micro_usd: Array<number>
      t: Array<number>
    }
    expect(body.requests.reduce((s, n) => s + n, 0)).toBe(120)
    expect(body.errors.reduce((s, n) => s + n, 0)).toBe(
      records.filter((r) => r.status < 200 || r.status > 299).length,
    )
    expect(body.cost_micro_usd.reduce((s, n) => s + n, 0)).toBe(sumRecords(records).cost_micro_usd)
    const firstMinute = Math.floor(Date.parse(sorted[0]!.ts) / 60_000) * 60
    expect(body.t[0]).toBe(firstMinute)
    // The CSV of the fleet.
    const csv = await fetch(`${a.url}/admin/usage?format=csv&group_by=tenant`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    })
    expect(csv.status).toBe(200)
    expect(await csv.text()).toContain(`acme,120,`)
  }, 60_000)

  it("a database stopped, then killed, while requests come: every request served, the backlog counted, then the table equals the file with no duplicate", async () => {
    const url = await migrated("outage")
    const h = await copy(url)
    for (let i = 0; i < 20; i++) expect(await send(h, i + 1)).not.toBe(0)
    await eventually(() => count("outage") === 20, 15_000)

    await pg.stop()
    const during = await Promise.all(Array.from({ length: 60 }, (_, i) => send(h, i + 101)))
    expect(during.every((s) => s === 200 || s === 500)).toBe(true)
    const ready = await fetch(`${h.url}/readyz`)
    expect(ready.status).toBe(200)
    await eventually(async () => (await metric(h, "tollgate_usage_db_pending_records")) === 60, 10_000)
    await eventually(async () => (await metric(h, "tollgate_usage_db_errors_total")) >= 1, 10_000)
    // /admin/usage says the database does not answer, in the admin API's format.
    const down = await adminGet(h.url, "/admin/usage")
    expect(down.status).toBe(503)
    expect((down.body as { error: { type: string } }).error.type).toBe("api_error")
    await pg.start()
    await eventually(() => count("outage") === 80, 20_000)

    // Killed with -9 in the middle of requests.
    const load = Promise.all(Array.from({ length: 60 }, (_, i) => send(h, i + 201)))
    await pg.stop("kill")
    expect((await load).every((s) => s === 200 || s === 500)).toBe(true)
    await pg.start()
    await eventually(() => count("outage") === 140, 20_000)
    await eventually(async () => (await metric(h, "tollgate_usage_db_pending_records")) === 0, 10_000)
    expect(tableRows("outage")).toEqual(fileRecords(h).sort(byId))
    // The hourly totals counted each record once, through the outage and the kill.
    expect(
      pg.psql("SELECT sum(requests) || ',' || sum(cost_micro_usd) FROM tollgate_usage_hourly", "outage"),
    ).toBe(pg.psql("SELECT count(*) || ',' || sum(cost_micro_usd) FROM tollgate_usage", "outage"))
  }, 90_000)

  it("a copy stopped while the database is down sends the records it had not confirmed when it starts again, none twice", async () => {
    const url = await migrated("restart")
    const dir = tempDir("tollgate-usagedb-restart-")
    const first = await copy(url, dir)
    for (let i = 0; i < 15; i++) await send(first, i)
    await eventually(() => count("restart") === 15, 15_000)
    await pg.stop()
    for (let i = 15; i < 40; i++) await send(first, i)
    await close(first)
    await pg.start()
    expect(count("restart")).toBe(15)
    const second = await copy(url, dir)
    await eventually(() => count("restart") === 40, 15_000)
    for (let i = 40; i < 50; i++) await send(second, i)
    await eventually(() => count("restart") === 50, 15_000)
    expect(tableRows("restart")).toEqual(fileRecords(second).sort(byId))
    // The checkpoint beside the file: a third start sends nothing again (and the key would drop repeats).
    await close(second)
    const third = await copy(url, dir)
    expect(await metric(third, "tollgate_usage_db_pending_records")).toBe(0)
    expect(count("restart")).toBe(50)
  }, 90_000)

  it("lines of the usage file the table cannot hold (torn, not JSON, not a record, NUL, a fraction, a lone surrogate, a time out of range) are skipped, every record around them sent", async () => {
    const url = await migrated("bad_lines")
    const dir = tempDir("tollgate-usagedb-badlines-")
    const at = (i: number) => new Date(Date.now() - 60_000 + i * 1000).toISOString()
    const good = Array.from({ length: 6 }, (_, i) => usageRecord({ ts: at(i), request_id: `good-${i}` }))
    const line = (r: UsageRecord) => encodeRecord(r).trimEnd()
    const bad = [
      // A crash tore a record; the next one was appended on the same line.
      line(usageRecord({ ts: at(10), request_id: "torn" })).slice(0, 80) +
        line(usageRecord({ ts: at(11), request_id: "after-torn" })),
      "not json at all",
      "[1, 2, 3]",
      line(usageRecord({ ts: at(12), request_id: "no-id" })).replace(
        '"request_id":"no-id"',
        '"request_id":null',
      ),
      line(usageRecord({ ts: at(13), request_id: "nul", tenant: "ac\u0000me" })),
      line(usageRecord({ ts: at(14), request_id: "fraction" })).replace(
        '"cost_micro_usd":80',
        '"cost_micro_usd":80.5',
      ),
      line(usageRecord({ ts: "yesterday", request_id: "no-time" })),
      line(usageRecord({ ts: at(15), request_id: "surrogate", tenant: "x\ud800" })),
      // Passes the gateway's own check, refused by PostgreSQL (a time JavaScript reads): found by sending one at a time.
      line(usageRecord({ ts: "+275760-09-13T00:00:00.000Z", request_id: "far-future" })),
    ]
    const lines = [
      line(good[0]!),
      bad[0],
      line(good[1]!),
      bad[1],
      bad[2],
      line(good[2]!),
      bad[3],
      bad[4],
      line(good[3]!),
      bad[5],
      bad[6],
      line(good[4]!),
      "",
      bad[7],
      bad[8],
      line(good[5]!),
    ]
    writeFileSync(join(dir, "usage.jsonl"), `${lines.join("\n")}\n`)
    const h = await copy(url, dir)
    await eventually(async () => (await metric(h, "tollgate_usage_db_pending_records")) === 0, 15_000)
    expect(
      pg.psql("SELECT string_agg(request_id, ',' ORDER BY request_id) FROM tollgate_usage", "bad_lines"),
    ).toBe(good.map((r) => r.request_id).join(","))
    // The gateway's own records after them go through the quick path again.
    await send(h, 1)
    await eventually(() => count("bad_lines") === 7, 15_000)
    const last = JSON.parse(
      readFileSync(h.config.usageFile, "utf8").trimEnd().split("\n").at(-1)!,
    ) as UsageRecord
    expect(tableRows("bad_lines")).toEqual([...good, last].sort(byId))
  }, 60_000)
})
