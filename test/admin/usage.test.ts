import type { UsageTotals } from "../../src/admin/query.js"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import {
  ADMIN_ENV,
  ADMIN_TOKEN,
  adminGet,
  groupRecords,
  sumRecords,
  usageRecord,
  writeUsageFile,
} from "./fixtures.js"

/**
 * `/admin/usage` after real traffic: a usage file written before start (earlier
 * days, other tenants, cache tokens) plus live requests over several tenants,
 * providers, models and sessions; every answer equals a scan of the usage file.
 */

const DAY_MS = 86_400_000
const globexKey = generateKey()
let h: Harness
const now = Date.now()

const seeded: Array<UsageRecord> = [5, 3, 3, 2, 1].flatMap((daysAgo, i) => [
  usageRecord({
    ts: new Date(now - daysAgo * DAY_MS + i * 1000).toISOString(),
    tenant: "acme",
    provider: "anthropic",
    model: "claude-sonnet-5-5",
    session: `seed-${i % 2}`,
    input_tokens: 1000 + i,
    output_tokens: 200 + i,
    cache_read_tokens: 50 * i,
    cache_write_tokens: 7 * i,
    cost_micro_usd: 5000 + i,
  }),
  usageRecord({
    ts: new Date(now - daysAgo * DAY_MS + i * 1000 + 1).toISOString(),
    tenant: i % 2 === 0 ? "globex" : "retired-tenant",
    provider: i === 4 ? null : "openai",
    model: i === 4 ? null : "gpt-5-mini",
    input_tokens: 300,
    output_tokens: 30,
    cost_micro_usd: i === 4 ? 0 : 1234,
    status: i === 4 ? 429 : 200,
  }),
])

