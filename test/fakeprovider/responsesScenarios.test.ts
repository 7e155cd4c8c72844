import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { parseScenario } from "../../fakeprovider/scenario.js"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText } from "../../fakeprovider/tokens.js"
import {
  lastRequest,
  post,
  readUntil,
  responsesBody,
  sseData,
  sseEvents,
  stillPending,
  until,
  expectHangBeforeHeaders,
} from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "responses-scenarios" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

const openai = () => new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test", maxRetries: 0 })

const deltaCount = (text: string): number =>
  sseEvents(text).filter((e) => e === "response.output_text.delta").length

const streamBody = (extra: Record<string, unknown> = {}) => responsesBody({ stream: true, ...extra })

describe("status and hang scenarios on /v1/responses", () => {
  it("status:429:7 answers 429 with retry-after and an OpenAI error body; the SDK sees a RateLimitError", async () => {
    const response = await post(fake, "/v1/responses", responsesBody(), { scenario: "status:429:7" })
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("7")
    expect(await response.json()).toEqual({
      error: { message: "Rate limited", type: "rate_limit_error", param: null, code: null },
    })
    const error = await openai()
      .responses.create({ model: "m", input: "x" }, { headers: { "x-fake-scenario": "status:503" } })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.InternalServerError)
  })

  it("hang-before-headers sends nothing until the client goes away", async () => {
    const entry = await expectHangBeforeHeaders(fake, (signal) =>
      post(fake, "/v1/responses", streamBody(), { scenario: "hang-before-headers", signal }),
    )
    expect(entry.bytes_sent).toBe(0)
  })

  it("hang-after:2-tokens streams two deltas, then no byte more until the client goes away", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/responses", streamBody(), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    const { text, reader } = await readUntil(
      response,
      (t) => t.includes(`"delta":"tok1 "`) && t.endsWith("\n\n"),
    )
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    expect(deltaCount(text)).toBe(2)
    expect(text).not.toContain("response.completed")
    controller.abort()
    await until(() => (lastRequest(fake).aborted ? true : undefined))
  })

  it("hang-after:2-tokens on JSON sends a prefix ending in the two tokens", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/responses", responsesBody(), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    const { text, reader } = await readUntil(response, (t) => t.includes("tok1 "))
    expect(text.endsWith(`"text":"tok0 tok1 `)).toBe(true)
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    controller.abort()
  })

  it("reset-after:2-tokens drops the connection: a stream read and a JSON body read both fail", async () => {
    const response = await post(fake, "/v1/responses", streamBody(), { scenario: "reset-after:2-tokens" })
    expect(response.status).toBe(200)
    expect(await response.text().catch((error: unknown) => error)).toBeInstanceOf(Error)
    const json = await post(fake, "/v1/responses", responsesBody(), { scenario: "reset-after:1-tokens" })
    expect(await json.text().catch((error: unknown) => error)).toBeInstanceOf(Error)
    expect(lastRequest(fake).aborted).toBe(false)
  })

  it("malformed-after:2-tokens ends with an event whose data is not JSON; the SDK fails on it", async () => {
    const text = await (
      await post(fake, "/v1/responses", streamBody(), { scenario: "malformed-after:2-tokens" })
    ).text()
    const data = sseData(text)
    expect(deltaCount(text)).toBe(3)
    expect(() => JSON.parse(data.at(-1) ?? "")).toThrow()
    expect(data.slice(0, -1).every((payload) => JSON.parse(payload) !== undefined)).toBe(true)
    const json = await (
      await post(fake, "/v1/responses", responsesBody(), { scenario: "malformed-after:1-tokens" })
    ).text()
    expect(() => JSON.parse(json)).toThrow()
    const quiet = new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test", maxRetries: 0, logLevel: "off" })
    const stream = quiet.responses.stream(
      { model: "m", input: "x" },
      { headers: { "x-fake-scenario": "malformed-after:2-tokens" } },
    )
    expect(await stream.finalResponse().catch((e: unknown) => e)).toBeInstanceOf(Error)
  })
})

