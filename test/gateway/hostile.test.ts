import { readFileSync } from "node:fs"
import { connect } from "node:net"
import { describe, expect, it } from "vitest"
import { join } from "node:path"
import { harnessForSuite, UPSTREAM_KEY_ENV } from "../support/harness.js"

/** First steps of issue #16: what a hostile tenant's odd bodies get (bounded answers, no 500). */
describe("hostile bodies", () => {
  const h = harnessForSuite()

  const post = async (path: string, body: string) => {
    const response = await fetch(`${h.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.key}`, "x-api-key": h.key, "content-type": "application/json" },
      body,
    })
    return { status: response.status, text: await response.text(), headers: response.headers }
  }

  it("a 1 MB model name is refused with 400 and echoed nowhere: answer, record and log stay small", async () => {
    const huge = "m".repeat(1024 * 1024)
    const before = readFileSync(h.config.usageFile, { flag: "a+" }).length
    for (const path of ["/v1/messages", "/v1/chat/completions", "/v1/responses"]) {
      const { status, text } = await post(path, JSON.stringify({ model: huge, max_tokens: 5, messages: [] }))
      expect(status).toBe(400)
      expect(text.length).toBeLessThan(500)
      expect(text).toContain("model: at most 256 bytes")
    }
    const written = readFileSync(h.config.usageFile).length - before
    expect(written).toBeLessThan(3 * 2_000)
    expect(h.records().at(-1)).toMatchObject({ status: 400, error: "invalid_request", route: "" })
  })

  it("a body nested 100,000 levels deep in content, system or tools is a 400, never a 500", async () => {
    const deep = "[".repeat(100_000) + "]".repeat(100_000)
    const bodies = [
      `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":${deep}}]}`,
      `{"model":"claude","max_tokens":5,"system":${deep},"messages":[{"role":"user","content":"hi"}]}`,
      `{"model":"claude","max_tokens":5,"tools":${deep},"messages":[{"role":"user","content":"hi"}]}`,
    ]
    for (const body of bodies) {
      const { status, text } = await post("/v1/messages", body)
      expect(status).toBe(400)
      expect(JSON.parse(text)).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    }
    const chat = await post(
      "/v1/chat/completions",
      `{"model":"gpt","messages":[{"role":"user","content":${deep}}]}`,
    )
    expect(chat.status).toBe(400)
    // The gateway still serves.
    const ok = await post(
      "/v1/messages",
      JSON.stringify({ model: "claude", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    )
    expect(ok.status).toBe(200)
  })

  it("a member Tollgate reads, given twice, is a 400 and reaches no provider", async () => {
    const before = h.fakes[0]!.requests().count
    for (const [path, body] of [
      [
        "/v1/messages",
        `{"model":"claude","max_tokens":1,"max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`,
      ],
      ["/v1/messages", `{"stream":false,"model":"claude","max_tokens":5,"stream":true,"messages":[]}`],
      ["/v1/chat/completions", `{"model":"gpt","model":"gpt","messages":[{"role":"user","content":"hi"}]}`],
      ["/v1/responses", `{"model":"gpt","input":"hi","max_output_tokens":1,"max_output_tokens":9}`],
    ] as const) {
      const { status, text } = await post(path, body)
      expect(status).toBe(400)
      expect(text).toMatch(/(max_tokens|stream|model|max_output_tokens): given more than once/)
    }
    expect(h.fakes[0]!.requests().count).toBe(before)
    // The same key inside a value (a message's text, a nested object) is not a duplicate.
    const ok = await post(
      "/v1/messages",
      JSON.stringify({
        model: "claude",
        max_tokens: 3,
        metadata: { user_id: "max_tokens" },
        messages: [{ role: "user", content: '"max_tokens" and "model"' }],
      }),
    )
    expect(ok.status).toBe(200)
  })

  it("failed authentications are counted in tollgate_auth_failures_total", async () => {
    const failures = async () => {
      const text = await (await fetch(`${h.url}/metrics`)).text()
      return Number(/^tollgate_auth_failures_total (\d+)$/m.exec(text)?.[1])
    }
    const before = await failures()
    expect(before).toBeGreaterThanOrEqual(0)
    for (const headers of [{}, { "x-api-key": "tg-wrong" }, { authorization: "Bearer nope" }]) {
      const response = await fetch(`${h.url}/v1/messages`, { method: "POST", headers, body: "{}" })
      expect(response.status).toBe(401)
    }
    expect((await fetch(`${h.url}/v1/models`, { headers: { authorization: "Bearer nope" } })).status).toBe(
      401,
    )
    expect(await failures()).toBe(before + 4)
  })

  it("what Node's parser refuses gets a body in the path's API format: 431 for huge headers, 400 for garbage", async () => {
    const raw = (text: string) =>
      new Promise<string>((resolve) => {
        const socket = connect(Number(new URL(h.url).port), "127.0.0.1")
        let received = ""
        socket.on("data", (chunk) => (received += chunk.toString("latin1")))
        socket.on("close", () => resolve(received))
        socket.on("error", () => resolve(received))
        socket.write(text)
      })
    const big = "x".repeat(20_000)
    const openai = await raw(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-big: ${big}\r\n\r\n`)
    expect(openai).toMatch(/^HTTP\/1\.1 431 /)
    expect(JSON.parse(openai.slice(openai.indexOf("\r\n\r\n") + 4))).toMatchObject({
      error: { type: "invalid_request_error", message: "the request headers are too large" },
    })
    const anthropic = await raw(`POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-big: ${big}\r\n\r\n`)
    expect(anthropic).toMatch(/^HTTP\/1\.1 431 /)
    expect(anthropic).toContain('{"type":"error","error":{"type":"invalid_request_error"')
    const garbage = await raw("NOT HTTP AT ALL\r\n\r\n")
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /)
    expect(garbage.toLowerCase()).toContain("connection: close")
    expect(garbage).toContain('"type":"invalid_request_error"')
  })

  it("a 413 for an announced oversize body closes the connection instead of reading on", async () => {
    const { port } = new URL(h.url)
    const socket = connect(Number(port), "127.0.0.1")
    let received = ""
    socket.on("data", (chunk) => (received += chunk.toString("latin1")))
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
    socket.write(
      `POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: ${h.key}\r\ncontent-type: application/json\r\n` +
        `content-length: ${h.config.server.maxBodyBytes + 1}\r\n\r\n{"model":"claude"`,
    )
    // What a client would send next on a reused connection must not be read as a new request.
    socket.write(`GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n`)
    await closed
    expect(received).toMatch(/^HTTP\/1\.1 413 /)
    expect(received.toLowerCase()).toContain("connection: close")
    expect(received).toContain('"type":"request_too_large"')
    expect(received.match(/HTTP\/1\.1 /g)).toHaveLength(1)
  })
})

describe("refusals count against the request limit", () => {
  const h = harnessForSuite({
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
      routes: {
        claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
      },
      tenants: {
        acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*", limits: { requests_per_minute: 3 } },
      },
    }),
  })

  it("unknown routes and bad bodies use up the limit; the next request gets 429 and reaches no provider", async () => {
    const send = (body: string) =>
      fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": h.key, "content-type": "application/json" },
        body,
      })
    const notFound = await send(JSON.stringify({ model: "no-such-route", max_tokens: 5, messages: [] }))
    expect(notFound.status).toBe(404)
    expect(notFound.headers.get("ratelimit-remaining")).toBe("2")
    expect((await send("not json")).status).toBe(400)
    expect((await send(JSON.stringify({ model: "m".repeat(300) }))).status).toBe(400)
    const valid = await send(
      JSON.stringify({ model: "claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }),
    )
    expect(valid.status).toBe(429)
    expect(h.fakes[0]!.requests().count).toBe(0)
    expect(h.records().map((r) => r.status)).toEqual([404, 400, 400, 429])
  })
})
