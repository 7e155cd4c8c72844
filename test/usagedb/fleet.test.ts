import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { stringify } from "yaml"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminGet, groupRecords, sumRecords } from "../admin/fixtures.js"
import { eventually } from "../support/harness.js"
import { startPostgres, type PostgresHandle } from "../support/postgres.js"
import { FAKEPROVIDER, startBinary, TOLLGATE, type Running } from "../support/processes.js"
import { startRedis, type RedisHandle } from "../support/redis.js"
import { tempDir } from "../support/tempDirs.js"
import { DB_ENV, migratedDatabase } from "./fixtures.js"

/**
 * A fleet on one Redis and one PostgreSQL (issue #33's acceptance run): three
 * built copies under a steady load of mixed requests — 10 % streams, some cut
 * by the client, some failing over from a provider that is down, some failing
 * — while PostgreSQL is stopped for a while, later killed with -9, and one
 * copy is killed with -9 and started again. No request fails or slows because
 * of the database, `/readyz` stays ready, and at the end the table holds
 * exactly the records of the three files (every field), the hourly totals
 * count each once, and `/admin/usage` on every copy is the sum of the files.
 *
 * In the suite it runs small (2,400 requests, a 4 s outage, p50 within
 * +10 ms). `npm run acceptance:fleet` runs it at the issue's size: 30,000
 * requests at 250/s, PostgreSQL stopped for 60 s, p50 within +1 ms.
 */
const FULL = process.env.TOLLGATE_FLEET === "full"
const REQUESTS = FULL ? 30_000 : 2_400
const RATE = FULL ? 250 : 200
const OUTAGE_MS = FULL ? 60_000 : 4_000
const P50_SLACK_MS = FULL ? 1 : 10
const DURATION_MS = (REQUESTS / RATE) * 1000

const UPSTREAM_ENV = "TG_TEST_FLEET_UPSTREAM_KEY"
const KEYS = [
  { tenant: "acme", id: "k1", secret: generateKey() },
  { tenant: "acme", id: "k2", secret: generateKey() },
  { tenant: "beta", id: "k3", secret: generateKey() },
  { tenant: "gamma", id: "k4", secret: generateKey() },
] as const

let pg: PostgresHandle
let redis: RedisHandle
let fake: Running
let down: Running
const running: Array<Running> = []

beforeAll(async () => {
  ;[pg, redis, fake, down] = await Promise.all([
    startPostgres(),
    startRedis(),
    startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0", "--name", "up"]),
    startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0", "--name", "down", "--scenario", "status:529"]),
  ])
}, 60_000)

afterAll(async () => {
  await Promise.all(running.map((r) => r.stop("SIGKILL")))
  await Promise.all([fake?.stop(), down?.stop()])
  await redis?.stop()
  await pg?.stop()
})

