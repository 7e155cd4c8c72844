import Anthropic from "@anthropic-ai/sdk"
import { readFileSync, writeFileSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "../support/harness.js"
import { stringify } from "yaml"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import {
  FAKEPROVIDER,
  GATEWAY_UPSTREAM_KEY_ENV,
  startBinary,
  TOLLGATE,
  type Running,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

const MIB = 1024 * 1024
/** The gateway's buffer cap in this test: one tenant may hold half, 32 MiB. */
const MAX_BUFFERED = 64 * MIB
/** How much the gateway's peak RSS may grow over its RSS at rest while 500 uploads of 1 MB are held open. */
const RSS_GROWTH_BOUND_MB = 150

const procStatus = (pid: number, field: "VmRSS" | "VmHWM"): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${field}:`))!
  return Number(/(\d+)/.exec(line)![1]) / 1024
}

/** A raw HTTP/1.1 request on its own connection: what it has answered so far, and whether it closed. */
interface RawRequest {
  readonly socket: Socket
  answer: string
  closed: boolean
}

const open = (url: string, head: string, body?: Buffer): Promise<RawRequest> =>
  new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const socket = connect({ host: hostname, port: Number(port) })
    const raw: RawRequest = { socket, answer: "", closed: false }
    socket.on("data", (chunk) => (raw.answer += chunk.toString("latin1")))
    socket.on("close", () => (raw.closed = true))
    socket.on("error", () => {}) // a refused upload may end in a reset; the answer is what counts
    socket.once("connect", () => {
      socket.write(head)
      if (body !== undefined) socket.write(body)
      resolve(raw)
    })
    socket.once("error", reject)
  })

const until = (condition: () => boolean | Promise<boolean>, timeoutMs = 30_000) =>
  eventually(condition, timeoutMs)

const head = (key: string, lengthHeader: string) =>
  `POST /v1/messages HTTP/1.1\r\nhost: tollgate\r\nx-api-key: ${key}\r\nanthropic-version: 2023-06-01\r\n` +
  `content-type: application/json\r\n${lengthHeader}\r\n\r\n`

/**
 * Issue #16 against the built binary: one tenant holding 500 uploads of
 * 1 MB open (the attack that took the gateway from 114 MB to 1.15 GB) is
 * held to its half of `server.max_buffered_bytes`, the gateway's RSS stays
 * bounded, and another tenant is served meanwhile; an over-budget tenant's
 * upload is refused before its body is read.
 */
describe("running exposed: one tenant cannot take the memory", () => {
  let fake: Running
  let gateway: Running
  let dir: string
  const hog = generateKey()
  const calm = generateKey()
  const broke = generateKey()

  const metric = async (name: string): Promise<number> => {
    const text = await (await fetch(`${gateway.url}/metrics`)).text()
    const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    return line === undefined ? 0 : Number(line.split(" ").at(-1))
  }

  beforeAll(async () => {
    dir = tempDir("tollgate-exposed-")
    fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
    writeFileSync(
      join(dir, "pricing.yaml"),
      stringify({
        prices: [{ model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 }],
      }),
    )
    // `broke` has spent its month: one record of this month at its limit.
    const now = new Date()
    writeFileSync(
      join(dir, "usage.jsonl"),
      JSON.stringify({
        ts: now.toISOString(),
        request_id: "seed",
        tenant: "broke",
        key_id: "ci",
        route: "claude",
        endpoint: "/v1/messages",
        stream: false,
        provider: "fake",
        model: "claude-sonnet-5-5",
        attempts: 1,
        status: 200,
        input_tokens: 10,
        output_tokens: 10,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reserved_micro_usd: 1000,
        cost_micro_usd: 1000,
        usage_estimated: false,
        incomplete: false,
        session: null,
        duration_ms: 1,
        error: null,
        upstream_endpoint: "/v1/messages",
      }) + "\n",
    )
    const tenant = (key: string, extra: Record<string, unknown> = {}) => ({
      keys: [{ id: "ci", sha256: hashKey(key) }],
      routes: "*",
      ...extra,
    })
    writeFileSync(
      join(dir, "tollgate.yaml"),
      stringify({
        server: { listen: "127.0.0.1:0", max_buffered_bytes: MAX_BUFFERED },
        usage: { file: "usage.jsonl" },
        pricing: { file: "pricing.yaml" },
        sessions: { derive: false },
        providers: { fake: { kind: "anthropic", base_url: fake.url, api_key_env: GATEWAY_UPSTREAM_KEY_ENV } },
        routes: { claude: { api: "anthropic", targets: [{ provider: "fake", model: "claude-sonnet-5-5" }] } },
        tenants: {
          hog: tenant(hog),
          calm: tenant(calm),
          broke: tenant(broke, { budgets: { month: { limit_usd: 0.001, mode: "hard" } } }),
        },
      }),
    )
    gateway = await startBinary(TOLLGATE, ["serve", "--config", join(dir, "tollgate.yaml")], {
      [GATEWAY_UPSTREAM_KEY_ENV]: "sk-exposed",
    })
  })

  afterAll(async () => {
    await gateway?.stop("SIGKILL")
    await fake?.stop("SIGKILL")
  })

  const records = () =>
    readFileSync(join(dir, "usage.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { tenant: string; status: number; error: string | null })

  const ask = (key: string) =>
    new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 }).messages.create({
      model: "claude",
      max_tokens: 4,
      messages: [{ role: "user", content: "one two three" }],
    })

  it("500 held uploads of 1 MB: the tenant holds at most its half, RSS stays bounded, another tenant is served", async () => {
    const pid = gateway.child.pid!
    await ask(calm) // warm
    const restMb = procStatus(pid, "VmRSS")
    // A body one byte short of its declared length: the gateway waits for the last byte, holding the rest.
    const body = Buffer.from(
      `{"model":"claude","max_tokens":4,"messages":[{"role":"user","content":"${"a".repeat(MIB - 80)}`,
    )
    const declared = `content-length: ${body.length + 1}`
    const uploads: Array<RawRequest> = []
    for (let i = 0; i < 500; i++) uploads.push(await open(gateway.url, head(hog, declared), body))
    const held = Math.floor(MAX_BUFFERED / 2 / (body.length + 1))
    // A refused upload is answered 503 and closed at once (memory is short: the rest is not read), so a client
    // still sending may see a reset instead of the answer; the server's count is exact either way.
    const answered = () => uploads.filter((u) => u.answer.length > 0)
    const refusedSoFar = () => uploads.filter((u) => u.answer.length > 0 || u.closed)
    await until(() => refusedSoFar().length >= 500 - held).catch((error: unknown) => {
      // What a failure needs to be read: how far it got, and the gateway's own words.
      console.log(
        `answered ${answered().length}, refused ${refusedSoFar().length}; gateway:\n${gateway.output().slice(-2_000)}`,
      )
      throw error
    })
    expect(refusedSoFar().length).toBe(500 - held)
    expect(answered().length).toBeGreaterThan(0)
    for (const u of answered()) {
      expect(u.answer).toMatch(/^HTTP\/1\.1 503 /)
      expect(u.answer.toLowerCase()).toContain("retry-after: 1")
      expect(u.answer.toLowerCase()).toContain("connection: close")
      expect(u.answer).toContain('"type":"overloaded_error"')
    }
    // The held ones' bodies have arrived (all but their last byte) and are counted.
    await until(async () => (await metric("tollgate_buffered_bytes")) === held * (body.length + 1))
    // Another tenant is served meanwhile, as many times as it likes.
    for (let i = 0; i < 20; i++) expect((await ask(calm)).usage.output_tokens).toBe(4)
    const peakMb = procStatus(pid, "VmHWM")
    expect(peakMb - restMb).toBeLessThan(RSS_GROWTH_BOUND_MB)
    expect(await metric("tollgate_buffers_full_total")).toBe(500 - held)
    for (const u of uploads) u.socket.destroy()
    // Every upload has its record, and the held bytes are given back once they are written.
    await until(async () => (await metric("tollgate_buffered_bytes")) === 0)
    const hogs = records().filter((r) => r.tenant === "hog")
    expect(hogs.filter((r) => r.error === "buffers_full").length).toBe(500 - held)
    expect(hogs.length).toBe(500)
    console.log(`RSS at rest ${restMb.toFixed(0)} MB, peak ${peakMb.toFixed(0)} MB with ${held} uploads held`)
  }, 120_000)

  it("chunked uploads without a length are counted as they arrive and refused past the tenant's half", async () => {
    const chunk = Buffer.alloc(256 * 1024, 97)
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")])
    const uploads: Array<RawRequest> = []
    for (let i = 0; i < 60; i++) {
      const u = await open(gateway.url, head(hog, "transfer-encoding: chunked"))
      for (let j = 0; j < 4; j++) u.socket.write(frame) // 1 MiB, never ended
      uploads.push(u)
    }
    await until(() => uploads.filter((u) => u.answer.length > 0 || u.closed).length >= 60 - 32)
    expect(await metric("tollgate_buffered_bytes")).toBeLessThanOrEqual(MAX_BUFFERED / 2)
    for (const u of uploads.filter((x) => x.answer.length > 0)) expect(u.answer).toMatch(/^HTTP\/1\.1 503 /)
    expect((await ask(calm)).usage.output_tokens).toBe(4)
    for (const u of uploads) u.socket.destroy()
    await until(async () => (await metric("tollgate_buffered_bytes")) === 0)
  }, 60_000)

  it("an over-budget tenant's large upload is refused before its body is read", async () => {
    // The first request learns from the store that the month is spent.
    await expect(ask(broke)).rejects.toMatchObject({ status: 402 })
    const upload = await open(gateway.url, head(broke, `content-length: ${50 * MIB}`))
    // Answered with no byte of the upload sent; the connection is cut once the client has not sent it in time.
    await until(() => upload.answer.includes('"type":"budget_exceeded"'))
    expect(upload.answer).toMatch(/^HTTP\/1\.1 402 /)
    await until(() => upload.closed)
    const last = records().at(-1)!
    expect(last).toMatchObject({ tenant: "broke", status: 402, error: "budget_exceeded" })
  }, 30_000)
})
