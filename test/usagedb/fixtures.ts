import { expect } from "vitest"
import { UPSTREAM_KEY_ENV } from "../support/harness.js"
import type { PostgresHandle } from "../support/postgres.js"
import { runBinary, TOLLGATE, writeGatewayConfig } from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/** The variable the usage-database tests' configs name in `usage.database.url_env`. */
export const DB_ENV = "TG_TEST_USAGE_DB_URL"

/** Makes database `name` on `pg` and migrates it with the built binary (as an operator would); its URL. */
export const migratedDatabase = async (
  pg: PostgresHandle,
  name: string,
  upstreamUrl: string,
): Promise<string> => {
  const url = pg.createDatabase(name)
  const dir = tempDir("tollgate-usagedb-migrate-")
  const config = writeGatewayConfig({
    dir,
    upstreamUrl,
    keyHash: "0".repeat(64),
    sections: { usage: { file: "usage.jsonl", database: { url_env: DB_ENV } } },
  })
  const run = await runBinary(TOLLGATE, ["usage", "migrate", "--config", config], {
    [DB_ENV]: url,
    [UPSTREAM_KEY_ENV]: "sk",
  })
  expect(run.code, run.stderr).toBe(0)
  return url
}
