import OpenAI from "openai"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { eventually, startHarness, UPSTREAM_KEY, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/** Azure OpenAI's v1 API through Tollgate (issue #34), against the fake provider's Azure paths. */

const DEPLOYMENT = "my-gpt5-mini"
const PRICES = {
  prices: [
    { model: "gpt-5-mini", input: 0.25, output: 2, cache_read: 0.025 },
    { provider: "azure", model: DEPLOYMENT, input: 0.3, output: 2.4 },
    { provider: "azure", model: "my-embeddings", input: 0.02, output: 0 },
  ],
}

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

const start = (options: { openai?: string; azure?: string; targets: ReadonlyArray<"openai" | "azure"> }) =>
  startHarness({
    fakes: [
      { name: "openai", scenario: options.openai ?? "ok" },
      { name: "azure", scenario: options.azure ?? "ok" },
    ],
    prices: PRICES,
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      providers: {
        openai: { kind: "openai", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        azure: { kind: "azure", base_url: urls[1], api_key_env: UPSTREAM_KEY_ENV },
      },
      routes: {
        gpt: {
          api: "openai",
          targets: options.targets.map((t) =>
            t === "azure"
              ? { provider: "azure", model: DEPLOYMENT }
              : { provider: "openai", model: "gpt-5-mini" },
          ),
        },
        embed: { api: "openai", targets: [{ provider: "azure", model: "my-embeddings" }] },
      },
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
    }),
  })

const openai = (harness: Harness) =>
  new OpenAI({ apiKey: harness.key, baseURL: `${harness.url}/v1`, maxRetries: 0 })

const azureRequests = (harness: Harness) => harness.fakes[1]!.requests()

describe("Azure OpenAI targets", () => {
  it("a chat stream goes to /openai/v1/chat/completions with api-key and the deployment as model", async () => {
    h = await start({ targets: ["azure"] })
    const stream = await openai(h).chat.completions.create({
      model: "gpt",
      stream: true,
      max_tokens: 6,
      messages: [{ role: "user", content: "hello azure" }],
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("tok0 tok1 tok2 tok3 tok4 tok5 ")
    const upstream = azureRequests(h).recent.at(-1)!
    expect(upstream.path).toBe("/openai/v1/chat/completions")
    expect(upstream.headers["api-key"]).toBe(UPSTREAM_KEY)
    expect(upstream.headers["authorization"]).toBeUndefined()
    expect((upstream.body as { model: string }).model).toBe(DEPLOYMENT)
    await eventually(() => h!.records().length === 1)
    const record = h.records()[0]!
    expect(record).toMatchObject({
      provider: "azure",
      model: DEPLOYMENT,
      output_tokens: 6,
      usage_estimated: false,
    })
    expect(record.cost_micro_usd).toBe(Math.ceil((record.input_tokens * 300_000 + 6 * 2_400_000) / 1_000_000))
  })

  it("responses.create and a Responses stream go to /openai/v1/responses", async () => {
    h = await start({ targets: ["azure"] })
    const response = await openai(h).responses.create({ model: "gpt", input: "hello", max_output_tokens: 4 })
    expect(response.output_text).toBe("tok0 tok1 tok2 tok3 ")
    expect(azureRequests(h).recent.at(-1)!.path).toBe("/openai/v1/responses")
    const stream = openai(h).responses.stream({ model: "gpt", input: "hello", max_output_tokens: 3 })
    let text = ""
    stream.on("response.output_text.delta", (e) => (text += e.delta))
    const final = await stream.finalResponse()
    expect(text).toBe("tok0 tok1 tok2 ")
    expect(final.usage?.output_tokens).toBe(3)
    expect(azureRequests(h).recent.at(-1)!.path).toBe("/openai/v1/responses")
  })

  it("embeddings go to /openai/v1/embeddings", async () => {
    h = await start({ targets: ["azure"] })
    const result = await openai(h).embeddings.create({ model: "embed", input: ["one two", "three"] })
    expect(result.data).toHaveLength(2)
    const upstream = azureRequests(h).recent.at(-1)!
    expect(upstream.path).toBe("/openai/v1/embeddings")
    expect((upstream.body as { model: string }).model).toBe("my-embeddings")
  })

  it("OpenAI failing with 529 falls back to Azure", async () => {
    h = await start({ openai: "status:529", targets: ["openai", "azure"] })
    const { response } = await openai(h)
      .chat.completions.create({ model: "gpt", max_tokens: 3, messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(response.headers.get("x-tollgate-provider")).toBe("azure")
    expect(response.headers.get("x-tollgate-model")).toBe(DEPLOYMENT)
    expect(response.headers.get("x-tollgate-attempts")).toBe("2")
  })

  it("Azure's content-filter error reaches the client in the OpenAI format, unchanged", async () => {
    h = await start({ azure: "content-filter", targets: ["azure"] })
    const error = (await openai(h)
      .chat.completions.create({ model: "gpt", max_tokens: 3, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error.code).toBe("content_filter")
    expect((error.error as { innererror?: { code?: string } }).innererror?.code).toBe(
      "ResponsibleAIPolicyViolation",
    )
  })

  it("a stream cut by Azure's content filter ends with finish_reason content_filter", async () => {
    h = await start({ azure: "content-filter", targets: ["azure"] })
    const stream = await openai(h).chat.completions.create({
      model: "gpt",
      stream: true,
      max_tokens: 6,
      messages: [{ role: "user", content: "hi" }],
    })
    const reasons: Array<string | null> = []
    for await (const chunk of stream) for (const choice of chunk.choices) reasons.push(choice.finish_reason)
    expect(reasons.at(-1)).toBe("content_filter")
  })
})
