/**
 * Issue #37 acceptance: routing that keeps prompt caches warm. Agents of 200
 * sessions × 10 turns, through the official Anthropic SDK, against two fake
 * providers that each keep their own prompt cache (`prompt-cache`: a turn
 * reads the cache exactly when that fake answered an earlier turn of the
 * conversation). A weighted sticky route hits the cache on ≥ 99 % of the
 * turns after the first, on the memory store and across three copies on one
 * Redis; the same route without `sticky` hits as often as its weights make
 * likely. A session whose target's breaker opens moves, says so in its
 * record and trace, and stays on its new target. The cache's savings in
 * `/admin/usage` and `/metrics` are the records' own.
 */
import Anthropic from "@anthropic-ai/sdk"
import { join } from "node:path"
import { Redis } from "ioredis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { generateKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { ADMIN_ENV, ADMIN_TOKEN } from "../admin/fixtures.js"
import { startCollector, type Collector } from "../support/collector.js"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startRedis, type RedisHandle } from "../support/redis.js"
import { tempDir } from "../support/tempDirs.js"

const SESSIONS = 200
const TURNS = 10
/** Sessions in flight at once (each one's turns follow each other, as an agent's do). */
const PARALLEL = 25
/** The weights of targets a and b. */
const WEIGHTS = [3, 1] as const

/** USD per million tokens of the fakes' model (support/harness.ts PRICES): input 3, cache read 0.3. */
const INPUT_MICRO_PER_M = 3_000_000
const CACHE_READ_MICRO_PER_M = 300_000

let fakeA: FakeProviderHandle
let fakeB: FakeProviderHandle
let redis: RedisHandle
beforeAll(async () => {
  ;[fakeA, fakeB, redis] = await Promise.all([
    startFakeProvider({ name: "a", scenario: "prompt-cache" }),
    startFakeProvider({ name: "b", scenario: "prompt-cache" }),
    startRedis(),
  ])
})
afterAll(async () => {
  await Promise.all([fakeA?.close(), fakeB?.close(), redis?.stop()])
})

interface RouteShape {
  readonly strategy?: "ordered" | "weighted"
  readonly sticky?: boolean
  readonly weights?: boolean
}

/** Routes `sticky` (weighted 3:1, sticky) and `spread` (the same, not sticky) on fakes a and b. */
const routingConfig =
  (options: {
    readonly dir: string
    readonly redis?: boolean
    readonly routes?: Record<string, RouteShape>
    readonly breaker?: Record<string, unknown>
    readonly telemetry?: Record<string, unknown>
  }) =>
  (urls: ReadonlyArray<string>, keyHash: string) => {
    const routes = options.routes ?? {
      sticky: { strategy: "weighted", sticky: true, weights: true },
      spread: { strategy: "weighted", weights: true },
    }
    return {
      server: { listen: "127.0.0.1:0" },
      admin: { token_env: ADMIN_ENV },
      usage: { file: join(options.dir, "usage.jsonl") },
      ...(options.redis === true ? { store: { kind: "redis", url: redis.url } } : {}),
      ...(options.breaker === undefined ? {} : { breaker: options.breaker }),
      ...(options.telemetry === undefined ? {} : { telemetry: options.telemetry }),
      aliases: { sonnet: { provider: "b", model: "claude-sonnet-5-5" } },
      providers: {
        a: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        b: { kind: "anthropic", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
      },
      routes: Object.fromEntries(
        Object.entries(routes).map(([name, shape]) => [
          name,
          {
            api: "anthropic",
            ...(shape.strategy === undefined ? {} : { strategy: shape.strategy }),
            ...(shape.sticky === undefined ? {} : { sticky: shape.sticky }),
            targets: [
              { provider: "a", model: "claude-sonnet-5-5", ...(shape.weights ? { weight: WEIGHTS[0] } : {}) },
              // Target b by its alias: the route gets the alias's provider and model.
              { alias: "sonnet", ...(shape.weights ? { weight: WEIGHTS[1] } : {}) },
            ],
          },
        ]),
      ),
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
    }
  }

/** One turn's request id, by session and turn. */
type Turns = Array<Array<string>>

/**
 * Runs `SESSIONS` agents of `TURNS` turns on `route`, each turn through the
 * copy `(session + turn) % urls.length` (so on three copies no two turns in
 * a row meet the same copy): the whole history every turn, a system prompt
 * and first message of its own (its derived session). Returns the request
 * ids of each session's turns.
 */
const runAgents = async (
  urls: ReadonlyArray<string>,
  key: string,
  route: string,
  tag: string,
): Promise<Turns> => {
  const clients = urls.map((baseURL) => new Anthropic({ apiKey: key, baseURL, maxRetries: 0 }))
  const turns: Turns = []
  const agent = async (session: number): Promise<Array<string>> => {
    const ids: Array<string> = []
    const messages: Array<Anthropic.MessageParam> = []
    for (let turn = 0; turn < TURNS; turn++) {
      messages.push({ role: "user", content: `${tag} session ${session} turn ${turn}: go on with the task` })
      const { data, response } = await clients[(session + turn) % clients.length]!.messages.create({
        model: route,
        max_tokens: 8,
        system: `You are agent ${session} of run ${tag}; the repository is large and this prompt is long.`,
        messages,
      }).withResponse()
      ids.push(response.headers.get("x-request-id")!)
      const text = data.content.map((block) => (block.type === "text" ? block.text : "")).join("")
      messages.push({ role: "assistant", content: text })
    }
    return ids
  }
  for (let from = 0; from < SESSIONS; from += PARALLEL) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(PARALLEL, SESSIONS - from) }, (_, i) => agent(from + i)),
    )
    turns.push(...batch)
  }
  return turns
}

