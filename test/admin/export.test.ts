import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { UsageRecord } from "../../src/meter/record.js"
import { startHarness, type Harness } from "../support/harness.js"
import {
  ADMIN_ENV,
  ADMIN_TOKEN,
  adminConfig,
  adminGet,
  groupRecords,
  sumRecords,
  usageRecord,
  writeUsageFile,
} from "./fixtures.js"

/**
 * `/admin/usage/series` and `/admin/usage?format=csv` on a real gateway: a usage file written
 * before start (fixed past minutes, hostile session and tenant names, failed statuses) plus live
 * requests; the series and the CSV agree with `/admin/usage` and with a scan of the file.
 */

const MINUTE = 60_000
const HOUR = 3_600_000
// An hour-aligned start two days back: the seeded records sit at known minutes after it.
const T0 = Math.floor((Date.now() - 2 * 86_400_000) / HOUR) * HOUR
const iso = (ms: number) => new Date(ms).toISOString()
const q = (ms: number) => encodeURIComponent(iso(ms))

const HOSTILE = [
  '=HYPERLINK("http://evil.example","x")',
  "+1+2",
  "-3",
  "@SUM(A1)",
  "\tleading tab",
  "\rleading CR",
  "comma,inside",
  'quote"inside',
  "line\nbreak",
  "'already quoted",
  " =space first",
  "ünïcödé-😀",
]

const seeded: Array<UsageRecord> = [
  usageRecord({ ts: iso(T0), cost_micro_usd: 100, input_tokens: 1, output_tokens: 2 }),
  usageRecord({ ts: iso(T0 + MINUTE - 1), cost_micro_usd: 200, status: 502, error: "api_error" }),
  usageRecord({ ts: iso(T0 + MINUTE), cost_micro_usd: 400, status: 429, error: "rate_limit_error" }),
  usageRecord({ ts: iso(T0 + 3 * MINUTE + 500), cost_micro_usd: 800, tenant: "globex", status: 402 }),
  usageRecord({ ts: iso(T0 + HOUR + 7), cost_micro_usd: 1600, tenant: "=evil,tenant", status: 499 }),
  ...HOSTILE.map((session, i) =>
    usageRecord({ ts: iso(T0 + 2 * HOUR + i), session, cost_micro_usd: 10 + i, input_tokens: 5 + i }),
  ),
]

let h: Harness

const send = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const response = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ max_tokens: 12, messages: [{ role: "user", content: "hello" }], ...body }),
  })
  await response.text()
  return response.status
}

beforeAll(async () => {
  h = await startHarness({
    env: { [ADMIN_ENV]: ADMIN_TOKEN },
    config: (urls, keyHash, dir) => {
      writeUsageFile(join(dir, "usage.jsonl"), seeded)
      return adminConfig()(urls, keyHash, dir)
    },
  })
  expect(await send({ model: "claude" }, { "x-tollgate-session": '=1+2,"x"' })).toBe(200)
  expect(await send({ model: "claude" })).toBe(200)
})

afterAll(() => h.close())

interface SeriesBody {
  readonly tenant: string | null
  readonly since: string
  readonly until: string
  readonly resolution: string
  readonly t: Array<number>
  readonly requests: Array<number>
  readonly errors: Array<number>
  readonly cost_micro_usd: Array<number>
  readonly input_tokens: Array<number>
  readonly output_tokens: Array<number>
}

const seriesOf = async (query: string): Promise<SeriesBody> => {
  const response = await adminGet(h.url, `/admin/usage/series?${query}`)
  expect(response.status, query).toBe(200)
  expect(response.headers.get("cache-control")).toBe("no-store")
  return response.body as SeriesBody
}

const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)
const isError = (r: UsageRecord) => r.status < 200 || r.status > 299