beforeAll(async () => {
  h = await startHarness({
    fakes: [{ name: "A" }, { name: "B" }],
    env: { [ADMIN_ENV]: ADMIN_TOKEN },
    config: (urls, keyHash, dir) => {
      writeUsageFile(join(dir, "usage.jsonl"), seeded)
      return {
        server: { listen: "127.0.0.1:0" },
        admin: { token_env: ADMIN_ENV },
        usage: { file: join(dir, "usage.jsonl") },
        providers: {
          anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
          backup: { kind: "anthropic", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
          openai: { kind: "openai", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        },
        routes: {
          claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
          "claude-backup": {
            api: "anthropic",
            targets: [{ provider: "backup", model: "claude-sonnet-5-5" }],
          },
          gpt: { api: "openai", targets: [{ provider: "openai", model: "gpt-5-mini" }] },
        },
        tenants: {
          acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" },
          globex: { keys: [{ id: "web", sha256: hashKey(globexKey) }], routes: "*" },
        },
      }
    },
  })
  const send = async (key: string, route: string, options: { session?: string; stream?: boolean } = {}) => {
    const anthropic = route !== "gpt"
    const response = await fetch(`${h.url}${anthropic ? "/v1/messages" : "/v1/chat/completions"}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        ...(options.session === undefined ? {} : { "x-tollgate-session": options.session }),
      },
      body: JSON.stringify({
        model: route,
        max_tokens: 12,
        stream: options.stream ?? false,
        messages: [{ role: "user", content: `hello from ${route} ${options.session ?? "no session"}` }],
      }),
    })
    await response.text()
    expect(response.status).toBe(200)
  }
  await send(h.key, "claude", { session: "s-alpha" })
  await send(h.key, "claude", { session: "s-alpha", stream: true })
  await send(h.key, "claude-backup", { session: "s-beta" })
  await send(h.key, "gpt", { stream: true })
  await send(globexKey, "claude", { session: "s-gamma" })
  await send(globexKey, "gpt", { session: "s-gamma" })
  await send(globexKey, "claude-backup", { stream: true })
  await send(h.key, "gpt")
})

afterAll(() => h.close())

interface UsageBody {
  readonly totals: UsageTotals
  readonly groups?: ReadonlyArray<UsageTotals & { key: string | null }>
  readonly [key: string]: unknown
}

const usage = async (query: string): Promise<UsageBody> => {
  const response = await adminGet(h.url, `/admin/usage?${query}`)
  expect(response.status).toBe(200)
  return response.body as UsageBody
}

const keys: Record<string, (r: UsageRecord) => string | null> = {
  model: (r) => r.model,
  provider: (r) => r.provider,
  day: (r) => r.ts.slice(0, 10),
  session: (r) => r.session,
  route: (r) => r.route,
  tenant: (r) => r.tenant,
  key: (r) => `${r.tenant}/${r.key_id}`,
}

describe("/admin/usage", () => {
  it("totals equal the sum of every record in the usage file: the seeded ones and the live ones", async () => {
    const records = h.records()
    expect(records.length).toBe(seeded.length + 8)
    const body = await usage("")
    expect(body).toEqual({
      tenant: null,
      since: null,
      until: null,
      group_by: null,
      totals: sumRecords(records),
    })
    expect(body.totals.cache_read_tokens).toBeGreaterThan(0)
  })

  it("groups by model, provider, UTC day, session, route, tenant and key exactly as a scan of the file does", async () => {
    const records = h.records()
    for (const [groupBy, key] of Object.entries(keys)) {
      const body = await usage(`group_by=${groupBy}`)
      expect(body.group_by).toBe(groupBy)
      expect(body.totals).toEqual(sumRecords(records))
      expect(body.groups, groupBy).toEqual(groupRecords(records, key))
    }
    const providers = (await usage("group_by=provider")).groups!.map((g) => g.key)
    expect(providers).toEqual(["anthropic", "backup", "openai", null])
    expect((await usage("group_by=day")).groups!.length).toBe(5)
    expect((await usage("group_by=route")).groups!.map((g) => g.key)).toEqual([
      "claude",
      "claude-backup",
      "gpt",
    ])
    expect((await usage("group_by=tenant")).groups!.map((g) => g.key)).toEqual([
      "acme",
      "globex",
      "retired-tenant",
    ])
    const byKey = await usage("tenant=globex&group_by=key")
    expect(byKey.groups!.map((g) => [g.key, g.requests])).toEqual([
      ["globex/ci", 3],
      ["globex/web", 3],
    ])
  })

  it("filters by tenant, including a tenant that is no longer in the config, and one that never sent", async () => {
    const records = h.records()
    for (const tenant of ["acme", "globex", "retired-tenant"]) {
      const body = await usage(`tenant=${tenant}&group_by=session`)
      const mine = records.filter((r) => r.tenant === tenant)
      expect(body.tenant).toBe(tenant)
      expect(body.totals).toEqual(sumRecords(mine))
      expect(body.groups).toEqual(groupRecords(mine, keys.session!))
    }
    expect(await usage("tenant=nobody&group_by=model")).toMatchObject({
      totals: { requests: 0, cost_micro_usd: 0 },
      groups: [],
    })
  })

  it("since is inclusive and until exclusive, exactly at a record's ts", async () => {
    const records = h.records()
    const live = records.slice(seeded.length)
    for (const pivot of [live[3]!.ts, seeded[4]!.ts, records.at(-1)!.ts]) {
      const at = Date.parse(pivot)
      const q = (name: string, ms: number) => `${name}=${encodeURIComponent(new Date(ms).toISOString())}`
      const between = (since: number, until: number) =>
        records.filter((r) => Date.parse(r.ts) >= since && Date.parse(r.ts) < until)
      expect((await usage(q("since", at))).totals).toEqual(sumRecords(between(at, Infinity)))
      expect((await usage(q("until", at))).totals).toEqual(sumRecords(between(-Infinity, at)))
      expect((await usage(`${q("since", at)}&${q("until", at + 1)}`)).totals).toEqual(
        sumRecords(between(at, at + 1)),
      )
      expect((await usage(`${q("since", at + 1)}&${q("until", at + 1)}`)).totals.requests).toBe(0)
      const sameInstant = new Date(at).toISOString().replace("Z", "+00:00")
      expect((await usage(`since=${encodeURIComponent(sameInstant)}`)).since).toBe(new Date(at).toISOString())
    }
  })

  it("answers 400 with the parameter named for a bad date, an unknown group_by and since after until", async () => {
    for (const [query, param] of [
      ["since=last-tuesday", "since"],
      ["until=2026-12-02T10:00:00", "until"],
      ["group_by=team", "group_by"],
      ["since=2026-12-02&until=2026-12-01", "since"],
      ["tenants=acme", "tenants"],
    ] as const) {
      const response = await adminGet(h.url, `/admin/usage?${query}`)
      expect(response.status, query).toBe(400)
      expect(response.body).toMatchObject({ error: { type: "invalid_request_error", param } })
    }
  })
})