/** Every record of `copies`, by request id (records are written before their responses end). */
const recordsById = (copies: ReadonlyArray<Harness>): Map<string, UsageRecord> =>
  new Map(copies.flatMap((h) => h.records()).map((r) => [r.request_id, r]))

/** The share of turns after the first whose record read the prompt cache, and the records by session and turn. */
const hitShare = (turns: Turns, records: Map<string, UsageRecord>) => {
  const bySession = turns.map((ids) => ids.map((id) => records.get(id)!))
  for (const session of bySession) for (const record of session) expect(record?.status).toBe(200)
  const later = bySession.flatMap((session) => session.slice(1))
  return { share: later.filter((r) => r.cache_read_tokens > 0).length / later.length, bySession }
}

/**
 * What share of turns after the first hit the cache when each turn's target
 * is drawn by weight, independently: turn k (0-based) hits when its target
 * was drawn for one of the k turns before it.
 */
const spreadExpectation = (): number => {
  const total = WEIGHTS[0] + WEIGHTS[1]
  const p = WEIGHTS.map((w) => w / total)
  let sum = 0
  for (let k = 1; k < TURNS; k++) sum += p.reduce((s, pi) => s + pi * (1 - (1 - pi) ** k), 0)
  return sum / (TURNS - 1)
}

/** The share of sessions whose first turn went to target a. */
const firstOnA = (bySession: ReadonlyArray<ReadonlyArray<UsageRecord>>): number =>
  bySession.filter((s) => s[0]!.provider === "a").length / bySession.length

/** micro-USD the cache saved on `r`, by the price table, rounded down per record. */
const savedBy = (r: UsageRecord): number =>
  Math.floor((r.cache_read_tokens * (INPUT_MICRO_PER_M - CACHE_READ_MICRO_PER_M)) / 1_000_000)