describe("GET /admin/usage/series", () => {
  it("answers minute buckets of a range exactly, empty minutes as zeros, in the documented shape", async () => {
    const body = await seriesOf(`since=${q(T0)}&until=${q(T0 + 5 * MINUTE)}&resolution=minute`)
    expect(body).toEqual({
      tenant: null,
      since: iso(T0),
      until: iso(T0 + 5 * MINUTE),
      resolution: "minute",
      t: [0, 1, 2, 3, 4].map((m) => (T0 + m * MINUTE) / 1000),
      requests: [2, 1, 0, 1, 0],
      errors: [1, 1, 0, 1, 0],
      cost_micro_usd: [300, 400, 0, 800, 0],
      input_tokens: [11, 10, 0, 10, 0],
      output_tokens: [7, 5, 0, 5, 0],
    })
    const acme = await seriesOf(`tenant=acme&since=${q(T0)}&until=${q(T0 + 5 * MINUTE)}&resolution=minute`)
    expect([acme.tenant, acme.requests, acme.errors]).toEqual(["acme", [2, 1, 0, 0, 0], [1, 1, 0, 0, 0]])
  })

  it("defaults to the first record to now at hour resolution, and sums to /admin/usage over the same range", async () => {
    const body = await seriesOf("")
    const records = h.records()
    expect(body.since).toBe(iso(T0))
    expect(body.resolution).toBe("hour")
    expect(body.t[0]).toBe(T0 / 1000)
    expect(body.t.length).toBe(Math.ceil(Date.parse(body.until) / HOUR) - T0 / HOUR)
    expect(body.t.every((t, i) => i === 0 || t - body.t[i - 1]! === 3600)).toBe(true)
    const usage = await adminGet(h.url, `/admin/usage?since=${q(T0)}&until=${encodeURIComponent(body.until)}`)
    const totals = (usage.body as { totals: ReturnType<typeof sumRecords> }).totals
    expect(totals).toEqual(sumRecords(records))
    expect(sum(body.requests)).toBe(totals.requests)
    expect(sum(body.cost_micro_usd)).toBe(totals.cost_micro_usd)
    expect(sum(body.input_tokens)).toBe(totals.input_tokens)
    expect(sum(body.output_tokens)).toBe(totals.output_tokens)
    expect(sum(body.errors)).toBe(records.filter(isError).length)
    for (const [tenant, count] of [
      ["globex", 1],
      ["=evil,tenant", 1],
      ["nobody", 0],
    ] as const) {
      const one = await seriesOf(`tenant=${encodeURIComponent(tenant)}&since=${q(T0)}&resolution=day`)
      expect([one.tenant, sum(one.requests), sum(one.errors)]).toEqual([tenant, count, count])
    }
  })

  it("shows a new request, and a refused one as an error, in the bucket of its ts at once", async () => {
    const since = Date.now() - HOUR
    const before = await seriesOf(`since=${q(since)}&resolution=minute`)
    const count = h.records().length
    expect(await send({ model: "claude" })).toBe(200)
    expect(await send({ model: "no-such-route" })).toBe(404)
    const after = await seriesOf(
      `since=${q(since)}&until=${encodeURIComponent(iso(Date.now() + 1))}&resolution=minute`,
    )
    const added = h.records().slice(count)
    expect(added.map((r) => r.status)).toEqual([200, 404])
    expect(sum(after.requests) - sum(before.requests)).toBe(2)
    expect(sum(after.errors) - sum(before.errors)).toBe(1)
    for (const record of added) {
      const bucket = after.t.indexOf(Math.floor(Date.parse(record.ts) / MINUTE) * 60)
      expect(bucket).toBeGreaterThanOrEqual(0)
      expect(after.requests[bucket]).toBeGreaterThanOrEqual(1)
    }
    expect(sum(after.requests)).toBe(h.records().filter((r) => Date.parse(r.ts) >= since).length)
  })

  it("answers 400 naming the parameter for bad, unknown and repeated parameters and past 10,000 buckets", async () => {
    for (const [query, param] of [
      ["resolution=week", "resolution"],
      ["since=tomorrow", "since"],
      ["until=2026-12-02T10:00:00", "until"],
      ["since=2026-12-02&until=2026-12-01", "since"],
      ["group_by=day", "group_by"],
      ["tenant=a&tenant=b", "tenant"],
      [`since=${q(T0)}&until=${q(T0 + 10_000 * MINUTE + 1)}&resolution=minute`, "resolution"],
      // From 9 days back to now, by default: 12,960 minutes.
      [`since=${q(T0 - 7 * 86_400_000)}&resolution=minute`, "resolution"],
    ] as const) {
      const response = await adminGet(h.url, `/admin/usage/series?${query}`)
      expect(response.status, query).toBe(400)
      expect(response.body, query).toMatchObject({ error: { type: "invalid_request_error", param } })
    }
    const cap = await adminGet(
      h.url,
      `/admin/usage/series?since=${q(T0)}&until=${q(T0 + 10_000 * MINUTE)}&resolution=minute`,
    )
    expect((cap.body as SeriesBody).t.length).toBe(10_000)
  })

  it("needs the admin token", async () => {
    const response = await adminGet(h.url, "/admin/usage/series", null)
    expect(response.status).toBe(401)
  })
})

/** RFC 4180 parsing: quoted fields may hold commas, doubled quotes and line breaks; rows end in CRLF. */
const parseCsv = (text: string): Array<Array<string>> => {
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let i = 0
  while (i < text.length) {
    const c = text[i]!
    if (c === '"' && field === "") {
      i++
      while (true) {
        const d = text[i]!
        if (d === '"' && text[i + 1] === '"') {
          field += '"'
          i += 2
        } else if (d === '"') {
          i++
          break
        } else {
          field += d
          i++
        }
      }
    } else if (c === ",") {
      row.push(field)
      field = ""
      i++
    } else if (c === "\r" && text[i + 1] === "\n") {
      row.push(field)
      rows.push(row)
      row = []
      field = ""
      i += 2
    } else {
      field += c
      i++
    }
  }
  expect(field).toBe("")
  expect(row).toEqual([])
  return rows
}

