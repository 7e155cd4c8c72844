import { afterEach, describe, expect, it } from "vitest"
import { failureTable, send, start } from "./failureTable.js"
import type { Harness } from "../support/harness.js"

for (const kind of ["anthropic", "openai"] as const) failureTable(kind, "memory")

describe("timeouts before the commit", () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
    h = undefined
  })

  it("first_token ends at the first body byte; a slow prelude is timed by idle, not first_token", async () => {
    // Events every 600 ms: the first byte after 0.6 s, the first content after ~2.4 s.
    h = await start("anthropic", {
      a: "delay:600,tokens:2",
      targets: 1,
      timeouts: { first_token: "1s", idle: "2s" },
    })
    const { response, text } = await send(h, "anthropic", { stream: true })
    expect(response.status).toBe(200)
    expect(text).toContain("message_stop")
  })

  it("a prelude that stalls longer than idle fails over before anything reached the client", async () => {
    // A prelude (message_start, ping, an empty block) at once, then nothing.
    h = await start("anthropic", { a: "hang-after:0-tokens", timeouts: { first_token: "10s", idle: "1s" } })
    const { response, text, ms } = await send(h, "anthropic", { stream: true })
    expect(response.status).toBe(200)
    expect(response.headers.get("x-tollgate-provider")).toBe("b")
    expect(text).toContain("message_stop")
    expect(text.match(/event: message_start/g)).toHaveLength(1)
    expect(ms).toBeLessThan(5_000)
  })
})

describe("retry budget", () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
    h = undefined
  })

  it("with budget_ratio 0, only 10 extra attempts happen; then the first response goes back unchanged", async () => {
    h = await start("anthropic", { a: "status:529", retry: { max_attempts: 3, budget_ratio: 0 } })
    const attempts: Array<string | null> = []
    for (let i = 0; i < 14; i++) {
      const { response } = await send(h, "anthropic")
      attempts.push(response.headers.get("x-tollgate-attempts"))
    }
    expect(attempts.slice(0, 10)).toEqual(Array(10).fill("2"))
    expect(attempts.slice(10)).toEqual(Array(4).fill("1"))
  })
})
