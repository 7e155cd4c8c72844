import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { eventually } from "../support/harness.js"
import { startPostgres, type PostgresHandle } from "../support/postgres.js"
import {
  FAKEPROVIDER,
  GATEWAY_UPSTREAM_KEY_ENV,
  startBinary,
  TOLLGATE,
  writeGatewayConfig,
  type Running,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"
import { DB_ENV, migratedDatabase } from "./fixtures.js"

/**
 * The built gateway killed with -9 in the middle of requests, then started
 * again on the same usage file: the table ends equal to the file, each
 * record once (what was inserted before the kill but not checkpointed is
 * sent again and dropped by the primary key).
 */

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

const send = async (url: string, key: string, i: number): Promise<number> => {
  try {
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 8,
        stream: i % 10 === 0,
        messages: [{ role: "user", content: `request ${i}` }],
      }),
    })
    await response.arrayBuffer()
    return response.status
  } catch {
    return 0 // the connection died with the gateway
  }
}

describe("a copy killed with -9", () => {
  it("started again, it sends what the database had not confirmed; the table equals the file, no row twice", async () => {
    const url = await migratedDatabase(pg, "killed", fake.url)
    const dir = tempDir("tollgate-usagedb-kill-")
    const key = generateKey()
    const config = writeGatewayConfig({
      dir,
      upstreamUrl: fake.url,
      keyHash: hashKey(key),
      sections: { usage: { file: "usage.jsonl", database: { url_env: DB_ENV } } },
    })
    const env = { [DB_ENV]: url, [GATEWAY_UPSTREAM_KEY_ENV]: "sk-test" }
    const first = await startBinary(TOLLGATE, ["serve", "--config", config], env)
    running.push(first)
    // Load in waves of 20 until well past one checkpoint, then the kill in the middle of a wave.
    let sent = 0
    for (let wave = 0; wave < 10; wave++) {
      await Promise.all(Array.from({ length: 20 }, () => send(first.url, key, sent++)))
    }
    const inFlight = Promise.all(Array.from({ length: 40 }, () => send(first.url, key, sent++)))
    await new Promise((resolve) => setTimeout(resolve, 20))
    first.child.kill("SIGKILL")
    await first.exited
    await inFlight

    const second = await startBinary(TOLLGATE, ["serve", "--config", config], env)
    running.push(second)
    for (let i = 0; i < 30; i++) expect(await send(second.url, key, sent++)).toBe(200)
    // The kill may tear the line being written: that line is no record (the gateway skips it, and so does the
    // database writer), so it is left out here too, and there is at most one.
    let torn = 0
    const file = (): Array<UsageRecord> =>
      readFileSync(join(dir, "usage.jsonl"), "utf8")
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .flatMap((line) => {
          try {
            return [JSON.parse(line) as UsageRecord]
          } catch {
            torn++
            return []
          }
        })
    const ids = file().map((r) => r.request_id)
    expect(torn).toBeLessThanOrEqual(1)
    expect(ids.length).toBeGreaterThanOrEqual(230)
    await eventually(
      () => Number(pg.psql("SELECT count(*) FROM tollgate_usage", "killed")) === ids.length,
      20_000,
    )
    expect(pg.psql("SELECT count(DISTINCT request_id) FROM tollgate_usage", "killed")).toBe(
      String(ids.length),
    )
    const inTable = new Set(
      pg.psql("SELECT string_agg(request_id, ',') FROM tollgate_usage", "killed").split(","),
    )
    expect(ids.filter((id) => !inTable.has(id))).toEqual([])
    expect(pg.psql("SELECT sum(requests) FROM tollgate_usage_hourly", "killed")).toBe(String(ids.length))
    expect(await second.stop()).toBe(0)
  }, 90_000)
})
