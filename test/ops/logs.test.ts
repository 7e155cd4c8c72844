import { Cause, Effect, Logger, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import type { UsageRecord } from "../../src/meter/record.js"
import {
  formatLine,
  makeJsonLogger,
  makeLineWriter,
  MAX_BACKLOG_BYTES,
  type LineTarget,
} from "../../src/ops/logger.js"
import { FAKEPROVIDER, startBinary, TOLLGATE, startGateway, type Running } from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/** The line of an info entry with `message` at 2026-12-02T10:04:05.123Z, logged by a fiber with `annotations`. */
const lineOf = (message: unknown, annotations: Record<string, unknown> = {}): string =>
  Effect.runSync(
    Effect.withFiber((fiber) =>
      Effect.succeed(
        formatLine({
          message,
          logLevel: "Info",
          cause: Cause.empty,
          fiber,
          date: new Date("2026-12-02T10:04:05.123Z"),
        }),
      ),
    ).pipe(Effect.annotateLogs(annotations)),
  )

describe("the JSON log line", () => {
  it("has ts, level and message first, then annotations and the fields of a plain-object message part", () => {
    const line = lineOf(["request", { status: 200, error: null }], { tenant: "acme" })
    expect(line.endsWith("\n")).toBe(true)
    expect(line.indexOf("\n")).toBe(line.length - 1)
    const parsed = JSON.parse(line) as Record<string, unknown>
    expect(Object.keys(parsed).slice(0, 3)).toEqual(["ts", "level", "message"])
    expect(parsed).toEqual({
      ts: "2026-12-02T10:04:05.123Z",
      level: "info",
      message: "request",
      status: 200,
      error: null,
      tenant: "acme",
    })
  })

  it("never lets a field replace ts, level or message, and shows a Redacted value as <redacted>", () => {
    const parsed = JSON.parse(
      lineOf(["a", "b"], { message: "x", secret: Redacted.make("sk-hidden"), n: 10n }),
    ) as Record<string, unknown>
    expect(parsed).toMatchObject({ message: "a b", message_: "x", secret: "<redacted>", n: "10" })
    expect(JSON.stringify(parsed)).not.toContain("sk-hidden")
  })
})

/** A target that records its writes and completes them when told. */
const recordingTarget = (backlog = () => 0) => {
  const writes: Array<string> = []
  const pending: Array<() => void> = []
  const target: LineTarget = {
    write: (chunk, done) => {
      writes.push(chunk)
      pending.push(done)
    },
    backlog,
    close: () => {},
  }
  return { target, writes, complete: () => pending.splice(0).forEach((done) => done()) }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

describe("the line writer", () => {
  it("writes the lines of one event-loop turn in one write on the next turn", async () => {
    const { target, writes } = recordingTarget()
    const writer = makeLineWriter(target)
    writer.write("1\n")
    writer.write("2\n")
    writer.write("3\n")
    expect(writes).toEqual([])
    await nextTurn()
    expect(writes).toEqual(["1\n2\n3\n"])
    writer.write("4\n")
    await nextTurn()
    expect(writes).toEqual(["1\n2\n3\n", "4\n"])
  })

  it("close writes what is queued and waits until every write was handed to the OS", async () => {
    const { target, writes, complete } = recordingTarget()
    const writer = makeLineWriter(target)
    writer.write("a\n")
    let closed = false
    const closing = Effect.runPromise(writer.close).then(() => (closed = true))
    await nextTurn()
    expect(writes).toEqual(["a\n"])
    expect(closed).toBe(false)
    complete()
    await closing
    expect(closed).toBe(true)
    writer.write("after close\n")
    expect(writes).toEqual(["a\n", "after close\n"])
  })

  it("drops lines while stderr is not read, and the next log line says how many", async () => {
    let backlog = MAX_BACKLOG_BYTES + 1
    const { target, writes } = recordingTarget(() => backlog)
    const writer = makeLineWriter(target)
    writer.write("lost 1\n")
    writer.write("lost 2\n")
    await nextTurn()
    expect(writes).toEqual([])
    backlog = 0
    const logger = makeJsonLogger(writer)
    Effect.runSync(Effect.logWarning("back").pipe(Effect.provide(Logger.layer([logger]))))
    await nextTurn()
    const lines = writes
      .join("")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(lines).toMatchObject([
      { level: "warn", message: "log lines dropped: stderr was not being read", dropped: 2 },
      { level: "warn", message: "back" },
    ])
  })
})

describe("logs of the built binary", () => {
  const clientKey = generateKey()
  const wrongKey = generateKey()
  const upstreamKey = `sk-upstream-${randomBytes(12).toString("hex")}`
  const prompt = `zanzibar quokka ${randomBytes(8).toString("hex")} marmalade`
  let dir: string
  let fake: Running
  let gateway: Running
  let output = ""

  const post = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": clientKey, "content-type": "application/json", ...headers },
      body: JSON.stringify({ max_tokens: 8, messages: [{ role: "user", content: prompt }], ...body }),
    }).then(async (r) => ({ status: r.status, body: await r.text() }))

  beforeAll(async () => {
    if (!existsSync(TOLLGATE)) throw new Error("bin/tollgate is missing: run `npm run build` first")
    dir = tempDir("tollgate-logs-")
    fake = await startBinary(FAKEPROVIDER, ["-listen", "127.0.0.1:0"])
    gateway = await startGateway({
      dir,
      upstreamUrl: fake.url,
      keyHash: hashKey(clientKey),
      upstreamKey,
      server: { shutdown_grace: "2s" },
      tenant: { budgets: { month: { limit_usd: 0.000001, mode: "soft" } } },
    })

    expect((await post({ model: "claude" })).status).toBe(200)
    expect(
      (await post({ model: "claude", stream: true }, { authorization: `Bearer ${clientKey}` })).status,
    ).toBe(200)
    expect((await post({ model: "claude" }, { "x-fake-scenario": "status:500" })).status).toBe(500)
    expect((await post({ model: "no-such-route" })).status).toBe(404)
    expect((await post({ model: "claude" }, { "x-api-key": wrongKey })).status).toBe(401)

    expect(await gateway.stop("SIGTERM")).toBe(0)
    output = gateway.output()
  })

  afterAll(async () => {
    await gateway?.stop("SIGKILL")
    await fake?.stop("SIGKILL")
  })

  it("the upstream really got the upstream key and the prompt (so their absence below means something)", async () => {
    const seen = (await (await fetch(`${fake.url}/_fake/requests`)).json()) as {
      recent: Array<{ headers: Record<string, string>; body: unknown }>
    }
    expect(seen.recent.length).toBeGreaterThanOrEqual(3)
    for (const request of seen.recent) {
      expect(request.headers["x-api-key"]).toBe(upstreamKey)
      expect(JSON.stringify(request.body)).toContain(prompt)
    }
  })

  it("never prints a client key, the upstream key or the prompt", () => {
    expect(output).toContain("listening on")
    for (const secret of [clientKey, wrongKey, upstreamKey, prompt, prompt.split(" ")[2]!]) {
      expect(output).not.toContain(secret)
    }
  })

  it("prints only JSON lines with ts, level and message besides the listening line", () => {
    const lines = output.split("\n").filter((line) => line.length > 0)
    for (const line of lines) {
      if (line.startsWith("listening on ")) continue
      const parsed = JSON.parse(line) as Record<string, unknown>
      expect(Object.keys(parsed).slice(0, 3)).toEqual(["ts", "level", "message"])
      expect(parsed.ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    }
    expect(lines.some((line) => line.includes('"message":"soft budget exceeded"'))).toBe(true)
  })

  it("prints exactly one line per authenticated request, with the fields of its usage record", () => {
    const records = readFileSync(join(dir, "usage.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as UsageRecord)
    expect(records.map((r) => r.status)).toEqual([200, 200, 500, 404])
    const requestLines = output
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.message === "request")
    expect(requestLines).toHaveLength(records.length)
    for (const record of records) {
      const lines = requestLines.filter((line) => line.request_id === record.request_id)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toEqual({
        ts: expect.any(String),
        // An upstream 5xx relayed is an upstream failure: warn (issue #17).
        level: record.status >= 500 ? "warn" : "info",
        message: "request",
        request_id: record.request_id,
        tenant: "acme",
        key_id: "ci",
        route: record.route,
        provider: record.provider,
        model: record.model,
        attempts: record.attempts,
        status: record.status,
        duration_ms: record.duration_ms,
        cost_micro_usd: record.cost_micro_usd,
        error: record.error,
      })
    }
    expect(requestLines.map((line) => [line.status, line.attempts])).toEqual([
      [200, 1],
      [200, 1],
      [500, 2],
      [404, 0],
    ])
  })
})
