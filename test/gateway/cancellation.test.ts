import { request, type IncomingMessage } from "node:http"
import { describe, expect, it } from "vitest"
import { eventually, harnessForSuite, type Harness } from "../support/harness.js"

const body = (model: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    model,
    max_tokens: 16,
    stream: true,
    messages: [{ role: "user", content: "hi" }],
    ...extra,
  })

/** Starts a max-tokens stream of `maxTokens` events through Tollgate; resolves its response, unread. */
const startStream = (h: Harness, maxTokens: number): Promise<IncomingMessage> => {
  const payload = body("claude", { max_tokens: maxTokens })
  const req = request(`${h.url}/v1/messages`, {
    method: "POST",
    headers: {
      "x-api-key": h.key,
      "content-type": "application/json",
      "x-fake-scenario": "max-tokens",
      "content-length": Buffer.byteLength(payload),
    },
  })
  const responded = new Promise<IncomingMessage>((resolve) => req.on("response", resolve))
  req.end(payload)
  return responded
}

describe("cancellation and backpressure", () => {
  const h = harnessForSuite()

  it("a client that aborts mid-stream closes the upstream connection within 1 s and still gets a usage record", async () => {
    h.fakes[0]!.reset()
    const controller = new AbortController()
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": h.key,
        "content-type": "application/json",
        "x-fake-scenario": "hang-after:2-tokens",
      },
      body: body("claude"),
      signal: controller.signal,
    })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    const first = await reader.read()
    expect(first.done).toBe(false)
    const abortedAt = performance.now()
    controller.abort()
    await eventually(() => h.fakes[0]!.requests().recent.at(-1)?.aborted === true, 1_000)
    expect(performance.now() - abortedAt).toBeLessThan(1_000)
    await eventually(() => h.records().some((r) => r.error === "client_disconnected"))
    const record = h.records().find((r) => r.error === "client_disconnected")!
    expect(record).toMatchObject({ status: 200, incomplete: true, stream: true })
    expect(record.input_tokens).toBeGreaterThan(0)
  })

  it("a client that stops reading makes Tollgate stop reading upstream (bounded memory)", async () => {
    h.fakes[0]!.reset()
    const res = await startStream(h, 1_000_000)
    res.pause() // never read
    const sent = () => h.fakes[0]!.requests().recent.at(-1)?.bytes_sent ?? 0
    // Wait until the upstream is stuck: no progress over 500 ms.
    let previous = -1
    await eventually(async () => {
      const now = sent()
      if (now === previous && now > 0) return true
      previous = now
      await new Promise((resolve) => setTimeout(resolve, 500))
      return false
    }, 20_000)
    // The full response would be ~100 MB; socket buffers on both hops plus the relay's one chunk in hand are far less.
    expect(sent()).toBeGreaterThan(0)
    expect(sent()).toBeLessThan(32 * 1024 * 1024)
    res.destroy()
  })

  it("a slow client that reads everything gets the whole stream and its end, though the upstream ends while Tollgate waits for the client", async () => {
    const tokens = 20_000
    const res = await startStream(h, tokens)
    // Reads in bursts with pauses, so Tollgate's writes back up and it pauses the upstream many times;
    // the upstream's end arrives while it is paused (queued), and must still reach the client.
    let text = ""
    let read = 0
    res.setEncoding("utf8")
    await new Promise<void>((resolve, reject) => {
      res.on("data", (chunk: string) => {
        text += chunk
        read += chunk.length
        if (read >= 256 * 1024) {
          read = 0
          res.pause()
          setTimeout(() => res.resume(), 30)
        }
      })
      res.on("end", resolve)
      res.on("error", reject)
    })
    expect(text.split("event: content_block_delta").length - 1).toBe(tokens)
    expect(text).toContain("event: message_stop")
    // This harness serves the other tests too: the record of this request is the one with its output.
    await eventually(() => h.records().some((r) => r.output_tokens === tokens))
    expect(h.records().find((r) => r.output_tokens === tokens)).toMatchObject({
      status: 200,
      incomplete: false,
      error: null,
      output_tokens: tokens,
    })
  })
})

describe("a client that leaves during its upload", () => {
  const h = harnessForSuite()

  it("is recorded as 499 client_disconnected, with nothing sent upstream", async () => {
    await new Promise<void>((resolve) => {
      const req = request(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": h.key, "content-type": "application/json", "content-length": "100000" },
      })
      req.on("error", () => resolve())
      req.on("close", () => resolve())
      req.write('{"model":"claude","messages":[')
      setTimeout(() => req.destroy(), 100)
    })
    await eventually(() => h.records().length === 1)
    expect(h.records()[0]).toMatchObject({ status: 499, error: "client_disconnected", provider: null })
    expect(h.fakes[0]!.requests().count).toBe(0)
  })
})
