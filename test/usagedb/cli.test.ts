import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { startPostgres, type PostgresHandle } from "../support/postgres.js"
import {
  FAKEPROVIDER,
  GATEWAY_UPSTREAM_KEY_ENV,
  runBinary,
  startBinary,
  TOLLGATE,
  writeGatewayConfig,
  type Running,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

let pg: PostgresHandle
let fake: Running
const running: Array<Running> = []

beforeAll(async () => {
  pg = await startPostgres()
  fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
}, 60_000)

afterAll(async () => {
  await Promise.all(running.map((r) => r.stop("SIGKILL")))
  await fake?.stop()
  await pg?.stop()
})

const URL_ENV = "TG_TEST_USAGE_DB"

/** A config dir whose usage.database names `database` (a fresh one) through URL_ENV. */
const setup = (database: string) => {
  const url = pg.createDatabase(database)
  const dir = tempDir("tollgate-usagedb-cli-")
  const config = writeGatewayConfig({
    dir,
    upstreamUrl: fake.url,
    keyHash: hashKey(generateKey()),
    sections: { usage: { file: "usage.jsonl", database: { url_env: URL_ENV } } },
  })
  return { url, dir, config, env: { [URL_ENV]: url, [GATEWAY_UPSTREAM_KEY_ENV]: "sk-test" } }
}

describe("tollgate usage migrate", () => {
  it("creates the table and its indexes at schema 3, and a second run has nothing to do", async () => {
    const { config, env } = setup("migrate_once")
    const first = await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], env)
    expect(first.stderr).toBe("")
    expect(first.code).toBe(0)
    expect(first.stdout.trim()).toBe("created table tollgate_usage (schema 3) and its indexes")
    expect(pg.psql("SELECT obj_description('tollgate_usage'::regclass, 'pg_class')", "migrate_once")).toBe(
      "tollgate usage schema 3",
    )
    const columns = pg.psql(
      "SELECT string_agg(column_name || ':' || data_type, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'tollgate_usage'",
      "migrate_once",
    )
    expect(columns).toBe(
      [
        "ts:timestamp with time zone",
        "request_id:text",
        "tenant:text",
        "key_id:text",
        "route:text",
        "endpoint:text",
        "stream:boolean",
        "provider:text",
        "model:text",
        "attempts:integer",
        "status:integer",
        "input_tokens:bigint",
        "output_tokens:bigint",
        "cache_read_tokens:bigint",
        "cache_write_tokens:bigint",
        "reserved_micro_usd:bigint",
        "cost_micro_usd:bigint",
        "usage_estimated:boolean",
        "incomplete:boolean",
        "session:text",
        "duration_ms:bigint",
        "error:text",
        "upstream_endpoint:text",
        "trace_id:text",
        "budget:text",
        "cache_saved_micro_usd:bigint",
        "moved_from:text",
        "moved_reason:text",
      ].join(","),
    )
    expect(
      pg.psql(
        "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'tollgate_usage'",
        "migrate_once",
      ),
    ).toBe(
      "tollgate_usage_model_ts,tollgate_usage_pkey,tollgate_usage_route_ts,tollgate_usage_tenant_key_ts,tollgate_usage_tenant_ts_sums,tollgate_usage_ts",
    )
    // A tenant's records by time carry the session and the sums (a tenant's sessions: an index-only scan).
    expect(
      pg.psql(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'tollgate_usage_tenant_ts_sums'",
        "migrate_once",
      ),
    ).toBe(
      "CREATE INDEX tollgate_usage_tenant_ts_sums ON public.tollgate_usage USING btree (tenant, ts) INCLUDE (session, status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_micro_usd)",
    )
    const second = await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], env)
    expect(second.code).toBe(0)
    expect(second.stdout.trim()).toBe("table tollgate_usage is at schema 3: nothing to do")
  })

  it("upgrades a schema 1 table (which serve refuses until then) to 3, keeping its rows", async () => {
    const { config, env } = setup("from_schema_1")
    expect((await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], env)).code).toBe(0)
    // The table as schema 1 left it: the plain index of a tenant's records by time, and one row.
    pg.psql(
      "DROP INDEX tollgate_usage_tenant_ts_sums; CREATE INDEX tollgate_usage_tenant_ts ON tollgate_usage (tenant, ts); " +
        "ALTER TABLE tollgate_usage DROP COLUMN cache_saved_micro_usd, DROP COLUMN moved_from, DROP COLUMN moved_reason; " +
        "ALTER TABLE tollgate_usage_hourly DROP COLUMN cache_saved_micro_usd; " +
        "COMMENT ON TABLE tollgate_usage IS 'tollgate usage schema 1'; " +
        "INSERT INTO tollgate_usage (ts, request_id, tenant, key_id, route, endpoint, stream, attempts, status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reserved_micro_usd, cost_micro_usd, usage_estimated, incomplete, duration_ms) " +
        "VALUES (now(), 'old-1', 'acme', 'ci', 'claude', '/v1/messages', false, 1, 200, 1, 2, 0, 0, 10, 7, false, false, 5)",
      "from_schema_1",
    )
    const refused = await runBinary(TOLLGATE, ["serve", "--config", config], env)
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(
      `tollgate: usage database: table tollgate_usage has schema 1, older than this tollgate needs (3); run \`tollgate usage migrate --config ${config}\``,
    )
    const upgrade = await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], env)
    expect(upgrade.code).toBe(0)
    expect(upgrade.stdout.trim()).toBe("upgraded table tollgate_usage from schema 1 to 3")
    expect(
      pg.psql(
        "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'tollgate_usage'",
        "from_schema_1",
      ),
    ).toBe(
      "tollgate_usage_model_ts,tollgate_usage_pkey,tollgate_usage_route_ts,tollgate_usage_tenant_key_ts,tollgate_usage_tenant_ts_sums,tollgate_usage_ts",
    )
    expect(
      pg.psql(
        "SELECT request_id || ',' || cost_micro_usd || ',' || cache_saved_micro_usd || ',' || coalesce(moved_from, 'null') FROM tollgate_usage",
        "from_schema_1",
      ),
    ).toBe("old-1,7,0,null")
    expect(
      pg.psql(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'tollgate_usage_hourly' AND column_name = 'cache_saved_micro_usd'",
        "from_schema_1",
      ),
    ).toBe("1")
    const gateway = await startBinary(TOLLGATE, ["serve", "--config", config], env)
    running.push(gateway)
    expect(await gateway.stop()).toBe(0)
  })

  it("without usage.database in the config: one line, exit 2", async () => {
    const dir = tempDir("tollgate-usagedb-cli-")
    const config = writeGatewayConfig({ dir, upstreamUrl: fake.url, keyHash: hashKey(generateKey()) })
    const run = await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], {
      [GATEWAY_UPSTREAM_KEY_ENV]: "sk-test",
    })
    expect(run.code).toBe(2)
    expect(run.stderr.trim().split("\n")).toEqual([
      `tollgate: no usage.database in ${config}: nothing to migrate`,
    ])
  })
})