/** The config of copy `n`: its own folder and usage file; the Redis store, the database, and three routes. */
const writeCopyConfig = (dir: string): string => {
  writeFileSync(
    join(dir, "pricing.yaml"),
    stringify({
      prices: [
        { model: "claude-sonnet-5-5", input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
        { model: "gpt-5", input: 1.25, output: 10, cache_read: 0.125, cache_write: 0 },
      ],
    }),
  )
  const tenants: Record<string, { keys: Array<{ id: string; sha256: string }>; routes: string }> = {}
  for (const key of KEYS) {
    tenants[key.tenant] ??= { keys: [], routes: "*" }
    tenants[key.tenant]!.keys.push({ id: key.id, sha256: hashKey(key.secret) })
  }
  const config = join(dir, "tollgate.yaml")
  writeFileSync(
    config,
    stringify({
      server: { listen: "127.0.0.1:0", shutdown_grace: "1s" },
      admin: { token_env: ADMIN_ENV },
      store: { kind: "redis", url: redis.url },
      usage: { file: "usage.jsonl", database: { url_env: DB_ENV } },
      pricing: { file: "pricing.yaml" },
      // Every failover permitted (the default budget refuses some while the down provider's breaker is
      // still closed): this run is about the database, not the retry budget.
      retry: { budget_ratio: 1 },
      providers: {
        up: { kind: "anthropic", base_url: fake.url, api_key_env: UPSTREAM_ENV },
        down: { kind: "anthropic", base_url: down.url, api_key_env: UPSTREAM_ENV },
        openai: { kind: "openai", base_url: fake.url, api_key_env: UPSTREAM_ENV },
      },
      routes: {
        claude: { api: "anthropic", targets: [{ provider: "up", model: "claude-sonnet-5-5" }] },
        failover: {
          api: "anthropic",
          targets: [
            { provider: "down", model: "claude-sonnet-5-5" },
            { provider: "up", model: "claude-sonnet-5-5" },
          ],
        },
        gpt: { api: "openai", targets: [{ provider: "openai", model: "gpt-5" }] },
      },
      tenants,
    }),
  )
  return config
}

interface Copy {
  readonly dir: string
  readonly config: string
  gateway: Running
  up: boolean
}

const ENV = (url: string) => ({ [DB_ENV]: url, [UPSTREAM_ENV]: "sk-fleet", [ADMIN_ENV]: ADMIN_TOKEN })

const startCopy = async (config: string, url: string): Promise<Running> => {
  const gateway = await startBinary(TOLLGATE, ["serve", "--config", config], ENV(url))
  running.push(gateway)
  return gateway
}

/** One request's outcome: its status (0 when the connection died), when it was sent, how long it took. */
interface Outcome {
  readonly i: number
  readonly status: number
  readonly sentAt: number
  readonly ms: number
  readonly phase: string
  readonly toKilledCopy: boolean
}

/**
 * Request `i`: key `i % 4`; every 5th (from 1) on the failover route, every
 * 5th (from 2) an OpenAI chat completion; every 10th a stream, every 30th
 * (a slow one) cut by the client after its first bytes; every 50th (from 7) failing
 * upstream (the fake's 500); sessions of three.
 */
const send = async (url: string, i: number): Promise<number> => {
  const key = KEYS[i % KEYS.length]!
  const stream = i % 10 === 0
  const cut = i % 30 === 0
  const failing = i % 50 === 7
  const openai = i % 5 === 2
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "x-tollgate-session": `s-${i % 3}`,
    // A cut stream comes slowly (30 ms between events), so that the client's cut lands in its middle.
    ...(failing ? { "x-fake-scenario": "status:500" } : cut ? { "x-fake-scenario": "delay:30" } : {}),
    ...(openai ? { authorization: `Bearer ${key.secret}` } : { "x-api-key": key.secret }),
  }
  const messages = [{ role: "user", content: `request ${i} ${"word ".repeat(i % 17)}` }]
  const body = openai
    ? { model: "gpt", max_tokens: 4 + (i % 9), stream, messages }
    : { model: i % 5 === 1 ? "failover" : "claude", max_tokens: 4 + (i % 9), stream, messages }
  const abort = new AbortController()
  try {
    const response = await fetch(`${url}${openai ? "/v1/chat/completions" : "/v1/messages"}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: abort.signal,
    })
    if (cut && response.body !== null) {
      const reader = response.body.getReader()
      await reader.read()
      abort.abort()
      return response.status
    }
    await response.arrayBuffer()
    return response.status
  } catch (error) {
    if (abort.signal.aborted) return 200
    void error
    return 0
  }
}

const fileRecords = (dir: string): Array<UsageRecord> =>
  readFileSync(join(dir, "usage.jsonl"), "utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as UsageRecord)

const tableRows = (database: string): Array<UsageRecord> =>
  JSON.parse(
    pg.psql(
      `SELECT coalesce(json_agg(row_to_json(t) ORDER BY request_id), '[]') FROM (SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ts, request_id, tenant, key_id, route, endpoint, stream, provider, model, attempts, status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reserved_micro_usd, cost_micro_usd, usage_estimated, incomplete, session, duration_ms, error, upstream_endpoint, trace_id, budget, cache_saved_micro_usd, moved_from, moved_reason FROM tollgate_usage) t`,
      database,
    ),
  ) as Array<UsageRecord>

const byId = (a: UsageRecord, b: UsageRecord) =>
  a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0

const metric = async (url: string, name: string): Promise<number> => {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith(`${name} `))
  return line === undefined ? Number.NaN : Number(line.split(" ")[1])
}

const p50 = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

/** CPU time (user + system) of process `pid` so far, in ms (NaN once it is gone). */
const cpuMs = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return Number.NaN
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("a fleet of three copies on one Redis and one PostgreSQL", () => {
  it(
    `${REQUESTS} requests while PostgreSQL is stopped for ${OUTAGE_MS / 1000} s and killed with -9 and a copy is killed with -9: every request served, /readyz ready, then the table equals the three files and /admin/usage on every copy their sum`,
    async () => {
      const database = "fleet"
      const url = await migratedDatabase(pg, database, fake.url)
      const copies: Array<Copy> = []
      for (let n = 0; n < 3; n++) {
        const dir = tempDir(`tollgate-fleet-${n}-`)
        const config = writeCopyConfig(dir)
        copies.push({ dir, config, gateway: await startCopy(config, url), up: true })
      }

      // The timeline, from the first request: the database stopped at 20 % for OUTAGE_MS, killed -9 at
      // 75 % (started again 2 s later), copy 2 killed -9 at 85 % (started again at once).
      const stopAt = DURATION_MS * 0.2
      const killDbAt = Math.max(stopAt + OUTAGE_MS + 2_000, DURATION_MS * 0.75)
      const killCopyAt = Math.max(killDbAt + 2_500, DURATION_MS * 0.85)
      expect(killCopyAt).toBeLessThan(DURATION_MS)
      let phase = "warm-up"
      const t0 = performance.now()
      const events: Array<string> = []
      const note = (what: string) => events.push(`${Math.round(performance.now() - t0)} ms: ${what}`)
      const director = (async () => {
        await sleep(1_000)
        phase = "before"
        await sleep(stopAt - 1_000)
        phase = "stopped"
        note("database stopped")
        await pg.stop()
        await sleep(OUTAGE_MS)
        await pg.start()
        note("database started")
        phase = "after"
        await sleep(killDbAt - (performance.now() - t0))
        phase = "killed"
        note("database killed -9")
        await pg.stop("kill")
        await sleep(2_000)
        await pg.start()
        note("database started")
        phase = "after kill"
        await sleep(killCopyAt - (performance.now() - t0))
        const victim = copies[2]!
        victim.up = false
        note("copy 2 killed -9")
        victim.gateway.child.kill("SIGKILL")
        await victim.gateway.exited
        victim.gateway = await startCopy(victim.config, url)
        victim.up = true
        note("copy 2 started")
      })()

      // /readyz of every copy that is up, four times a second, all along; and each second, the CPU time
      // of every process of the run (for the timeline printed at the end).
      const notReady: Array<string> = []
      let loading = true
      const cpu: Array<Record<string, number>> = []
      const pids = (): Record<string, number> => ({
        copy0: copies[0]!.gateway.child.pid!,
        copy1: copies[1]!.gateway.child.pid!,
        copy2: copies[2]!.gateway.child.pid!,
        fake: fake.child.pid!,
        self: process.pid,
      })
      let lastCpuAt = 0
      const poller = (async () => {
        while (loading) {
          if (performance.now() - lastCpuAt >= 1000) {
            lastCpuAt = performance.now()
            const sample: Record<string, number> = { t: Math.round(lastCpuAt - t0) }
            for (const [name, pid] of Object.entries(pids())) {
              sample[name] = cpuMs(pid)
              sample[`${name}_pid`] = pid
            }
            cpu.push(sample)
          }
          await Promise.all(
            copies.map(async (copy, n) => {
              if (!copy.up) return
              const gateway = copy.gateway
              try {
                const response = await fetch(`${gateway.url}/readyz`)
                const body = await response.text()
                if (response.status !== 200 && copy.up && gateway === copy.gateway)
                  notReady.push(`copy ${n}: ${response.status} ${body}`)
              } catch (error) {
                if (copy.up && gateway === copy.gateway) notReady.push(`copy ${n}: ${String(error)}`)
              }
            }),
          )
          await sleep(250)
        }
      })()

      // The load: request i sent at t0 + i / RATE (open loop), to the copies in turn (the ones up).
      const outcomes: Array<Outcome> = []
      const inFlight = new Set<Promise<void>>()
      for (let i = 0; i < REQUESTS; i++) {
        const due = t0 + (i * 1000) / RATE
        const wait = due - performance.now()
        if (wait > 0) await sleep(wait)
        const live = copies.filter((c) => c.up)
        const copy = live[i % live.length]!
        const gateway = copy.gateway
        const sentAt = performance.now()
        const sentPhase = phase
        const request = send(gateway.url, i).then((status) => {
          outcomes.push({
            i,
            status,
            sentAt: sentAt - t0,
            ms: performance.now() - sentAt,
            phase: sentPhase,
            toKilledCopy: gateway !== copy.gateway || !copy.up,
          })
        })
        inFlight.add(request)
        void request.then(() => inFlight.delete(request))
      }
      await Promise.all(inFlight)
      await director
      loading = false
      await poller

      // Every request answered as its scenario says: 200, or the fake's 500 for the failing ones; only the
      // ones in flight to the killed copy may have lost their connection.
      const expected = (i: number) => (i % 50 === 7 ? 500 : 200)
      const wrong = outcomes.filter((o) => !o.toKilledCopy && o.status !== expected(o.i))
      expect(wrong.slice(0, 5), `${wrong.length} requests answered wrongly`).toEqual([])
      expect(notReady).toEqual([])
      const latency = (name: string) =>
        p50(outcomes.filter((o) => o.phase === name && o.status !== 0).map((o) => o.ms))
      const before = latency("before")
      const stopped = latency("stopped")
      const after = latency("after")

      // The backlog sent: nothing pending on any copy, then the table against the files.
      for (const copy of copies)
        await eventually(
          async () => (await metric(copy.gateway.url, "tollgate_usage_db_pending_records")) === 0,
          60_000,
        )
      const records = copies.flatMap((c) => fileRecords(c.dir)).sort(byId)
      const rows = tableRows(database)
      expect(rows.length).toBe(records.length)
      expect(rows).toEqual(records)
      expect(
        pg.psql("SELECT sum(requests) || ',' || sum(cost_micro_usd) FROM tollgate_usage_hourly", database),
      ).toBe(pg.psql("SELECT count(*) || ',' || sum(cost_micro_usd) FROM tollgate_usage", database))

      // /admin/usage on every copy: the fleet's records, per tenant, route, key and model, to the µUSD.
      const first = records[0]!.ts
      const since = new Date(Date.parse(first) - 3_600_000).toISOString()
      const until = new Date(Date.now() + 3_600_000).toISOString()
      const groupings: Record<string, (r: UsageRecord) => string | null> = {
        tenant: (r) => r.tenant,
        route: (r) => r.route,
        key: (r) => `${r.tenant}/${r.key_id}`,
        model: (r) => r.model,
      }
      for (const copy of copies) {
        const range = `since=${since}&until=${until}`
        const totals = await adminGet(copy.gateway.url, `/admin/usage?${range}`)
        expect(totals.headers.get("x-tollgate-usage-source")).toBe("database")
        expect((totals.body as { totals: unknown }).totals).toEqual(sumRecords(records))
        for (const [groupBy, keyOf] of Object.entries(groupings)) {
          const grouped = await adminGet(copy.gateway.url, `/admin/usage?group_by=${groupBy}&${range}`)
          expect((grouped.body as { groups: unknown }).groups, groupBy).toEqual(groupRecords(records, keyOf))
        }
      }

      const summary = {
        requests: outcomes.length,
        records: records.length,
        streams: records.filter((r) => r.stream).length,
        cut: records.filter((r) => r.incomplete).length,
        failed_over: records.filter((r) => r.attempts > 1 || (r.route === "failover" && r.provider === "up"))
          .length,
        errors: records.filter((r) => r.status !== 200).length,
        lost_with_killed_copy: outcomes.filter((o) => o.toKilledCopy && o.status === 0).length,
        p50_ms: { before: +before.toFixed(2), stopped: +stopped.toFixed(2), after: +after.toFixed(2) },
        seconds: +((performance.now() - t0) / 1000).toFixed(1),
        events,
      }
      console.log(`fleet: ${JSON.stringify(summary)}`)
      // The timeline: per 5 s of sending, the p50 and the CPU share of each process.
      const timeline: Array<string> = []
      for (let from = 0; from < DURATION_MS; from += 5_000) {
        const inWindow = outcomes.filter((o) => o.sentAt >= from && o.sentAt < from + 5_000 && o.status !== 0)
        const a = cpu.find((c) => c.t! >= from)
        const b = [...cpu].reverse().find((c) => c.t! < from + 5_000)
        const share = (name: string) =>
          a === undefined || b === undefined || b.t === a.t
            ? "?"
            : a[`${name}_pid`] !== b[`${name}_pid`]
              ? "(restarted)"
              : `${Math.round(((b[name]! - a[name]!) / (b.t! - a.t!)) * 100)}%`
        timeline.push(
          `${from / 1000}s p50 ${p50(inWindow.map((o) => o.ms)).toFixed(1)} ms, cpu copies ${share("copy0")} ${share("copy1")} ${share("copy2")} fake ${share("fake")} client ${share("self")}`,
        )
      }
      console.log(`fleet timeline:\n${timeline.join("\n")}`)
      expect(summary.streams).toBeGreaterThan(0)
      expect(summary.cut).toBeGreaterThan(0)
      expect(summary.failed_over).toBeGreaterThan(0)
      // No request slowed because the database was down (a request path that waited for it would take seconds).
      expect(stopped).toBeLessThanOrEqual(before + P50_SLACK_MS)
    },
    DURATION_MS + 240_000,
  )
})
