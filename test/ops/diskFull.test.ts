import { execFileSync } from "node:child_process"
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs"
import { join } from "node:path"
import { stringify } from "yaml"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { eventually } from "../support/harness.js"
import { FAKEPROVIDER, startBinary, TOLLGATE, type Running } from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * The usage file on a tiny filesystem that fills (issue #39, ADR 0070): the
 * built gateway keeps at most `usage.backlog_max_bytes` of records in
 * memory (default 4 MiB), drops and counts the rest, refuses the tenant with
 * a hard budget (503, retry-after) and says not ready while the backlog is
 * full, serves the other tenant throughout, logs the episode in a handful
 * of lines, and once the disk has room writes the backlog, in order, once.
 * The filesystem is a tmpfs the test mounts (as root, which the test
 * machines are; the test says so and fails where it cannot mount).
 */

const UPSTREAM_ENV = "TG_TEST_DISK_UPSTREAM_KEY"
const hard = generateKey()
const open = generateKey()
let fake: Running
let gateway: Running | undefined
let mountPoint = ""

beforeAll(async () => {
  fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
  mountPoint = join(tempDir("tollgate-diskfull-"), "disk")
  mkdirSync(mountPoint)
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=32m", "tmpfs", mountPoint], { stdio: "pipe" })
  } catch (error) {
    throw new Error(
      `this test mounts a 32 MiB tmpfs for the usage file and could not (run the suite as root): ${String((error as { stderr?: Buffer }).stderr ?? error)}`,
    )
  }
}, 30_000)

afterAll(async () => {
  await gateway?.stop("SIGKILL")
  await fake?.stop()
  if (mountPoint !== "") execFileSync("umount", ["-l", mountPoint], { stdio: "ignore" })
})

const rssMb = (pid: number): number =>
  Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024

const send = async (url: string, key: string, seq: number): Promise<Response> => {
  const response = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-api-key": key,
    },
    body: JSON.stringify({
      model: "claude",
      max_tokens: 4,
      messages: [{ role: "user", content: `n ${seq}` }],
    }),
  })
  await response.arrayBuffer()
  return response
}

const metric = async (url: string, name: string): Promise<number> => {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith(`${name} `))
  return line === undefined ? Number.NaN : Number(line.split(" ")[1])
}