describe("output scenarios on /v1/responses", () => {
  it("delay:MS waits before each stream event and before a JSON response", async () => {
    const start = performance.now()
    const text = await (
      await post(fake, "/v1/responses", streamBody({ max_output_tokens: 1 }), { scenario: "delay:40" })
    ).text()
    // 4 head events + 1 delta + 4 tail events, each after 40 ms.
    expect(sseEvents(text)).toHaveLength(9)
    expect(performance.now() - start).toBeGreaterThanOrEqual(9 * 40 - 10)
    const jsonStart = performance.now()
    await (await post(fake, "/v1/responses", responsesBody(), { scenario: "delay:150" })).json()
    expect(performance.now() - jsonStart).toBeGreaterThanOrEqual(140)
  })

  it("tokens:N gives exactly N tokens; incomplete only when N reaches max_output_tokens", async () => {
    const many = await openai().responses.create(
      { model: "m", input: "x" },
      { headers: { "x-fake-scenario": "tokens:40" } },
    )
    expect(many.output_text).toBe(outputText(40))
    expect(many.status).toBe("completed")
    expect(many.usage?.output_tokens).toBe(40)
    const capped = await openai().responses.create(
      { model: "m", input: "x", max_output_tokens: 10 },
      { headers: { "x-fake-scenario": "tokens:12" } },
    )
    expect(capped.status).toBe("incomplete")
    expect(capped.usage?.output_tokens).toBe(12)
  })

  it("max-tokens streams exactly max_output_tokens deltas and ends incomplete", async () => {
    const text = await (
      await post(fake, "/v1/responses", streamBody({ max_output_tokens: 50 }), { scenario: "max-tokens" })
    ).text()
    expect(deltaCount(text)).toBe(50)
    expect(sseEvents(text).at(-1)).toBe("response.incomplete")
    expect(JSON.parse(sseData(text).at(-1) ?? "")).toMatchObject({
      response: { usage: { output_tokens: 50 } },
    })
  })

  it("no-usage sends usage null in JSON and in every event", async () => {
    const json = (await (
      await post(fake, "/v1/responses", responsesBody(), { scenario: "no-usage" })
    ).json()) as {
      usage: unknown
      output_text?: string
    }
    expect(json.usage).toBeNull()
    const text = await (await post(fake, "/v1/responses", streamBody(), { scenario: "no-usage" })).text()
    expect(sseEvents(text).at(-1)).toBe("response.completed")
    expect(text).not.toContain(`"input_tokens"`)
    const final = await openai()
      .responses.stream({ model: "m", input: "x" }, { headers: { "x-fake-scenario": "no-usage" } })
      .finalResponse()
    expect(final.usage).toBeNull()
    expect(final.output_text).toBe(outputText(16))
  })

  it("a 200,000-token stream repeats the whole text in its final events as valid JSON", async () => {
    const response = await post(fake, "/v1/responses", streamBody(), { scenario: "tokens:200000" })
    const data = sseData(await response.text())
    const completed = JSON.parse(data.at(-1) ?? "") as {
      response: { output: Array<{ content: Array<{ text: string }> }> }
    }
    const text = completed.response.output[0]?.content[0]?.text ?? ""
    expect(text.length).toBe(outputText(200_000).length)
    expect(text.endsWith("tok199999 ")).toBe(true)
  })
})

describe("in-band errors on /v1/responses", () => {
  it("inband-error:TYPE streams response.created, then response.failed with the error", async () => {
    const response = await post(fake, "/v1/responses", streamBody(), {
      scenario: "inband-error:server_error",
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(sseEvents(text)).toEqual(["response.created", "response.failed"])
    expect(JSON.parse(sseData(text)[1] ?? "")).toMatchObject({
      type: "response.failed",
      sequence_number: 1,
      response: { status: "failed", error: { code: "server_error", message: "fake in-band server_error" } },
    })
    const other = await (
      await post(fake, "/v1/responses", streamBody(), { scenario: "inband-error:overloaded_error" })
    ).text()
    expect(JSON.parse(sseData(other)[1] ?? "")).toMatchObject({
      response: { error: { code: "server_error", message: "fake in-band overloaded_error" } },
    })
  })

  it("the SDK's stream helper ends with the failed response", async () => {
    const final = await openai()
      .responses.stream(
        { model: "m", input: "x" },
        { headers: { "x-fake-scenario": "inband-error:server_error" } },
      )
      .finalResponse()
    expect(final.status).toBe("failed")
    expect(final.error).toEqual({ code: "server_error", message: "fake in-band server_error" })
  })

  it("inband-error-event:TYPE streams response.created, then an error event the SDK raises", async () => {
    expect(parseScenario("inband-error-event:rate_limit_exceeded")).toMatchObject({
      inbandError: "rate_limit_exceeded",
      inbandErrorEvent: true,
    })
    const text = await (
      await post(fake, "/v1/responses", streamBody(), { scenario: "inband-error-event:rate_limit_exceeded" })
    ).text()
    expect(sseEvents(text)).toEqual(["response.created", "error"])
    expect(JSON.parse(sseData(text)[1] ?? "")).toEqual({
      type: "error",
      sequence_number: 1,
      code: "rate_limit_exceeded",
      message: "fake in-band rate_limit_exceeded",
      param: null,
    })
    const error = await openai()
      .responses.stream(
        { model: "m", input: "x" },
        { headers: { "x-fake-scenario": "inband-error-event:server_error" } },
      )
      .finalResponse()
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect((error as InstanceType<typeof OpenAI.APIError>).message).toContain("fake in-band server_error")
  })

  it("an in-band error on a JSON request is an error status", async () => {
    const response = await post(fake, "/v1/responses", responsesBody(), {
      scenario: "inband-error:rate_limit_error",
    })
    expect(response.status).toBe(429)
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe("rate_limit_error")
  })
})