const adminUsage = async (url: string, query: string) => {
  const response = await fetch(`${url}/admin/usage?${query}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  })
  expect(response.status).toBe(200)
  return (await response.json()) as {
    totals: { cache_saved_micro_usd: number; cache_read_tokens: number; cache_hit_ratio: number }
    groups?: Array<{ key: string; cache_saved_micro_usd: number; cache_read_tokens: number }>
  }
}

describe("a weighted sticky route on the memory store", () => {
  let h: Harness
  beforeAll(async () => {
    const dir = tempDir("tollgate-routing-")
    h = await startHarness({
      dir,
      sharedFakes: [fakeA, fakeB],
      env: { [ADMIN_ENV]: ADMIN_TOKEN },
      config: routingConfig({ dir }),
    })
  })
  afterAll(async () => {
    await h?.close()
  })

  it("hits the prompt cache on ≥ 99 % of the turns after the first; without sticky, as often as the weights make likely", async () => {
    const sticky = hitShare(await runAgents([h.url], h.key, "sticky", "mem-sticky"), recordsById([h]))
    expect(sticky.share).toBeGreaterThanOrEqual(0.99)
    // Each session stays where its first turn went; first turns follow the weights.
    for (const session of sticky.bySession) expect(new Set(session.map((r) => r.provider)).size).toBe(1)
    expect(Math.abs(firstOnA(sticky.bySession) - 0.75)).toBeLessThan(0.1)

    const spread = hitShare(await runAgents([h.url], h.key, "spread", "mem-spread"), recordsById([h]))
    expect(Math.abs(spread.share - spreadExpectation())).toBeLessThan(0.04)
    const all = spread.bySession.flat()
    expect(Math.abs(all.filter((r) => r.provider === "a").length / all.length - 0.75)).toBeLessThan(0.03)
    // Token for token, the sticky agents read much more of their prompts from the cache.
    const ratio = (records: ReadonlyArray<UsageRecord>) =>
      records.reduce((s, r) => s + r.cache_read_tokens, 0) /
      records.reduce((s, r) => s + r.input_tokens + r.cache_read_tokens + r.cache_write_tokens, 0)
    expect(ratio(sticky.bySession.flat())).toBeGreaterThan(ratio(all) + 0.05)
  })

  it("reports the cache's savings in /admin/usage and /metrics as the sum over records, to the µUSD", async () => {
    const records = h.records()
    expect(records.some((r) => r.cache_read_tokens > 0)).toBe(true)
    for (const r of records) expect(r.cache_saved_micro_usd, r.request_id).toBe(savedBy(r))
    const expected = records.reduce((s, r) => s + savedBy(r), 0)
    const usage = await adminUsage(h.url, "group_by=provider")
    expect(usage.totals.cache_saved_micro_usd).toBe(expected)
    for (const provider of ["a", "b"]) {
      const group = usage.groups!.find((g) => g.key === provider)!
      expect(group.cache_saved_micro_usd, provider).toBe(
        records.filter((r) => r.provider === provider).reduce((s, r) => s + savedBy(r), 0),
      )
    }
    const read = records.reduce((s, r) => s + r.cache_read_tokens, 0)
    const prompt = records.reduce(
      (s, r) => s + r.input_tokens + r.cache_read_tokens + r.cache_write_tokens,
      0,
    )
    expect(usage.totals.cache_hit_ratio).toBe(Math.round((read / prompt) * 10_000) / 10_000)
    const byRoute = await adminUsage(h.url, "group_by=route")
    expect(byRoute.groups!.find((g) => g.key === "sticky")!.cache_saved_micro_usd).toBe(
      records.filter((r) => r.route === "sticky").reduce((s, r) => s + savedBy(r), 0),
    )

    const metrics = await (await fetch(`${h.url}/metrics`)).text()
    const sum = (name: string) =>
      [...metrics.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, "gm"))].reduce(
        (s, m) => s + Number(m[1]),
        0,
      )
    expect(sum("tollgate_cache_saved_micro_usd_total")).toBe(expected)
    expect(sum("tollgate_cache_read_tokens_total")).toBe(read)
    expect(sum("tollgate_prompt_tokens_total")).toBe(prompt)
    expect(metrics).toMatch(
      /^tollgate_cache_read_tokens_total\{route="sticky",provider="a",model="claude-sonnet-5-5"\} [1-9]\d*$/m,
    )
  })
})

describe("a weighted sticky route across three copies on one Redis", () => {
  let copies: Array<Harness>
  beforeAll(async () => {
    const client = new Redis(redis.url)
    await client.flushall()
    client.disconnect()
    const key = generateKey()
    copies = await Promise.all(
      [0, 1, 2].map((i) => {
        const dir = tempDir(`tollgate-routing-${i}-`)
        return startHarness({
          dir,
          key,
          sharedFakes: [fakeA, fakeB],
          config: routingConfig({ dir, redis: true }),
        })
      }),
    )
  })
  afterAll(async () => {
    await Promise.all((copies ?? []).map((h) => h.close()))
  })

  it("keeps each session on one target whichever copy takes its turn; without sticky, as the weights make likely", async () => {
    const urls = copies.map((h) => h.url)
    const key = copies[0]!.key
    const sticky = hitShare(await runAgents(urls, key, "sticky", "redis-sticky"), recordsById(copies))
    expect(sticky.share).toBeGreaterThanOrEqual(0.99)
    const copyOf = new Map(copies.flatMap((h, i) => h.records().map((r) => [r.request_id, i] as const)))
    for (const session of sticky.bySession) {
      expect(new Set(session.map((r) => r.provider)).size).toBe(1)
      // Its turns were answered by every copy.
      expect(new Set(session.map((r) => copyOf.get(r.request_id))).size).toBe(3)
    }
    const spread = hitShare(await runAgents(urls, key, "spread", "redis-spread"), recordsById(copies))
    expect(Math.abs(spread.share - spreadExpectation())).toBeLessThan(0.04)
  })
})

describe("a sticky session whose target fails", () => {
  let c: Collector
  let h: Harness
  let a: FakeProviderHandle
  beforeAll(async () => {
    c = await startCollector()
    a = await startFakeProvider({ name: "a", scenario: "prompt-cache" })
    const dir = tempDir("tollgate-routing-move-")
    h = await startHarness({
      dir,
      sharedFakes: [a, fakeB],
      // The failures' request lines are warnings: kept out of the test output.
      logLevel: "Error",
      config: routingConfig({
        dir,
        routes: { claude: { sticky: true } },
        breaker: { min_requests: 3, failure_ratio: 0.5, open_for: "1s" },
        telemetry: { otlp_endpoint: c.url },
      }),
    })
  })
  afterAll(async () => {
    await h?.close()
    await a?.close()
    await c?.close()
  })

  const client = () => new Anthropic({ apiKey: h.key, baseURL: h.url, maxRetries: 0 })
  /** One turn of session `name` (its own system prompt), with the history so far; its record. */
  const histories = new Map<string, Array<Anthropic.MessageParam>>()
  const turn = async (name: string): Promise<UsageRecord> => {
    const messages = histories.get(name) ?? []
    histories.set(name, messages)
    messages.push({ role: "user", content: `turn ${messages.length / 2} of ${name}` })
    const { data, response } = await client()
      .messages.create({ model: "claude", max_tokens: 8, system: `session ${name}`, messages })
      .withResponse()
    messages.push({
      role: "assistant",
      content: data.content.map((b) => (b.type === "text" ? b.text : "")).join(""),
    })
    const id = response.headers.get("x-request-id")!
    let record: UsageRecord | undefined
    await eventually(() => (record = h.records().find((r) => r.request_id === id)) !== undefined)
    return record!
  }

  it("moves to the other target when the breaker opens, says why in its record and trace, and stays there", async () => {
    const first = await turn("s1")
    expect([first.provider, first.moved_from]).toEqual(["a", null])
    const port = a.port
    await a.close()
    // Other sessions' first turns fail on a and fall back to b, until a's breaker opens.
    for (let i = 2; i <= 5; i++) {
      const other = await turn(`s${i}`)
      expect([other.provider, other.moved_from]).toEqual(["b", null])
    }
    const moved = await turn("s1")
    expect(moved.provider).toBe("b")
    expect(moved.moved_from).toBe("a/claude-sonnet-5-5")
    expect(moved.moved_reason).toBe("breaker_open")
    expect(moved.attempts).toBe(1)
    let events: ReadonlyArray<{ name: string; attributes: Record<string, unknown> }> = []
    await eventually(() => {
      const server = c.spans().find((s) => s.traceId === moved.trace_id && s.kind === 2)
      events = server?.events ?? []
      return server !== undefined
    })
    expect(events.find((e) => e.name === "tollgate.session_moved")?.attributes).toEqual({
      "tollgate.moved_from": "a/claude-sonnet-5-5",
      "tollgate.provider": "b",
      "gen_ai.request.model": "claude-sonnet-5-5",
      "tollgate.reason": "breaker_open",
    })
    const metrics = await (await fetch(`${h.url}/metrics`)).text()
    expect(metrics).toMatch(
      /^tollgate_session_moves_total\{route="claude",provider="b",model="claude-sonnet-5-5"\} 1$/m,
    )

    // a comes back and its breaker closes: a new session goes to a again, s1 stays on b (and reads b's cache).
    a = await startFakeProvider({ name: "a", scenario: "prompt-cache", port })
    let fresh = 0
    await eventually(async () => (await turn(`fresh-${fresh++}`)).provider === "a", 10_000)
    for (let i = 0; i < 3; i++) {
      const later = await turn("s1")
      expect([later.provider, later.moved_from]).toEqual(["b", null])
      if (i > 0) expect(later.cache_read_tokens).toBeGreaterThan(0)
    }
  })
})
