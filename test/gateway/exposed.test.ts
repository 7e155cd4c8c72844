import { connect, type Socket } from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { harnessForSuite, UPSTREAM_KEY_ENV } from "../support/harness.js"

/** Route `claude` on fake 0 and tenant `acme` with `limits`; `more` adds top-level sections (and `server` keys). */
const exposedConfig =
  (
    limits: Record<string, unknown>,
    more: { server?: Record<string, unknown>; [section: string]: unknown } = {},
  ) =>
  (fakes: ReadonlyArray<string>, keyHash: string, dir: string) => ({
    ...more,
    server: { listen: "127.0.0.1:0", ...more.server },
    usage: { file: join(dir, "usage.jsonl") },
    providers: { anthropic: { kind: "anthropic", base_url: fakes[0], api_key_env: UPSTREAM_KEY_ENV } },
    routes: {
      claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
    },
    tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*", limits } },
  })

/** Issue #16, "Running it exposed": the concurrency cap, the body deadline and the connection cap, in process. */
describe("running exposed", () => {
  const h = harnessForSuite({
    config: exposedConfig(
      { concurrent_requests: 2, requests_per_minute: 1_000 },
      { server: { body_timeout: "1s", max_connections: 40 }, sessions: { derive: false } },
    ),
  })

  const post = (scenario = "", body?: string) =>
    fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": h.key,
        "content-type": "application/json",
        ...(scenario === "" ? {} : { "x-fake-scenario": scenario }),
      },
      body:
        body ??
        JSON.stringify({ model: "claude", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    })

  const raw = (text: string): Promise<{ socket: Socket; answer: () => string; closed: Promise<void> }> =>
    new Promise((resolve, reject) => {
      const url = new URL(h.url)
      const socket = connect({ host: url.hostname, port: Number(url.port) })
      let answer = ""
      socket.on("data", (c) => (answer += c.toString("latin1")))
      socket.on("error", () => {})
      const closed = new Promise<void>((done) => socket.on("close", () => done()))
      socket.once("connect", () => {
        if (text.length > 0) socket.write(text)
        resolve({ socket, answer: () => answer, closed })
      })
      socket.once("error", reject)
    })

  it("concurrent_requests: a third request while two are in flight gets 429 at once; it counts; the two finish", async () => {
    const slow = [post("delay:1500"), post("delay:1500")]
    // Both are in flight once the fake has them.
    const before = h.fakes[0]!.requests().count
    const deadline = Date.now() + 10_000
    while (h.fakes[0]!.requests().count < before + 2 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20))
    const started = Date.now()
    const third = await post()
    expect(third.status).toBe(429)
    expect(Date.now() - started).toBeLessThan(1_000)
    expect(third.headers.get("retry-after")).toBe("1")
    const body = (await third.json()) as { error: { type: string; message: string } }
    expect(body.error.type).toBe("rate_limit_error")
    expect(body.error.message).toContain("concurrent_requests")
    // The refusal was counted against the request limit (its headers say so) and has its record.
    expect(third.headers.get("ratelimit-limit")).toBe("1000")
    expect(h.records().at(-1)).toMatchObject({ status: 429, error: "rate_limited", route: "" })
    for (const response of await Promise.all(slow)) expect(response.status).toBe(200)
    // Their places are free again once their records are written.
    expect((await post()).status).toBe(200)
  })

  it("server.body_timeout: an upload that stalls gets 408 in the API's format and a record", async () => {
    const partial = '{"model":"claude","max_tokens":3,'
    const started = Date.now()
    const upload = await raw(
      `POST /v1/messages HTTP/1.1\r\nhost: t\r\nx-api-key: ${h.key}\r\ncontent-type: application/json\r\n` +
        `content-length: 100\r\n\r\n${partial}`,
    )
    await upload.closed
    const elapsed = Date.now() - started
    expect(elapsed).toBeGreaterThanOrEqual(900)
    expect(elapsed).toBeLessThan(5_000)
    expect(upload.answer()).toMatch(/^HTTP\/1\.1 408 /)
    expect(upload.answer()).toContain('"type":"invalid_request_error"')
    expect(upload.answer().toLowerCase()).toContain("connection: close")
    expect(h.records().at(-1)).toMatchObject({ status: 408, error: "body_timeout" })
  })

  it("server.max_connections: connections past the cap are closed as they arrive; freed places are reused", async () => {
    const held = await Promise.all(Array.from({ length: 40 }, () => raw("")))
    // Every place is taken: the next connection is closed without an answer.
    const extra = await raw("GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
    await extra.closed
    expect(extra.answer()).toBe("")
    for (const c of held) c.socket.destroy()
    await Promise.all(held.map((c) => c.closed))
    const deadline = Date.now() + 10_000
    let status = 0
    while (status !== 200 && Date.now() < deadline) {
      status = await fetch(`${h.url}/healthz`).then(
        (r) => r.status,
        () => 0,
      )
    }
    expect(status).toBe(200)
    const metrics = await (await fetch(`${h.url}/metrics`)).text()
    expect(metrics).toMatch(/^tollgate_connections_dropped_total [1-9]/m)
  })
})

