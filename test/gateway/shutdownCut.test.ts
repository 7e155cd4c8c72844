import { createServer, type Server } from "node:http"
import { connect } from "node:net"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { eventually, startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * A request that asked to stream but got a JSON answer (an upstream that
 * answers `stream: true` with a sized JSON body) is cut by the drain like
 * any JSON answer: the client gets the bytes the upstream sent, never an
 * event-stream error event appended to a JSON body — which, with the
 * provider's content-length forwarded (ADR 0040), would also break the
 * connection's framing.
 */

const BODY_START = '{"type":"error","error":{"type":"invalid_request_error","message":"'

let upstream: Server | undefined
let h: Harness | undefined

afterEach(async () => {
  await h?.close()
  h = undefined
  upstream?.closeAllConnections()
  await new Promise((resolve) => upstream?.close(resolve) ?? resolve(undefined))
  upstream = undefined
})

describe("the drain cuts a committed JSON answer to a stream request", () => {
  it("destroys the response after the upstream's bytes, with no error event, and records the cut", async () => {
    // Answers with a JSON body of 1000 bytes, sends two parts 100 ms apart, then nothing more. (Tollgate holds
    // the latest chunk of a JSON body until the next one or the end, so the client sees the first part once
    // the second has arrived.)
    upstream = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(400, { "content-type": "application/json", "content-length": "1000" })
        res.write(BODY_START)
        setTimeout(() => res.write("more"), 100)
      })
    })
    await new Promise<void>((resolve) => upstream!.listen(0, "127.0.0.1", resolve))
    const address = upstream.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    h = await startHarness({
      config: (_urls, keyHash, dir) => ({
        server: { listen: "127.0.0.1:0", shutdown_grace: "100ms" },
        usage: { file: join(dir, "usage.jsonl") },
        providers: {
          raw: { kind: "anthropic", base_url: `http://127.0.0.1:${port}`, api_key_env: UPSTREAM_KEY_ENV },
        },
        routes: { claude: { api: "anthropic", targets: [{ provider: "raw", model: "claude-sonnet-5-5" }] } },
        tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
      }),
    })
    const url = new URL(h.url)
    const body = JSON.stringify({
      model: "claude",
      max_tokens: 10,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    })
    const socket = connect(Number(url.port), url.hostname)
    let received = ""
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("utf8")))
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
    socket.on("error", () => {})
    socket.write(
      `POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: ${h.key}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    )
    // Committed: the head and the first part reached the client.
    await eventually(() => received.includes(BODY_START))
    const gateway = h
    h = undefined
    await gateway.close()
    await closed
    const [head, rest] = received.split("\r\n\r\n")
    expect(head).toMatch(/^HTTP\/1\.1 400 /)
    expect(head!.toLowerCase()).toContain("content-length: 1000")
    expect(rest).toBe(BODY_START)
    expect(received).not.toContain("event:")
    // Cut short: incomplete, with the error it already had (the upstream's status).
    expect(gateway.records()).toMatchObject([{ status: 400, incomplete: true, error: "upstream_status_400" }])
  })
})
