#!/usr/bin/env node
/**
 * The usage database, measured (ADR 0069): how fast one copy's writer sends
 * a backlog of records from its usage file to PostgreSQL (records/s), and
 * how long `/admin/usage` takes grouped by tenant and by day over a month
 * of 1 and 10 million rows.
 *
 *   npm run build && node bench/usage-db.mjs [--backlog 200000] [--rows 1000000,10000000]
 *
 * Starts its own PostgreSQL (Debian's package: initdb + postgres in a temp
 * folder, as the `postgres` user when run as root) and `bin/tollgate serve`;
 * removes both at the end. Prints one JSON object per measurement.
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { startPostgres } from "./lib/postgres.mjs"

const { values } = parseArgs({
  options: {
    backlog: { type: "string", default: "200000" },
    rows: { type: "string", default: "1000000,10000000" },
  },
})
const BACKLOG = Number(values.backlog)
const ROWS = values.rows.split(",").map(Number)
const ROOT = resolve(import.meta.dirname, "..")
const TOLLGATE = join(ROOT, "bin/tollgate")
const root = mkdtempSync(join(tmpdir(), "tollgate-bench-usagedb-"))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const children = []
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL")
  rmSync(root, { recursive: true, force: true })
})

const pg = await startPostgres(root)
process.on("exit", () => pg.child.kill("SIGKILL"))
const url = pg.url
const psql = (sql) => pg.psql(sql)

// A month of synthetic records (50 tenants, 4 keys each, 3 routes, 2 models), the file a copy would have written.
const monthStart = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)
const record = (i) => {
  const tenant = `t${i % 50}`
  return {
    ts: new Date(monthStart + (i % 2_000_000) * 1000).toISOString(),
    request_id: `bench-${i}`,
    tenant,
    key_id: `k${i % 4}`,
    route: `r${i % 3}`,
    endpoint: "/v1/messages",
    stream: i % 10 === 0,
    provider: "anthropic",
    model: i % 2 === 0 ? "claude-sonnet-5-5" : "claude-haiku-5",
    attempts: 1,
    status: i % 50 === 0 ? 529 : 200,
    input_tokens: 100 + (i % 900),
    output_tokens: 10 + (i % 400),
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    reserved_micro_usd: 50_000,
    cost_micro_usd: 300 + (i % 5000),
    usage_estimated: false,
    incomplete: false,
    session: `d-${(i % 997).toString(16).padStart(24, "0")}`,
    duration_ms: 200 + (i % 3000),
    error: null,
    upstream_endpoint: "/v1/messages",
    trace_id: null,
    budget: null,
  }
}
const dir = join(root, "gw")
execFileSync("mkdir", ["-p", dir])
const lines = []
for (let i = 0; i < BACKLOG; i++) lines.push(JSON.stringify(record(i)))
writeFileSync(join(dir, "usage.jsonl"), lines.length === 0 ? "" : lines.join("\n") + "\n")
writeFileSync(join(dir, "pricing.yaml"), "prices:\n  - { model: claude-sonnet-5-5, input: 3, output: 10 }\n")
writeFileSync(
  join(dir, "tollgate.yaml"),
  [
    "server: { listen: 127.0.0.1:0 }",
    "admin: { token_env: BENCH_ADMIN }",
    "usage: { file: usage.jsonl, database: { url_env: BENCH_DB } }",
    "pricing: { file: pricing.yaml }",
    "providers: { a: { kind: anthropic, base_url: 'http://127.0.0.1:9', api_key_env: BENCH_KEY } }",
    "routes: { r0: { api: anthropic, targets: [{ provider: a, model: claude-sonnet-5-5 }] } }",
    `tenants: { t0: { keys: [{ id: k0, sha256: ${"a".repeat(64)} }], routes: "*" } }`,
  ].join("\n"),
)
const env = { ...process.env, BENCH_DB: url, BENCH_ADMIN: "bench-admin", BENCH_KEY: "sk" }
execFileSync(process.execPath, [TOLLGATE, "usage", "migrate", "--config", join(dir, "tollgate.yaml")], {
  env,
})

const started = performance.now()
const gateway = spawn(process.execPath, [TOLLGATE, "serve", "--config", join(dir, "tollgate.yaml")], {
  env,
  stdio: ["ignore", "pipe", "inherit"],
})
children.push(gateway)
const gatewayUrl = await new Promise((done) => {
  let out = ""
  gateway.stdout.on("data", (c) => {
    out += c
    const m = /listening on (\S+)/.exec(out)
    if (m) done(m[1])
  })
})
const pending = async () => {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text()
  return Number(/^tollgate_usage_db_pending_records (\S+)/m.exec(text)?.[1])
}
while ((await pending()) > 0) await sleep(50)
const seconds = (performance.now() - started) / 1000
console.log(
  JSON.stringify({
    measure: "writer backlog",
    records: BACKLOG,
    seconds: +seconds.toFixed(2),
    records_per_s: Math.round(BACKLOG / seconds),
    rows: Number(psql("SELECT count(*) FROM tollgate_usage")),
  }),
)

const time = async (path) => {
  const runs = []
  for (let i = 0; i < 3; i++) {
    const t = performance.now()
    // A fresh connection each time: after a long fill the server has closed an idle keep-alive one.
    const r = await fetch(`${gatewayUrl}${path}`, {
      headers: { authorization: "Bearer bench-admin", connection: "close" },
    })
    await r.json()
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`)
    runs.push(performance.now() - t)
  }
  return runs.sort((a, b) => a - b)[1]
}
const since = encodeURIComponent(new Date(monthStart).toISOString())
for (const target of ROWS) {
  const have = Number(psql("SELECT count(*) FROM tollgate_usage"))
  if (target > have) {
    const t = performance.now()
    // Rows as the writer writes them (the same columns and spread over the month), in steps of 1M.
    for (let from = have; from < target; from += 1_000_000) {
      const to = Math.min(target, from + 1_000_000)
      // As the writer does: the rows and their hourly totals in one statement (src/usagedb/table.ts).
      psql(
        `WITH new AS (INSERT INTO tollgate_usage SELECT to_timestamp(${monthStart / 1000} + (i % 2000000)), 'fill-' || i, 't' || (i % 50), 'k' || (i % 4), 'r' || (i % 3), '/v1/messages', i % 10 = 0, 'anthropic', CASE WHEN i % 2 = 0 THEN 'claude-sonnet-5-5' ELSE 'claude-haiku-5' END, 1, CASE WHEN i % 50 = 0 THEN 529 ELSE 200 END, 100 + i % 900, 10 + i % 400, 0, 0, 50000, 300 + i % 5000, false, false, 'd-' || lpad(to_hex(i % 997), 24, '0'), 200 + i % 3000, NULL, '/v1/messages', NULL, NULL FROM generate_series(${from}, ${to - 1}) AS i RETURNING *) ` +
          `INSERT INTO tollgate_usage_hourly SELECT date_bin('1 hour', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00'), tenant, key_id, route, coalesce(provider, ''), coalesce(model, ''), count(*), count(*) FILTER (WHERE status < 200 OR status > 299), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(cost_micro_usd) FROM new GROUP BY 1, 2, 3, 4, 5, 6 ` +
          `ON CONFLICT (hour, tenant, key_id, route, provider, model) DO UPDATE SET requests = tollgate_usage_hourly.requests + excluded.requests, errors = tollgate_usage_hourly.errors + excluded.errors, input_tokens = tollgate_usage_hourly.input_tokens + excluded.input_tokens, output_tokens = tollgate_usage_hourly.output_tokens + excluded.output_tokens, cache_read_tokens = tollgate_usage_hourly.cache_read_tokens + excluded.cache_read_tokens, cache_write_tokens = tollgate_usage_hourly.cache_write_tokens + excluded.cache_write_tokens, cost_micro_usd = tollgate_usage_hourly.cost_micro_usd + excluded.cost_micro_usd`,
      )
    }
    psql("VACUUM ANALYZE tollgate_usage")
    psql("VACUUM ANALYZE tollgate_usage_hourly")
    console.error(`filled to ${target} rows in ${((performance.now() - t) / 1000).toFixed(0)} s`)
  }
  const size = psql(
    "SELECT pg_size_pretty(pg_total_relation_size('tollgate_usage')) || ' + ' || pg_size_pretty(pg_total_relation_size('tollgate_usage_hourly')) || ' hourly'",
  )
  const measures = {
    month_by_tenant: await time(`/admin/usage?since=${since}&group_by=tenant`),
    month_by_day: await time(`/admin/usage?since=${since}&group_by=day`),
    month_one_tenant_by_day: await time(`/admin/usage?since=${since}&tenant=t7&group_by=day`),
    month_one_tenant_by_model: await time(`/admin/usage?since=${since}&tenant=t7&group_by=model`),
    // Not on whole hours: the ends come from the records.
    week_from_a_minute_by_tenant: await time(
      `/admin/usage?since=${encodeURIComponent(new Date(monthStart + 86_400_000 + 17 * 60_000 + 5_000).toISOString())}&until=${encodeURIComponent(new Date(monthStart + 8 * 86_400_000 + 33 * 60_000).toISOString())}&group_by=tenant`,
    ),
    month_by_session_one_tenant: await time(`/admin/usage?since=${since}&tenant=t7&group_by=session`),
    series_month_hourly: await time(
      `/admin/usage/series?since=${since}&until=${encodeURIComponent(new Date(monthStart + 30 * 86_400_000).toISOString())}&resolution=hour`,
    ),
  }
  console.log(
    JSON.stringify({
      measure: "admin usage query (median of 3, ms)",
      rows: target,
      table_size: size,
      ...Object.fromEntries(Object.entries(measures).map(([k, v]) => [k, +v.toFixed(1)])),
    }),
  )
}
gateway.kill("SIGTERM")
await new Promise((r) => gateway.once("exit", r))