describe("the usage file on a disk that fills", () => {
  it("20,000 requests after the disk is full: RSS within +20 MB, the hard-budget tenant refused and /readyz not ready while the backlog is full, then the backlog written once, in order", async () => {
    const dir = tempDir("tollgate-diskfull-config-")
    writeFileSync(
      join(dir, "pricing.yaml"),
      stringify({ prices: [{ model: "claude-sonnet-5-5", input: 3, output: 15 }] }),
    )
    const config = join(dir, "tollgate.yaml")
    writeFileSync(
      config,
      stringify({
        server: { listen: "127.0.0.1:0" },
        usage: { file: join(mountPoint, "usage.jsonl") },
        pricing: { file: "pricing.yaml" },
        providers: { fake: { kind: "anthropic", base_url: fake.url, api_key_env: UPSTREAM_ENV } },
        routes: { claude: { api: "anthropic", targets: [{ provider: "fake", model: "claude-sonnet-5-5" }] } },
        tenants: {
          hardco: {
            keys: [{ id: "h", sha256: hashKey(hard) }],
            routes: "*",
            budgets: { month: { limit_usd: 1000, mode: "hard" } },
          },
          openco: { keys: [{ id: "o", sha256: hashKey(open) }], routes: "*" },
        },
      }),
    )
    gateway = await startBinary(TOLLGATE, ["serve", "--config", config], { [UPSTREAM_ENV]: "sk-disk" })
    const url = gateway.url
    const pid = gateway.child.pid!
    let seq = 0
    // Warm: the same requests as after the disk fills (20,000 of the open tenant, a hard one every 500), so that
    // the only difference between `before` and `after` is the full disk. RSS follows the highest heap so far
    // (ADR 0068), so `before` is the highest RSS of the warm-up, sampled every 2,000 requests.
    let before = 0
    for (let i = 0; i < 20_000; i++) {
      expect((await send(url, open, seq++)).status).toBe(200)
      if (i % 500 === 499) expect((await send(url, hard, seq++)).status).toBe(200)
      if (i % 2_000 === 1_999) before = Math.max(before, rssMb(pid))
    }

    // The rest of the disk taken by another file, to the last byte.
    const filler = join(mountPoint, "filler")
    const fd = openSync(filler, "w")
    for (const size of [1024 * 1024, 4096, 1]) {
      const chunk = Buffer.alloc(size, 120)
      try {
        for (;;) writeSync(fd, chunk)
      } catch {
        // full at this chunk size: on with a smaller one
      }
    }
    closeSync(fd)
    const firstAfterFill = seq
    const filledAt = Date.now()
    let refusedHard = 0
    for (let i = 0; i < 20_000; i++) {
      const response = await send(url, open, seq++)
      expect(response.status).toBe(200)
      if (i % 500 === 499) {
        const refusal = await send(url, hard, seq++)
        const ready = await fetch(`${url}/readyz`)
        const body = (await ready.json()) as { status: string; usage_log?: string }
        if ((await metric(url, "tollgate_usage_records_dropped_total")) > 0) {
          // The backlog is full: the hard budget waits (its spend cannot be proven), /readyz moves traffic away.
          expect(refusal.status).toBe(503)
          expect(refusal.headers.get("retry-after")).toBe("5")
          expect(ready.status).toBe(503)
          expect(body).toEqual({ status: "not_ready", store: "ok", usage_log: "full" })
          refusedHard++
        } else {
          expect(refusal.status).toBe(200)
          expect(ready.status).toBe(200)
        }
      }
    }
    expect(refusedHard).toBeGreaterThan(0)
    const backlogBytes = await metric(url, "tollgate_usage_backlog_bytes")
    expect(backlogBytes).toBeLessThanOrEqual(4 * 1024 * 1024)
    expect(await metric(url, "tollgate_usage_backlog_records")).toBeGreaterThan(5_000)
    const dropped = await metric(url, "tollgate_usage_records_dropped_total")
    expect(dropped).toBeGreaterThan(0)
    const after = rssMb(pid)
    console.log(
      `disk full: RSS ${before.toFixed(1)} → ${after.toFixed(1)} MB; backlog ${backlogBytes} bytes; dropped ${dropped}`,
    )
    expect(after - before).toBeLessThan(20)

    // Room again: the backlog is written at the next retry (once a second).
    rmSync(filler)
    await eventually(async () => (await metric(url, "tollgate_usage_backlog_records")) === 0, 10_000)
    expect((await fetch(`${url}/readyz`)).status).toBe(200)
    expect((await send(url, hard, seq++)).status).toBe(200)
    const records = readFileSync(join(mountPoint, "usage.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as UsageRecord)
    // Every request is in the file exactly once or counted as dropped.
    const ids = records.map((r) => r.request_id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(records.length + dropped).toBe(seq)
    // In order: the requests were sent one after another, so the times they arrived only rise in the file.
    const times = records.map((r) => Date.parse(r.ts))
    expect(times.every((t, i) => i === 0 || t >= times[i - 1]!)).toBe(true)
    // What came before the disk filled is all there: the records dropped are among the newest.
    expect(records.filter((r) => Date.parse(r.ts) < filledAt).length).toBe(firstAfterFill)
    // The episode in a handful of lines.
    const episodeLines = gateway
      .output()
      .split("\n")
      .filter((l) => l.includes('"message":"usage file') || l.includes('"message":"usage backlog'))
    expect(episodeLines.length).toBeGreaterThanOrEqual(3)
    expect(episodeLines.length).toBeLessThanOrEqual(5)
    expect(episodeLines[0]).toContain("ENOSPC")
  }, 240_000)
})