describe("tollgate serve with usage.database", () => {
  it("refuses an empty database (no migrate): one clear line, exit 2", async () => {
    const { config, env } = setup("never_migrated")
    const run = await runBinary(TOLLGATE, ["serve", "--config", config], env)
    expect(run.code).toBe(2)
    expect(run.stdout).not.toContain("listening on")
    // The one line that is not a JSON log line (the start logs what it did before it met the database).
    const lines = run.stderr
      .trim()
      .split("\n")
      .filter((line) => !line.startsWith("{"))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toBe(
      `tollgate: usage database: no table tollgate_usage; run \`tollgate usage migrate --config ${config}\` first`,
    )
  })

  it("refuses a wrong password: one line naming the variable, the password nowhere in the output", async () => {
    const { config } = setup("wrong_password")
    const secret = "not-the-password-4f9c2a"
    const env = { [URL_ENV]: pg.urlOf("wrong_password", secret), [GATEWAY_UPSTREAM_KEY_ENV]: "sk-test" }
    for (const args of [
      ["serve", "--config", config],
      ["usage", "migrate", "--config", config],
    ]) {
      const run = await runBinary(TOLLGATE, args, env)
      expect(run.code).toBe(2)
      const lines = run.stderr
        .trim()
        .split("\n")
        .filter((line) => !line.startsWith("{"))
      expect(lines).toHaveLength(1)
      const last = lines[0]!
      expect(last).toMatch(
        new RegExp(
          `^tollgate: usage database: the database refused the credentials in ${URL_ENV} \\(.*password authentication failed`,
        ),
      )
      expect(run.stdout + run.stderr).not.toContain(secret)
      expect(run.stdout + run.stderr).not.toContain(pg.password)
    }
  })

  it("starts against a migrated table", async () => {
    const { config, env } = setup("migrated_then_serve")
    expect((await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], env)).code).toBe(0)
    const gateway = await startBinary(TOLLGATE, ["serve", "--config", config], env)
    running.push(gateway)
    expect(gateway.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(await gateway.stop()).toBe(0)
  })
})
