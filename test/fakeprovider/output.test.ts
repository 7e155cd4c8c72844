import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText } from "../../fakeprovider/tokens.js"
import { chatBody, deltaCount, lastRequest, messagesBody, post, readUntil, until } from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "scenarios" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

describe("output scenarios", () => {
  it("no-usage leaves every usage field out", async () => {
    const json = (await (
      await post(fake, "/v1/messages", messagesBody(), { scenario: "no-usage" })
    ).json()) as Record<string, unknown>
    expect(json).not.toHaveProperty("usage")
    expect(json["content"]).toEqual([{ type: "text", text: outputText(10) }])
    const stream = await (
      await post(fake, "/v1/messages", messagesBody({ stream: true }), { scenario: "no-usage" })
    ).text()
    expect(stream).toContain("message_stop")
    expect(stream).not.toContain("usage")
    const chat = await (
      await post(
        fake,
        "/v1/chat/completions",
        chatBody({ stream: true, stream_options: { include_usage: true } }),
        {
          scenario: "no-usage",
        },
      )
    ).text()
    expect(chat).toContain("data: [DONE]")
    expect(chat).not.toContain("usage")
  })

  it("tokens:N gives exactly N tokens whatever max_tokens says", async () => {
    const many = (await (
      await post(fake, "/v1/messages", messagesBody({ max_tokens: 10 }), { scenario: "tokens:40" })
    ).json()) as { content: Array<{ text: string }>; usage: { output_tokens: number }; stop_reason: string }
    expect(many.content[0]?.text).toBe(outputText(40))
    expect(many.usage.output_tokens).toBe(40)
    expect(many.stop_reason).toBe("max_tokens")
    const few = (await (
      await post(fake, "/v1/chat/completions", chatBody({ max_tokens: 10 }), { scenario: "tokens:3" })
    ).json()) as { choices: Array<{ finish_reason: string }>; usage: { completion_tokens: number } }
    expect(few.usage.completion_tokens).toBe(3)
    expect(few.choices[0]?.finish_reason).toBe("stop")
  })

  it("max-tokens gives exactly max_tokens tokens", async () => {
    const response = await post(fake, "/v1/messages", messagesBody({ max_tokens: 50, stream: true }), {
      scenario: "max-tokens",
    })
    const text = await response.text()
    expect(deltaCount(text)).toBe(50)
    expect(text).toContain(`"usage":{"output_tokens":50}`)
    expect(text).toContain(`"stop_reason":"max_tokens"`)
  })

  it("delay:MS waits between stream events and before a non-stream response", async () => {
    const streamStart = performance.now()
    const stream = await post(fake, "/v1/messages", messagesBody({ max_tokens: 2, stream: true }), {
      scenario: "delay:60",
    })
    expect(deltaCount(await stream.text())).toBe(2)
    // 3 head events + 2 tokens + 3 tail events, each after 60 ms.
    expect(performance.now() - streamStart).toBeGreaterThanOrEqual(8 * 60 - 10)
    const jsonStart = performance.now()
    await (await post(fake, "/v1/chat/completions", chatBody(), { scenario: "delay:200" })).json()
    expect(performance.now() - jsonStart).toBeGreaterThanOrEqual(190)
  })

  it("combines items: tokens:40,delay:5", async () => {
    const start = performance.now()
    const text = await (
      await post(fake, "/v1/messages", messagesBody({ stream: true }), { scenario: "tokens:40,delay:5" })
    ).text()
    expect(deltaCount(text)).toBe(40)
    expect(performance.now() - start).toBeGreaterThanOrEqual(46 * 5 - 10)
  })

  it("streams a million tokens without holding the body, and stops writing when the client stops reading", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/messages", messagesBody({ stream: true }), {
      scenario: "tokens:1000000",
      signal: controller.signal,
    })
    await readUntil(response, (t) => deltaCount(t) >= 10)
    let previous = -1
    let stableRounds = 0
    const plateau = await until(() => {
      const sent = lastRequest(fake).bytes_sent
      stableRounds = sent === previous ? stableRounds + 1 : 0
      previous = sent
      return stableRounds >= 10 ? sent : undefined
    }, 20_000)
    // The whole stream is ~90 MB; a stalled reader holds only socket and client buffers.
    expect(plateau).toBeLessThan(16 * 1024 * 1024)
    controller.abort()
    await until(() => (lastRequest(fake).aborted ? true : undefined))
  })

  it("sends a million-token non-stream message as valid JSON", async () => {
    const response = await post(fake, "/v1/chat/completions", chatBody(), { scenario: "tokens:1000000" })
    const json = (await response.json()) as {
      choices: Array<{ message: { content: string } }>
      usage: { completion_tokens: number }
    }
    expect(json.usage.completion_tokens).toBe(1_000_000)
    const content = json.choices[0]?.message.content ?? ""
    expect(content.startsWith("tok0 tok1 ")).toBe(true)
    expect(content.endsWith("tok999999 ")).toBe(true)
  })
})
