import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { startFakeAndGateway, type Running } from "../support/processes.js"

/** TestServeSIGTERM: the real signal to the built binary, with streams open. */

const stream = (url: string, key: string, scenario: string) =>
  fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "x-fake-scenario": scenario },
    body: JSON.stringify({
      model: "claude",
      max_tokens: 500,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    }),
  })

/** Reads a streaming body to its end; resolves with the text, and when the first chunk arrived. */
const readAll = async (response: Response, firstChunk: () => void) => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  for (;;) {
    const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }))
    if (done) return text
    if (text === "") firstChunk()
    text += decoder.decode(value, { stream: true })
  }
}

describe("TestServeSIGTERM", () => {
  const started: Array<Running> = []
  afterAll(async () => {
    for (const p of started) await p.stop("SIGKILL")
  })

  it("drains: /readyz 503, new requests 503, short streams finish, long ones get the error event at the grace, exit 0", async () => {
    const { dir, key, gateway } = await startFakeAndGateway("sigterm", started, {
      provider: "a",
      server: { shutdown_grace: "2s" },
    })

    // A short stream (~0.6 s) and a long one (~20 s), both open when the signal arrives.
    let shortStarted!: () => void
    let longStarted!: () => void
    const shortFirst = new Promise<void>((r) => (shortStarted = r))
    const longFirst = new Promise<void>((r) => (longStarted = r))
    const shortText = stream(gateway.url, key, "tokens:12,delay:50").then((r) => readAll(r, shortStarted))
    const longText = stream(gateway.url, key, "tokens:400,delay:50").then((r) => readAll(r, longStarted))
    await Promise.all([shortFirst, longFirst])

    const signalled = performance.now()
    gateway.child.kill("SIGTERM")
    // Give the process a moment to see the signal; then it must still answer, as draining.
    await new Promise((r) => setTimeout(r, 100))
    const ready = await fetch(`${gateway.url}/readyz`)
    expect(ready.status).toBe(503)
    expect(await ready.json()).toEqual({ status: "draining" })
    const refused = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }),
    })
    expect(refused.status).toBe(503)
    expect(refused.headers.get("connection")).toBe("close")
    expect(await refused.json()).toMatchObject({ type: "error", error: { type: "overloaded_error" } })

    const short = await shortText
    expect(short).toContain("event: message_stop")
    const long = await longText
    expect(long).not.toContain("message_stop")
    expect(long).toMatch(/event: error\ndata: \{"type":"error","error":\{"type":"overloaded_error"/)

    const code = await gateway.exited
    const elapsed = performance.now() - signalled
    expect(code).toBe(0)
    expect(elapsed).toBeGreaterThan(1_500)
    expect(elapsed).toBeLessThan(10_000)

    const records = readFileSync(join(dir, "usage.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(records).toHaveLength(3)
    expect(records.filter((r) => r.status === 503)).toHaveLength(1)
    expect(records.filter((r) => r.error === "shutdown")).toHaveLength(1)
    expect(records.find((r) => r.error === "shutdown")).toMatchObject({ incomplete: true, stream: true })
  })
})