describe("running exposed: a tenant over its request limit", () => {
  const h = harnessForSuite({ config: exposedConfig({ requests_per_minute: 1 }) })

  it("once the store refused it, its next upload is refused before the body is read, until the retry time", async () => {
    const body = JSON.stringify({
      model: "claude",
      max_tokens: 3,
      messages: [{ role: "user", content: "hi" }],
    })
    const send = () =>
      fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": h.key, "content-type": "application/json" },
        body,
      })
    expect((await send()).status).toBe(200)
    const storeRefusal = await send()
    expect(storeRefusal.status).toBe(429)
    // A 10 MB upload announced, not a byte of it sent: the answer comes anyway.
    const url = new URL(h.url)
    const socket = connect({ host: url.hostname, port: Number(url.port) })
    let answer = ""
    socket.on("data", (c) => (answer += c.toString("latin1")))
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    socket.write(
      `POST /v1/messages HTTP/1.1\r\nhost: t\r\nx-api-key: ${h.key}\r\ncontent-type: application/json\r\n` +
        `content-length: ${10 * 1024 * 1024}\r\n\r\n`,
    )
    const deadline = Date.now() + 10_000
    while (!answer.includes("requests_per_minute exceeded") && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10))
    socket.destroy()
    expect(answer).toMatch(/^HTTP\/1\.1 429 /)
    expect(answer).toContain("requests_per_minute exceeded")
    const retryAfter = Number(/retry-after: (\d+)/i.exec(answer)?.[1])
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(120)
    expect(h.records().at(-1)).toMatchObject({ status: 429, error: "rate_limited", route: "" })
  })
})

describe("running exposed: expect: 100-continue", () => {
  const h = harnessForSuite({ config: exposedConfig({ concurrent_requests: 1 }) })

  const exchange = async (send: (socket: Socket, answer: () => string) => Promise<void>) => {
    const url = new URL(h.url)
    const socket = connect({ host: url.hostname, port: Number(url.port) })
    let answer = ""
    socket.on("data", (c) => (answer += c.toString("latin1")))
    socket.on("error", () => {})
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    await send(socket, () => answer)
    return () => answer
  }

  const until = async (condition: () => boolean) => {
    const deadline = Date.now() + 10_000
    while (!condition()) {
      if (Date.now() > deadline) throw new Error("condition not met in time")
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  it("an admitted request gets 100 Continue, then its answer once the body is sent", async () => {
    const body = JSON.stringify({
      model: "claude",
      max_tokens: 3,
      messages: [{ role: "user", content: "hi" }],
    })
    const answer = await exchange(async (socket, answer) => {
      socket.write(
        `POST /v1/messages HTTP/1.1\r\nhost: t\r\nx-api-key: ${h.key}\r\ncontent-type: application/json\r\n` +
          `expect: 100-continue\r\ncontent-length: ${body.length}\r\n\r\n`,
      )
      await until(() => answer().startsWith("HTTP/1.1 100 Continue"))
      socket.write(body)
      await until(() => answer().includes('"usage"'))
      socket.destroy()
    })
    expect(answer()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
  })

  it("a request refused from its headers gets its answer instead of 100 Continue, and its upload is never sent", async () => {
    // The tenant's one place is taken by a slow request.
    const slow = fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": h.key, "content-type": "application/json", "x-fake-scenario": "delay:1000" },
      body: JSON.stringify({ model: "claude", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    })
    const before = h.fakes[0]!.requests().count
    await until(() => h.fakes[0]!.requests().count > before)
    const answer = await exchange(async (socket, answer) => {
      socket.write(
        `POST /v1/messages HTTP/1.1\r\nhost: t\r\nx-api-key: ${h.key}\r\ncontent-type: application/json\r\n` +
          `expect: 100-continue\r\ncontent-length: ${50 * 1024 * 1024}\r\n\r\n`,
      )
      await until(() => answer().includes("concurrent_requests"))
      socket.destroy()
    })
    expect(answer()).toMatch(/^HTTP\/1\.1 429 /)
    expect(answer()).not.toContain("100 Continue")
    expect((await slow).status).toBe(200)
  })
})
