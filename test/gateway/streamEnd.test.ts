/**
 * How a stream ends when the upstream's end does not follow its final event at once: the client gets the final
 * event as soon as the upstream sends it (not when the upstream's body ends), and a failure after it ends the
 * stream with Tollgate's error event after the final event, never before or instead of it; a stream that came
 * whole in one upstream write ends the same way. The upstream is a real HTTP server of the test's own, sending
 * a real Anthropic event sequence. A stream whose end came in the same upstream read as its last events
 * sends those events with the chunked terminator in one write (ADR 0077); one whose end comes later sends
 * them as they come.
 */
import { createServer, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { defaultConfig, startHarness, type Harness } from "../support/harness.js"
import { runCommand } from "../support/processes.js"

const sse = (event: string, data: object) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** A complete Anthropic stream of `tokens` one-word text deltas, 7 input tokens, `tokens` output tokens. */
const anthropicStream = (tokens: number): Array<string> => [
  sse("message_start", {
    type: "message_start",
    message: {
      id: "msg_final",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-5-5",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 7, output_tokens: 1 },
    },
  }),
  sse("content_block_start", {
    type: "content_block_start",
    index: 0,
    content_block: { type: "text", text: "" },
  }),
  ...Array.from({ length: tokens }, (_, i) =>
    sse("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: `w${i} ` },
    }),
  ),
  sse("content_block_stop", { type: "content_block_stop", index: 0 }),
  sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: "end_turn", stop_sequence: null },
    usage: { output_tokens: tokens },
  }),
  sse("message_stop", { type: "message_stop" }),
]

/** How the test upstream ends its body after the final event. */
type Ending =
  | { readonly kind: "late"; readonly afterMs: number }
  | { readonly kind: "reset" }
  /** The whole stream (an HTTP chunk per event) and the body's end in one write (one read at the gateway). */
  | { readonly kind: "whole" }

interface Upstream {
  readonly url: string
  /** When the last stream's final event was written (ms, `performance.now()`). */
  finalSentAt: number
  /** When the last stream's body was ended. */
  endedAt: number
  ending: Ending
  /** Send the whole stream in one write (it reaches the gateway before the commit, all pending). */
  together: boolean
  close(): Promise<void>
}

const startUpstream = async (): Promise<Upstream> => {
  const upstream: Upstream = {
    url: "",
    finalSentAt: 0,
    endedAt: 0,
    ending: { kind: "late", afterMs: 0 },
    together: false,
    close: () => new Promise<void>((done) => server.close(() => done())),
  }
  const answer = (res: ServerResponse) => {
    res.writeHead(200, { "content-type": "text/event-stream", "request-id": "req_final" })
    const events = anthropicStream(5)
    if (upstream.ending.kind === "whole") {
      // One HTTP chunk per event, all in one TCP write.
      res.socket?.cork()
      for (const event of events) res.write(event)
      res.end()
      res.socket?.uncork()
      return
    }
    if (!upstream.together) res.write(events.slice(0, -1).join(""))
    // The final event on its own (or the whole stream), then the body's end as the test asks.
    setTimeout(() => {
      res.write(upstream.together ? events.join("") : events.at(-1)!)
      upstream.finalSentAt = performance.now()
      const ending = upstream.ending
      // A reset right after the final event (in the next turn).
      if (ending.kind === "reset") setImmediate(() => res.socket?.destroy())
      else if (ending.kind === "late")
        setTimeout(() => {
          upstream.endedAt = performance.now()
          res.end()
        }, ending.afterMs)
    }, 20)
  }
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on("end", () => answer(res))
  })
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()))
  return Object.assign(upstream, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
}

/**
 * A raw HTTP/1.1 client (a script for its own process): sends the request twice on one connection, the
 * second once the first response's chunked body has ended, and prints each response's reads as JSON.
 */
const READER = `
import { connect } from "node:net"
const [url, request] = process.argv.slice(1)
const socket = connect(Number(new URL(url).port), "127.0.0.1")
const responses = []
let reads = []
const timer = setTimeout(() => { console.error("no end of the response: " + reads.join("")); process.exit(1) }, 5000)
socket.on("data", (chunk) => {
  reads.push(chunk.toString("latin1"))
  if (!reads.join("").endsWith("\\r\\n0\\r\\n\\r\\n")) return
  responses.push(reads)
  reads = []
  if (responses.length < 2) socket.write(request)
  else { clearTimeout(timer); process.stdout.write(JSON.stringify(responses)); socket.destroy() }
})
socket.write(request)
`

/** Reads a stream through the gateway, noting when the text first held `marker`. */
const readStream = async (h: Harness, marker: string) => {
  const response = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": h.key },
    body: JSON.stringify({
      model: "claude",
      max_tokens: 50,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    }),
  })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  let markerAt = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
    if (markerAt === 0 && text.includes(marker)) markerAt = performance.now()
  }
  return { text, markerAt, endedAt: performance.now() }
}

