import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import {
  chatBody,
  deltaCount,
  lastRequest,
  messagesBody,
  post,
  readUntil,
  sseData,
  stillPending,
  until,
} from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "scenarios" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

describe("status scenarios", () => {
  it("status:429:7 answers 429 with retry-after and a rate_limit_error body", async () => {
    const response = await post(fake, "/v1/messages", messagesBody(), { scenario: "status:429:7" })
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("7")
    expect(response.headers.get("request-id")).toMatch(/^req_/)
    expect(await response.json()).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: "Rate limited" },
    })
  })

  it("maps 529, 500 and 400 to overloaded_error, api_error and invalid_request_error, without retry-after", async () => {
    for (const [status, type] of [
      [529, "overloaded_error"],
      [500, "api_error"],
      [400, "invalid_request_error"],
    ] as const) {
      const response = await post(fake, "/v1/messages", messagesBody(), { scenario: `status:${status}` })
      expect(response.status).toBe(status)
      expect(response.headers.has("retry-after")).toBe(false)
      const body = (await response.json()) as { error: { type: string } }
      expect(body.error.type).toBe(type)
    }
  })

  it("answers OpenAI paths with the OpenAI error shape and x-request-id", async () => {
    const response = await post(fake, "/v1/chat/completions", chatBody(), { scenario: "status:503" })
    expect(response.status).toBe(503)
    expect(response.headers.get("x-request-id")).toMatch(/^req_/)
    expect(await response.json()).toEqual({
      error: { message: "fake status 503", type: "server_error", param: null, code: null },
    })
  })

  it("takes the server-wide scenario unless the header overrides it", async () => {
    const failing = await startFakeProvider({ scenario: "status:529", name: "primary" })
    try {
      const first = await post(failing, "/v1/messages", messagesBody())
      expect(first.status).toBe(529)
      expect(first.headers.get("x-fake-name")).toBe("primary")
      await first.text()
      const second = await post(failing, "/v1/messages", messagesBody(), { scenario: "ok" })
      expect(second.status).toBe(200)
      await second.text()
    } finally {
      await failing.close()
    }
  })

  it("error-body-stall sends the status and headers, then never finishes the body", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/messages", messagesBody(), {
      scenario: "error-body-stall:503:2",
      signal: controller.signal,
    })
    expect(response.status).toBe(503)
    expect(response.headers.get("retry-after")).toBe("2")
    const { text, reader } = await readUntil(response, (t) => t.length > 0)
    expect(text.startsWith(`{"type":"error"`)).toBe(true)
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    controller.abort()
    await until(() => (lastRequest(fake).aborted ? true : undefined))
  })
})

describe("hang and failure scenarios", () => {
  it("hang-before-headers sends nothing until the client aborts, then logs the request as aborted", async () => {
    const controller = new AbortController()
    const pending = post(fake, "/v1/messages", messagesBody(), {
      scenario: "hang-before-headers",
      signal: controller.signal,
    }).catch((error: unknown) => error)
    expect(await stillPending(pending, 300)).toBe("pending")
    expect(lastRequest(fake).aborted).toBe(false)
    controller.abort()
    expect(await pending).toBeInstanceOf(Error)
    const entry = await until(() => (lastRequest(fake).aborted ? lastRequest(fake) : undefined))
    expect(entry.bytes_sent).toBe(0)
  })

  it("hang-after:2-tokens streams two tokens, then waits until the client goes away", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/messages", messagesBody({ stream: true }), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    const { text, reader } = await readUntil(response, (t) => t.includes(`"tok1 "}}\n\n`))
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    expect(deltaCount(text)).toBe(2)
    expect(text).not.toContain("message_stop")
    controller.abort()
    const entry = await until(() => (lastRequest(fake).aborted ? lastRequest(fake) : undefined))
    expect(entry.bytes_sent).toBe(new TextEncoder().encode(text).length)
  })

  it("hang-after:2-tokens on a non-stream request sends a JSON prefix with two tokens", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/messages", messagesBody(), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    expect(response.status).toBe(200)
    const { text, reader } = await readUntil(response, (t) => t.includes("tok1 "))
    expect(text.endsWith(`"text":"tok0 tok1 `)).toBe(true)
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    controller.abort()
  })

  it("reset-after:2-tokens drops the connection after two tokens without marking the request aborted", async () => {
    const response = await post(fake, "/v1/messages", messagesBody({ stream: true }), {
      scenario: "reset-after:2-tokens",
    })
    const { text, reader } = await readUntil(response, (t) => t.includes(`"tok1 "}}\n\n`))
    const rest = await (async () => {
      for (;;) {
        const { done } = await reader.read()
        if (done) return "ended"
      }
    })().catch((error: unknown) => error)
    expect(rest).toBeInstanceOf(Error)
    expect(deltaCount(text)).toBe(2)
    const entry = await until(() => (lastRequest(fake).bytes_sent > 0 ? lastRequest(fake) : undefined))
    expect(entry.aborted).toBe(false)
  })

  it("reset-after:1-tokens on a non-stream request fails the body read", async () => {
    const response = await post(fake, "/v1/chat/completions", chatBody(), {
      scenario: "reset-after:1-tokens",
    })
    expect(response.status).toBe(200)
    expect(await response.text().catch((error: unknown) => error)).toBeInstanceOf(Error)
  })

  it("malformed-after:2-tokens sends two tokens, an event whose data is not JSON, then ends", async () => {
    const response = await post(fake, "/v1/messages", messagesBody({ stream: true }), {
      scenario: "malformed-after:2-tokens",
    })
    const text = await response.text()
    expect(deltaCount(text)).toBe(3)
    const data = sseData(text)
    expect(() => JSON.parse(data.at(-1) ?? "")).toThrow()
    expect(data.slice(0, -1).every((payload) => JSON.parse(payload) !== undefined)).toBe(true)
    expect(text).not.toContain("message_stop")
  })

  it("malformed-after:2-tokens on OpenAI streams ends without [DONE]", async () => {
    const response = await post(fake, "/v1/chat/completions", chatBody({ stream: true }), {
      scenario: "malformed-after:2-tokens",
    })
    const data = sseData(await response.text())
    expect(data).toHaveLength(4)
    expect(() => JSON.parse(data[3] ?? "")).toThrow()
    expect(data).not.toContain("[DONE]")
  })

  it("malformed-after on a non-stream request ends with a body that is not JSON", async () => {
    const response = await post(fake, "/v1/messages", messagesBody(), {
      scenario: "malformed-after:3-tokens",
    })
    const text = await response.text()
    expect(text).toContain("tok0 tok1 tok2 ")
    expect(() => JSON.parse(text)).toThrow()
  })

  it("inband-error on an OpenAI stream sends the role chunk, then an error payload, and no [DONE]", async () => {
    const response = await post(fake, "/v1/chat/completions", chatBody({ stream: true }), {
      scenario: "inband-error:server_error",
    })
    expect(response.status).toBe(200)
    const data = sseData(await response.text())
    expect(data).toHaveLength(2)
    expect(JSON.parse(data[1] ?? "")).toEqual({
      error: { message: "fake in-band server_error", type: "server_error", param: null, code: null },
    })
  })

  it("inband-error on an Anthropic stream sends message_start, ping and an error event", async () => {
    const response = await post(fake, "/v1/messages", messagesBody({ stream: true }), {
      scenario: "inband-error:overloaded_error",
    })
    const events = (await response.text()).split("\n").filter((line) => line.startsWith("event: "))
    expect(events).toEqual(["event: message_start", "event: ping", "event: error"])
  })
})
