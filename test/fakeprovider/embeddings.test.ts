import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import {
  embeddingsBody,
  lastRequest,
  post,
  readUntil,
  stillPending,
  expectHangBeforeHeaders,
} from "./helpers.js"

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "embeddings" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

const openai = () => new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "sk-test", maxRetries: 0 })

interface EmbeddingList {
  object: string
  data: Array<{ object: string; index: number; embedding: Array<number> | string }>
  model: string
  usage?: { prompt_tokens: number; total_tokens: number }
}

const norm = (vector: ReadonlyArray<number>): number => Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0))

describe("the OpenAI SDK on /v1/embeddings", () => {
  it("decodes the default base64 encoding to the same vectors as encoding_format float", async () => {
    const input = ["Hello, world!", "second input"]
    const decoded = await openai().embeddings.create({ model: "emb-test", input })
    expect((lastRequest(fake).body as { encoding_format: string }).encoding_format).toBe("base64")
    const floats = await openai().embeddings.create({ model: "emb-test", input, encoding_format: "float" })
    expect(decoded.data.map((entry) => entry.embedding)).toEqual(floats.data.map((entry) => entry.embedding))
    expect(floats.data.map((entry) => entry.index)).toEqual([0, 1])
    expect(floats.model).toBe("emb-test")
    // "Hello, world!" = 4, "second input" = 2.
    expect(floats.usage).toEqual({ prompt_tokens: 6, total_tokens: 6 })
  })

  it("gives deterministic unit vectors of 8 values, different per input, `dimensions` long when asked", async () => {
    const first = await openai().embeddings.create({
      model: "e",
      input: ["a", "b"],
      encoding_format: "float",
    })
    const again = await openai().embeddings.create({ model: "e", input: "a", encoding_format: "float" })
    const [a, b] = first.data.map((entry) => entry.embedding)
    expect(a).toHaveLength(8)
    expect(again.data[0]?.embedding).toEqual(a)
    expect(b).not.toEqual(a)
    expect(norm(a ?? [])).toBeCloseTo(1, 5)
    const wide = await openai().embeddings.create({ model: "e", input: "a", dimensions: 5 })
    expect(wide.data[0]?.embedding).toHaveLength(5)
  })
})

describe("POST /v1/embeddings on the wire", () => {
  it("sends base64 as a string of little-endian float32 values", async () => {
    const json = (await (
      await post(fake, "/v1/embeddings", embeddingsBody({ encoding_format: "base64", dimensions: 3 }))
    ).json()) as EmbeddingList
    const bytes = Buffer.from(json.data[0]?.embedding as string, "base64")
    expect(bytes).toHaveLength(12)
    const floats = (await (
      await post(fake, "/v1/embeddings", embeddingsBody({ dimensions: 3 }))
    ).json()) as EmbeddingList
    expect([0, 1, 2].map((i) => bytes.readFloatLE(i * 4))).toEqual(floats.data[0]?.embedding)
  })

  it("takes token ids: one array is one input, an array of arrays one input each, counted by length", async () => {
    const one = (await (
      await post(fake, "/v1/embeddings", embeddingsBody({ input: [1, 2, 3] }))
    ).json()) as EmbeddingList
    expect(one.data).toHaveLength(1)
    expect(one.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 })
    const two = (await (
      await post(fake, "/v1/embeddings", embeddingsBody({ input: [[1, 2], [3]] }))
    ).json()) as EmbeddingList
    expect(two).toMatchObject({ object: "list", model: "emb-test", usage: { prompt_tokens: 3 } })
    expect(two.data.map((entry) => [entry.object, entry.index])).toEqual([
      ["embedding", 0],
      ["embedding", 1],
    ])
  })

  it("rejects what the real API rejects with a 400 OpenAI error", async () => {
    for (const [body, message] of [
      [{ model: "e" }, "Missing required parameter: 'input'."],
      [{ input: "x" }, "Missing required parameter: 'model'."],
      [{ model: "e", input: [] }, "'$.input' is invalid"],
      [{ model: "e", input: "" }, "'$.input' is invalid"],
      [{ model: "e", input: ["a", 1] }, "'$.input' is invalid"],
      [{ model: "e", input: "a", dimensions: 0 }, "Invalid value for 'dimensions'"],
      [{ model: "e", input: "a", encoding_format: "hex" }, "Invalid value for 'encoding_format'"],
    ] as const) {
      const response = await post(fake, "/v1/embeddings", body)
      expect(response.status, JSON.stringify(body)).toBe(400)
      const error = ((await response.json()) as { error: { type: string; message: string } }).error
      expect(error.type).toBe("invalid_request_error")
      expect(error.message).toContain(message)
    }
  })

  it("is logged in /_fake/requests like every request", async () => {
    await (await post(fake, "/v1/embeddings", embeddingsBody())).text()
    expect(fake.requests().recent).toHaveLength(1)
    expect(lastRequest(fake)).toMatchObject({
      method: "POST",
      path: "/v1/embeddings",
      body: embeddingsBody(),
    })
  })
})

