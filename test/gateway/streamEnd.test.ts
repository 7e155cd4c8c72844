/**
 * How a stream ends when the upstream's end does not follow its final event at once: the client gets the final
 * event as soon as the upstream sends it (not when the upstream's body ends), and a failure after it ends the
 * stream with Tollgate's error event after the final event, never before or instead of it; a stream that came
 * whole in one upstream write ends the same way. The upstream is a real HTTP server of the test's own, sending
 * a real Anthropic event sequence. (#35 measured holding the final chunk for the end of the response, to send it
 * with the chunked terminator: no fewer writes under the bench's load, so the relay writes it as it comes.)
 */
import { createServer, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { defaultConfig, startHarness, type Harness } from "../support/harness.js"

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
type Ending = { readonly kind: "late"; readonly afterMs: number } | { readonly kind: "reset" }

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
    if (!upstream.together) res.write(events.slice(0, -1).join(""))
    // The final event on its own (or the whole stream), then the body's end as the test asks.
    setTimeout(() => {
      res.write(upstream.together ? events.join("") : events.at(-1)!)
      upstream.finalSentAt = performance.now()
      const ending = upstream.ending
      // A reset right after the final event (in the next turn).
      if (ending.kind === "reset") setImmediate(() => res.socket?.destroy())
      else
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
