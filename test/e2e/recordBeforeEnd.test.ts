import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { decodeRecord } from "../../src/meter/record.js"
import { startFakeAndGateway, type Running } from "../support/processes.js"

/**
 * SPEC "Usage records": a record is appended before its response completes.
 * The records of one event-loop turn are written together and the responses
 * end after that write (ADR 0037); the client here is another process than
 * the built gateway, so it can see a response end the moment the gateway
 * sends it.
 */
describe("the usage record is in the file before the response ends", () => {
  const started: Array<Running> = []
  afterAll(async () => {
    for (const p of started) await p.stop("SIGKILL")
  })

  it("every client finds its record when its response has ended, with many responses ending in the same turns", async () => {
    const { dir, key, gateway } = await startFakeAndGateway("record-order", started)
    const file = join(dir, "usage.jsonl")
    const recorded = (id: string) =>
      readFileSync(file, "utf8")
        .split("\n")
        .some((line) => line !== "" && decodeRecord(line)?.request_id === id)

    const missing: Array<string> = []
    let checked = 0
    const one = async (i: number) => {
      const response = await fetch(`${gateway.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({
          model: "claude",
          max_tokens: 8,
          stream: i % 3 === 0,
          messages: [{ role: "user", content: `hello ${i}` }],
        }),
      })
      await response.text()
      // Read at once, before anything else runs in this process.
      const id = response.headers.get("x-request-id")!
      if (!recorded(id)) missing.push(id)
      checked++
    }
    for (let round = 0; round < 5; round++) await Promise.all(Array.from({ length: 60 }, (_, i) => one(i)))
    expect(checked).toBe(300)
    expect(missing).toEqual([])
  })
})