const HEADER = [
  "key",
  "requests",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "cost_micro_usd",
  "cache_saved_micro_usd",
  "cache_hit_ratio",
]

/** What a key cell holds: a `'` before a formula start (= + - @ tab CR); null is empty. */
const cellOf = (key: string | null) => (key === null ? "" : /^[=+\-@\t\r]/.test(key) ? `'${key}` : key)

const csv = async (query: string) => {
  const response = await fetch(`${h.url}/admin/usage?${query}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  })
  expect(response.status, query).toBe(200)
  return { text: await response.text(), headers: response.headers }
}

describe("GET /admin/usage?format=csv", () => {
  it("has the same groups as the JSON answer, for every grouping, with exact integers", async () => {
    for (const groupBy of ["model", "provider", "route", "tenant", "key", "day", "session", "target"]) {
      const query = `group_by=${groupBy}&since=${q(T0)}`
      const json = (await adminGet(h.url, `/admin/usage?${query}`)).body as {
        groups: Array<ReturnType<typeof sumRecords> & { key: string | null }>
      }
      const { text } = await csv(`${query}&format=csv`)
      const [header, ...rows] = parseCsv(text)
      expect(header).toEqual(HEADER)
      expect(rows, groupBy).toEqual(
        json.groups.map((g) => [
          cellOf(g.key),
          ...[
            g.requests,
            g.input_tokens,
            g.output_tokens,
            g.cache_read_tokens,
            g.cache_write_tokens,
            g.cost_micro_usd,
            g.cache_saved_micro_usd,
            g.cache_hit_ratio,
          ].map(String),
        ]),
      )
      expect(rows.length).toBe(json.groups.length)
    }
    const bySession = parseCsv((await csv("group_by=session&format=csv")).text).slice(1)
    expect(bySession.map((r) => r[0])).toEqual(
      groupRecords(h.records(), (r) => r.session).map((g) => cellOf(g.key)),
    )
  })

  it("is one totals row with an empty key without group_by, with the CSV headers", async () => {
    const { text, headers } = await csv("format=csv&tenant=acme")
    const totals = sumRecords(h.records().filter((r) => r.tenant === "acme"))
    expect(text).toBe(
      `${HEADER.join(",")}\r\n,${totals.requests},${totals.input_tokens},${totals.output_tokens},` +
        `${totals.cache_read_tokens},${totals.cache_write_tokens},${totals.cost_micro_usd},${totals.cache_saved_micro_usd},${totals.cache_hit_ratio}\r\n`,
    )
    expect(headers.get("content-type")).toBe("text/csv; charset=utf-8")
    expect(headers.get("cache-control")).toBe("no-store")
    expect(headers.get("content-disposition")).toBe('attachment; filename="tollgate-usage-acme-totals.csv"')
    const named = await csv(
      `format=csv&tenant=${encodeURIComponent('=evil,"tenant"/x')}&group_by=day&since=2026-12-01&until=${encodeURIComponent("2026-12-02T10:00:00.250Z")}`,
    )
    expect(named.headers.get("content-disposition")).toBe(
      'attachment; filename="tollgate-usage-_evil__tenant__x-by-day-from-20261201T000000Z-until-20261202T100000.250Z.csv"',
    )
    expect(named.text).toBe(`${HEADER.join(",")}\r\n`)
  })

  it("quotes per RFC 4180 and puts a ' before cells a spreadsheet would run as a formula", async () => {
    const { text } = await csv(
      `format=csv&group_by=session&since=${q(T0 + 2 * HOUR)}&until=${q(T0 + 3 * HOUR)}`,
    )
    const lines = new Map(
      HOSTILE.map((session, i) => [session, `,1,${5 + i},5,0,0,${10 + i},0,0\r\n`] as const),
    )
    const expected = [
      `"'=HYPERLINK(""http://evil.example"",""x"")"`,
      `'+1+2`,
      `'-3`,
      `'@SUM(A1)`,
      `'\tleading tab`,
      `"'\rleading CR"`,
      `"comma,inside"`,
      `"quote""inside"`,
      `"line\nbreak"`,
      `'already quoted`,
      ` =space first`,
      `ünïcödé-😀`,
    ]
    HOSTILE.forEach((session, i) => {
      expect(text, JSON.stringify(session)).toContain(`\r\n${expected[i]}${lines.get(session)}`)
    })
    const keys = await csv("format=csv&group_by=key")
    expect(keys.text).toContain(`\r\n"'=evil,tenant/ci",1,10,5,0,0,1600,0,0\r\n`)
    const live = await csv("format=csv&group_by=session&tenant=acme")
    expect(live.text).toContain(`\r\n"'=1+2,""x""",1,`)
  })

  it("answers 400 for an unknown format, in JSON", async () => {
    const response = await adminGet(h.url, "/admin/usage?format=xlsx")
    expect(response.status).toBe(400)
    expect(response.body).toMatchObject({ error: { type: "invalid_request_error", param: "format" } })
  })
})
