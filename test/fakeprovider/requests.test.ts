import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle, FakeRequestLog } from "../../fakeprovider/server.js"
import { chatBody, messagesBody, post, until } from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "log" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

const fetchLog = async (): Promise<FakeRequestLog> =>
  (await (await fetch(`${fake.url}/_fake/requests`)).json()) as FakeRequestLog

describe("GET /_fake/requests", () => {
  it("records method, path, lower-case headers, the parsed body and the bytes sent", async () => {
    const response = await post(fake, "/v1/messages?beta=true", messagesBody(), {
      headers: { "X-Api-Key": "sk-upstream", "Anthropic-Version": "2023-06-01" },
    })
    const text = await response.text()
    const log = await fetchLog()
    expect(log.count).toBe(1)
    const [entry] = log.recent
    expect(entry).toMatchObject({
      method: "POST",
      path: "/v1/messages?beta=true",
      body: messagesBody(),
      aborted: false,
      bytes_sent: Buffer.byteLength(text),
    })
    expect(entry?.headers["x-api-key"]).toBe("sk-upstream")
    expect(entry?.headers["anthropic-version"]).toBe("2023-06-01")
  })

  it("keeps a body that is not JSON as its raw text", async () => {
    const response = await post(fake, "/v1/chat/completions", "not json {")
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error")
    expect((await fetchLog()).recent[0]?.body).toBe("not json {")
  })

  it("keeps the last 100 requests, newest last, and counts all of them", async () => {
    for (let i = 0; i < 105; i++)
      await (await post(fake, "/v1/chat/completions", chatBody({ user: `u${i}` }))).text()
    const log = await fetchLog()
    expect(log.count).toBe(105)
    expect(log.recent).toHaveLength(100)
    expect(log.recent[0]?.body).toMatchObject({ user: "u5" })
    expect(log.recent[99]?.body).toMatchObject({ user: "u104" })
  })

  it("DELETE /_fake/requests resets the log", async () => {
    await (await post(fake, "/v1/messages", messagesBody())).text()
    const deleted = await fetch(`${fake.url}/_fake/requests`, { method: "DELETE" })
    expect(deleted.status).toBe(200)
    expect(await fetchLog()).toEqual({ count: 0, recent: [] })
    expect(fake.requests()).toEqual({ count: 0, recent: [] })
  })
})

describe("routing and headers", () => {
  it("answers unknown paths with a 404 JSON error that carries x-fake-name", async () => {
    const response = await fetch(`${fake.url}/v2/nothing`)
    expect(response.status).toBe(404)
    expect(response.headers.get("x-fake-name")).toBe("log")
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe("not_found_error")
  })

  it("rejects an x-fake-scenario that does not parse", async () => {
    const response = await post(fake, "/v1/messages", messagesBody(), { scenario: "explode" })
    expect(response.status).toBe(400)
    expect(await response.text()).toContain(`unknown item \\"explode\\"`)
  })

  it("rejects bodies the real APIs reject: no max_tokens, or a Vertex body without anthropic_version", async () => {
    const noMax = await post(fake, "/v1/messages", { model: "m", messages: [] })
    expect(noMax.status).toBe(400)
    expect(await noMax.json()).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: "max_tokens: Field required" },
    })
    const vertexPath = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-x:rawPredict"
    const noVersion = await post(fake, vertexPath, { max_tokens: 5, messages: [] })
    expect(noVersion.status).toBe(400)
    const ok = await post(fake, vertexPath, {
      max_tokens: 5,
      messages: [],
      anthropic_version: "vertex-2023-10-16",
    })
    expect(((await ok.json()) as { model: string }).model).toBe("claude-x")
  })

  it("streams Vertex streamRawPredict as Anthropic SSE with the URL's model", async () => {
    const path = "/v1/projects/p/locations/r/publishers/anthropic/models/claude-y%4020261001:streamRawPredict"
    const response = await post(fake, path, {
      max_tokens: 2,
      messages: [],
      anthropic_version: "vertex-2023-10-16",
    })
    expect(response.headers.get("content-type")).toContain("text/event-stream")
    expect(response.headers.get("request-id")).toMatch(/^req_/)
    expect(await response.text()).toContain(`"model":"claude-y@20261001"`)
  })

  it("close() ends hanging connections and stops listening", async () => {
    const other = await startFakeProvider({ scenario: "hang-before-headers" })
    const pending = post(other, "/v1/messages", messagesBody()).catch((error: unknown) => error)
    await until(() => (other.requests().count === 1 ? true : undefined))
    await other.close()
    expect(await pending).toBeInstanceOf(Error)
    expect(await fetch(`${other.url}/_fake/requests`).catch((error: unknown) => error)).toBeInstanceOf(Error)
  })
})