describe("scenarios on /v1/embeddings", () => {
  it("status:429:7 answers 429 with retry-after and an OpenAI error body", async () => {
    const response = await post(fake, "/v1/embeddings", embeddingsBody(), { scenario: "status:429:7" })
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("7")
    expect(await response.json()).toEqual({
      error: { message: "Rate limited", type: "rate_limit_error", param: null, code: null },
    })
  })

  it("hang-before-headers sends nothing until the client goes away", async () => {
    await expectHangBeforeHeaders(fake, (signal) =>
      post(fake, "/v1/embeddings", embeddingsBody(), { scenario: "hang-before-headers", signal }),
    )
  })

  it("hang-after:1-tokens sends the first embedding entry, then nothing", async () => {
    const controller = new AbortController()
    const response = await post(fake, "/v1/embeddings", embeddingsBody({ input: ["a", "b", "c"] }), {
      scenario: "hang-after:1-tokens",
      signal: controller.signal,
    })
    const { text, reader } = await readUntil(response, (t) => t.includes(`"index":0`) && t.endsWith("}"))
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    expect(text).not.toContain(`"index":1`)
    controller.abort()
  })

  it("reset-after:1-tokens drops the connection after one entry", async () => {
    const response = await post(fake, "/v1/embeddings", embeddingsBody({ input: ["a", "b"] }), {
      scenario: "reset-after:1-tokens",
    })
    expect(response.status).toBe(200)
    expect(await response.text().catch((error: unknown) => error)).toBeInstanceOf(Error)
  })

  it("malformed-after:1-tokens ends a body that is not JSON after one entry", async () => {
    const text = await (
      await post(fake, "/v1/embeddings", embeddingsBody({ input: ["a", "b"] }), {
        scenario: "malformed-after:1-tokens",
      })
    ).text()
    expect(text).toContain(`"index":0`)
    expect(text).not.toContain(`"index":1`)
    expect(() => JSON.parse(text)).toThrow()
  })

  it("delay:MS waits before the response", async () => {
    const start = performance.now()
    await (await post(fake, "/v1/embeddings", embeddingsBody(), { scenario: "delay:150" })).json()
    expect(performance.now() - start).toBeGreaterThanOrEqual(140)
  })

  it("no-usage leaves the usage member out", async () => {
    const json = (await (
      await post(fake, "/v1/embeddings", embeddingsBody(), { scenario: "no-usage" })
    ).json()) as EmbeddingList
    expect(json).not.toHaveProperty("usage")
    expect(json.data).toHaveLength(1)
  })

  it("an in-band error is an error status, as on the JSON paths of the other endpoints", async () => {
    const response = await post(fake, "/v1/embeddings", embeddingsBody(), {
      scenario: "inband-error:overloaded_error",
    })
    expect(response.status).toBe(529)
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe("overloaded_error")
  })
})