describe("the end of a stream whose upstream is slow to end or fails after its final event", () => {
  let upstream: Upstream
  let h: Harness
  beforeAll(async () => {
    upstream = await startUpstream()
    // The default config (route `claude` on one Anthropic provider) with the test's upstream for the fake.
    h = await startHarness({
      sharedFakes: [],
      config: (_fakes, keyHash, dir) => defaultConfig([upstream.url], keyHash, dir),
    })
  })
  afterAll(async () => {
    await h.close()
    await upstream.close()
  })

  it("relays the stream whole and metered when the upstream ends at once", async () => {
    upstream.ending = { kind: "late", afterMs: 0 }
    const { text } = await readStream(h, "message_stop")
    expect(text).toBe(anthropicStream(5).join(""))
    expect(h.records().at(-1)).toMatchObject({
      status: 200,
      input_tokens: 7,
      output_tokens: 5,
      incomplete: false,
      error: null,
    })
  })

  it("gives the client the final event on time when the upstream is slow to end its body", async () => {
    upstream.ending = { kind: "late", afterMs: 600 }
    const { text, markerAt, endedAt } = await readStream(h, "message_stop")
    expect(text).toBe(anthropicStream(5).join(""))
    // As the upstream sent it, not when its body ended 600 ms later; generous bounds.
    expect(markerAt - upstream.finalSentAt).toBeLessThan(300)
    expect(upstream.endedAt - markerAt).toBeGreaterThan(250)
    // The response itself ends once the upstream's body has.
    expect(endedAt).toBeGreaterThanOrEqual(upstream.endedAt)
    expect(h.records().at(-1)).toMatchObject({
      status: 200,
      output_tokens: 5,
      incomplete: false,
      error: null,
    })
  })

  it("does the same when the whole stream came in one upstream write", async () => {
    upstream.together = true
    try {
      upstream.ending = { kind: "late", afterMs: 0 }
      expect((await readStream(h, "message_stop")).text).toBe(anthropicStream(5).join(""))
      upstream.ending = { kind: "late", afterMs: 600 }
      const { text, markerAt } = await readStream(h, "message_stop")
      expect(text).toBe(anthropicStream(5).join(""))
      expect(markerAt - upstream.finalSentAt).toBeLessThan(300)
      expect(upstream.endedAt - markerAt).toBeGreaterThan(250)
      expect(h.records().at(-1)).toMatchObject({ status: 200, output_tokens: 5, incomplete: false })
    } finally {
      upstream.together = false
    }
  })

  it("sends a stream that came whole with its end as one chunk in one write, and the connection serves the next request", async () => {
    upstream.ending = { kind: "whole" }
    const body = JSON.stringify({
      model: "claude",
      max_tokens: 50,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    })
    const request =
      `POST /v1/messages HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n` +
      `x-api-key: ${h.key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    // The client is a process of its own, reading as the bytes come (in this process it would read only
    // once the gateway's turn is over, when every write of the turn is there): it prints each read.
    const { code, stdout, stderr } = await runCommand(
      process.execPath,
      ["--input-type=module", "-e", READER, h.url, request],
      { env: process.env },
    )
    expect(code, stderr).toBe(0)
    const responses = JSON.parse(stdout) as Array<Array<string>>
    expect(responses).toHaveLength(2)
    for (const reads of responses) {
      const text = reads.join("")
      expect(text.startsWith("HTTP/1.1 200")).toBe(true)
      expect(text).toContain("event: message_stop")
      // The final event is not left in a write of its own before the chunked terminator: one write carries
      // both (here the whole response, as the upstream's came in one read).
      const last = reads.at(-1)!
      expect(last).toContain("event: message_stop")
      expect(last.endsWith("\r\n0\r\n\r\n")).toBe(true)
      // The upstream's HTTP chunks of one read go out as one chunk of the same bytes (ADR 0078).
      const body = text.slice(text.indexOf("\r\n\r\n") + 4)
      const size = body.slice(0, body.indexOf("\r\n"))
      const stream = anthropicStream(5).join("")
      expect(Number.parseInt(size, 16)).toBe(Buffer.byteLength(stream))
      expect(body).toBe(`${size}\r\n${stream}\r\n0\r\n\r\n`)
    }
    expect(h.records().at(-1)).toMatchObject({ status: 200, output_tokens: 5, incomplete: false })
  })

  it("ends with the error event after the final event when the upstream fails after it", async () => {
    upstream.ending = { kind: "reset" }
    const { text } = await readStream(h, "message_stop")
    // The whole stream as sent, then Tollgate's error event for the reset: the final event once, before it.
    expect(text.startsWith(anthropicStream(5).join(""))).toBe(true)
    expect(text.slice(anthropicStream(5).join("").length)).toMatch(
      /^event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"upstream stream failed: connection_failed: [^"]+"\}\}\n\n$/,
    )
    expect(h.records().at(-1)).toMatchObject({
      status: 200,
      output_tokens: 5,
      incomplete: true,
      error: expect.stringMatching(/^connection_failed/),
    })
  })
})
