import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { UPSTREAM_KEY_ENV } from "../support/harness.js"
import type { UsageTotals } from "../../src/admin/query.js"
import { encodeRecord, type UsageRecord } from "../../src/meter/record.js"

/** Shared helpers of the admin tests. */

export const ADMIN_TOKEN = "admin-secret-for-tests"
export const ADMIN_ENV = "TG_TEST_ADMIN_TOKEN"

/** Tenant `acme` with the harness's key (id `ci`), every route. */
const acmeOnly = (keyHash: string) => ({ acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } })

/**
 * A harness config with the admin API on (its token in {@link ADMIN_ENV}), route `claude` on fake 0, and
 * `tenants` (given the harness key's hash; default: `acme` alone).
 */
export const adminConfig =
  (tenants: (keyHash: string) => Record<string, unknown> = acmeOnly) =>
  (urls: ReadonlyArray<string>, keyHash: string, dir: string) => ({
    server: { listen: "127.0.0.1:0" },
    admin: { token_env: ADMIN_ENV },
    usage: { file: join(dir, "usage.jsonl") },
    providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
    routes: {
      claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
    },
    tenants: tenants(keyHash),
  })

/** A usage record with the fields that the index reads set from `fields`, the rest plausible. */
export const usageRecord = (fields: Partial<UsageRecord> & { readonly ts: string }): UsageRecord => ({
  request_id: `req-${fields.ts}`,
  tenant: "acme",
  key_id: "ci",
  route: "claude",
  endpoint: "/v1/messages",
  stream: false,
  provider: "anthropic",
  model: "claude-sonnet-5-5",
  attempts: 1,
  status: 200,
  input_tokens: 10,
  output_tokens: 5,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  reserved_micro_usd: 100,
  cost_micro_usd: 80,
  usage_estimated: false,
  incomplete: false,
  session: null,
  duration_ms: 12,
  error: null,
  upstream_endpoint: "/v1/messages",
  trace_id: null,
  budget: null,
  cache_saved_micro_usd: 0,
  moved_from: null,
  moved_reason: null,
  ...fields,
})

/** Writes `records` as a usage file (one JSON line each). */
export const writeUsageFile = (file: string, records: ReadonlyArray<UsageRecord>): void => {
  writeFileSync(file, records.map(encodeRecord).join(""))
}

/** The totals that `/admin/usage` should report for `records`, summed the slow way. */
export const sumRecords = (records: ReadonlyArray<UsageRecord>): UsageTotals => {
  const input = records.reduce((s, r) => s + r.input_tokens, 0)
  const read = records.reduce((s, r) => s + r.cache_read_tokens, 0)
  const write = records.reduce((s, r) => s + r.cache_write_tokens, 0)
  return {
    requests: records.length,
    input_tokens: input,
    output_tokens: records.reduce((s, r) => s + r.output_tokens, 0),
    cache_read_tokens: read,
    cache_write_tokens: write,
    cost_micro_usd: records.reduce((s, r) => s + r.cost_micro_usd, 0),
    cache_saved_micro_usd: records.reduce((s, r) => s + r.cache_saved_micro_usd, 0),
    // The slow way: a plain division, rounded to 4 decimals as the API rounds it.
    cache_hit_ratio:
      input + read + write === 0 ? 0 : Math.round((read / (input + read + write)) * 10_000) / 10_000,
  }
}

/** `records` grouped by `key` and summed, as `/admin/usage` lists groups (sorted by key, null last). */
export const groupRecords = (
  records: ReadonlyArray<UsageRecord>,
  key: (r: UsageRecord) => string | null,
): Array<UsageTotals & { key: string | null }> => {
  const groups = new Map<string | null, Array<UsageRecord>>()
  for (const r of records) {
    const group = groups.get(key(r))
    if (group === undefined) groups.set(key(r), [r])
    else group.push(r)
  }
  return [...groups]
    .map(([k, rs]) => ({ key: k, ...sumRecords(rs) }))
    .sort((a, b) => (a.key === b.key ? 0 : a.key === null ? 1 : b.key === null ? -1 : a.key < b.key ? -1 : 1))
}

/** GET `path` on the gateway with the admin token (or `token`, or none when null). */
export const adminGet = async (
  url: string,
  path: string,
  token: string | null = ADMIN_TOKEN,
): Promise<{ status: number; body: unknown; headers: Headers }> => {
  const response = await fetch(`${url}${path}`, {
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  })
  return { status: response.status, body: await response.json(), headers: response.headers }
}
