import { Effect, Result } from "effect"
import OpenAI from "openai"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { decodeConfig } from "../../src/config/load.js"
import { withEnv } from "../support/env.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/** Local models through Ollama's OpenAI-compatible endpoint (the fake provider speaks it). */

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

const start = (prices: ReadonlyArray<Record<string, unknown>>) =>
  startHarness({
    prices: { prices },
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      providers: { local: { kind: "ollama", base_url: urls[0] } },
      routes: { llama: { api: "openai", targets: [{ provider: "local", model: "llama3.2" }] } },
      tenants: {
        acme: {
          keys: [{ id: "ci", sha256: keyHash }],
          routes: "*",
          budgets: { month: { limit_usd: 1, mode: "hard" } },
        },
      },
    }),
  })

const openai = (harness: Harness) =>
  new OpenAI({ apiKey: harness.key, baseURL: `${harness.url}/v1`, maxRetries: 0 })

describe("Ollama targets", () => {
  it("the openai SDK works, stream and non-stream; with no price entry the cost is 0 even under a budget", async () => {
    h = await start([])
    const completion = await openai(h).chat.completions.create({
      model: "llama",
      max_tokens: 4,
      messages: [{ role: "user", content: "hello llama" }],
    })
    expect(completion.choices[0]!.message.content).toBe("tok0 tok1 tok2 tok3 ")
    const upstream = h.fakes[0]!.requests().recent.at(-1)!
    expect(upstream.path).toBe("/v1/chat/completions")
    expect(upstream.headers["authorization"]).toBeUndefined()
    expect((upstream.body as { model: string }).model).toBe("llama3.2")
    expect(h.records().at(-1)).toMatchObject({ provider: "local", output_tokens: 4, cost_micro_usd: 0 })

    const stream = await openai(h).chat.completions.create({
      model: "llama",
      stream: true,
      max_tokens: 3,
      messages: [{ role: "user", content: "hello llama" }],
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("tok0 tok1 tok2 ")
    expect((h.fakes[0]!.requests().recent.at(-1)!.body as Record<string, unknown>)["stream_options"]).toEqual(
      {
        include_usage: true,
      },
    )
    expect(h.records().at(-1)).toMatchObject({ stream: true, output_tokens: 3, cost_micro_usd: 0 })
  })

  it("an explicit price entry wins over the Ollama default of 0", async () => {
    h = await start([{ provider: "local", model: "llama3.2", input: 1, output: 2 }])
    await openai(h).chat.completions.create({
      model: "llama",
      max_tokens: 5,
      messages: [{ role: "user", content: "hello llama" }],
    })
    const record = h.records().at(-1)!
    expect(record.cost_micro_usd).toBe(
      Math.ceil((record.input_tokens * 1_000_000 + 5 * 2_000_000) / 1_000_000),
    )
    expect(record.cost_micro_usd).toBeGreaterThan(0)
  })
})

describe("config validate and unpriced cloud targets", () => {
  const raw = (kind: "vertex" | "ollama") => ({
    providers:
      kind === "vertex"
        ? { v: { kind: "vertex", project: "p", region: "us-east5", access_token_env: "T" } }
        : { v: { kind: "ollama" } },
    routes: {
      r: { api: kind === "vertex" ? "anthropic" : "openai", targets: [{ provider: "v", model: "m@1" }] },
    },
    tenants: {
      acme: {
        keys: [{ id: "k", sha256: "a".repeat(64) }],
        routes: "*",
        budgets: { month: { limit_usd: 1, mode: "hard" } },
      },
    },
  })
  const decode = (kind: "vertex" | "ollama") =>
    Effect.runPromise(
      Effect.result(
        decodeConfig(raw(kind), { path: "/tmp/tollgate.yaml", mode: "validate", prices: { prices: [] } }),
      ).pipe(withEnv({ T: "x", [UPSTREAM_KEY_ENV]: "x" })),
    )

  it("a tenant with a budget that can reach an unpriced Vertex target is an error", async () => {
    const result = await decode("vertex")
    expect(Result.isFailure(result)).toBe(true)
    if (Result.isFailure(result)) expect(result.failure.problems.join("\n")).toContain("routes.r.targets[0]")
  })

  it("an unpriced Ollama target is not", async () => {
    expect(Result.isSuccess(await decode("ollama"))).toBe(true)
  })
})
