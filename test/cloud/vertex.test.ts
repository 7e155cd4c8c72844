import Anthropic from "@anthropic-ai/sdk"
import { assert, describe as effectDescribe, it as effectIt } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { Layer } from "effect"
import { Store } from "../../src/limits/Store.js"
import { startCopy } from "../support/copies.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { tempDir } from "../support/tempDirs.js"

/** Claude on Vertex AI through Tollgate, against the fake provider's Vertex endpoints. */

const VERTEX_MODEL = "claude-sonnet-5-5@20261001"
const PRICES = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10 },
    { provider: "vertex", model: VERTEX_MODEL, input: 3.3, output: 11, cache_read: 0.33, cache_write: 4.125 },
  ],
}

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

const start = (options: { anthropicScenario?: string; targets: ReadonlyArray<"anthropic" | "vertex"> }) =>
  startHarness({
    fakes: [{ name: "anthropic", scenario: options.anthropicScenario ?? "ok" }, { name: "vertex" }],
    prices: PRICES,
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      usage: { file: join(dir, "usage.jsonl") },
      providers: {
        anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
        vertex: {
          kind: "vertex",
          project: "my-project",
          region: "us-east5",
          base_url: urls[1],
          access_token_env: UPSTREAM_KEY_ENV,
        },
      },
      routes: {
        claude: {
          api: "anthropic",
          targets: options.targets.map((t) =>
            t === "vertex"
              ? { provider: "vertex", model: VERTEX_MODEL }
              : { provider: "anthropic", model: "claude-sonnet-5-5" },
          ),
        },
      },
      tenants: {
        acme: {
          keys: [{ id: "ci", sha256: keyHash }],
          routes: "*",
          budgets: { month: { limit_usd: 10, mode: "hard" } },
        },
      },
    }),
  })

const client = (harness: Harness) =>
  new Anthropic({ apiKey: harness.key, baseURL: harness.url, maxRetries: 0 })

describe("Vertex targets", () => {
  it("Tollgate sends the Vertex path, a body without model and with anthropic_version, and the bearer token", async () => {
    h = await start({ targets: ["vertex"] })
    const message = await client(h).messages.create({
      model: "claude",
      max_tokens: 5,
      messages: [{ role: "user", content: "hello vertex" }],
    })
    expect(message.usage.output_tokens).toBe(5)
    const upstream = h.fakes[1]!.requests().recent.at(-1)!
    expect(upstream.path).toBe(
      `/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/${VERTEX_MODEL}:rawPredict`,
    )
    expect(upstream.headers["authorization"]).toBe("Bearer sk-upstream-test-secret")
    expect(upstream.headers["x-api-key"]).toBeUndefined()
    const body = upstream.body as Record<string, unknown>
    expect(body["model"]).toBeUndefined()
    expect(body["anthropic_version"]).toBe("vertex-2023-10-16")
    expect(body["max_tokens"]).toBe(5)

    await client(h)
      .messages.stream({ model: "claude", max_tokens: 3, messages: [{ role: "user", content: "x" }] })
      .finalMessage()
    expect(h.fakes[1]!.requests().recent.at(-1)!.path).toMatch(/:streamRawPredict$/)
  })

  it("a priced Vertex stream records the Vertex price times the usage the fake reported", async () => {
    h = await start({ targets: ["vertex"] })
    const message = await client(h)
      .messages.stream({
        model: "claude",
        max_tokens: 12,
        messages: [{ role: "user", content: "price this stream, please" }],
      })
      .finalMessage()
    const record = h.records().at(-1)!
    expect(record).toMatchObject({ provider: "vertex", model: VERTEX_MODEL, stream: true, incomplete: false })
    expect(record.input_tokens).toBe(message.usage.input_tokens)
    expect(record.output_tokens).toBe(12)
    // 3.3 and 11 USD per million tokens.
    const expected = Math.ceil((record.input_tokens * 3_300_000 + 12 * 11_000_000) / 1_000_000)
    expect(record.cost_micro_usd).toBe(expected)
    expect(record.cost_micro_usd).toBeGreaterThan(0)
  })

  it("an Anthropic target failing with 529 falls back to Vertex, and the headers name Vertex", async () => {
    h = await start({ anthropicScenario: "status:529", targets: ["anthropic", "vertex"] })
    const { response } = await client(h)
      .messages.create({ model: "claude", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(response.headers.get("x-tollgate-provider")).toBe("vertex")
    expect(response.headers.get("x-tollgate-model")).toBe(VERTEX_MODEL)
    expect(response.headers.get("x-tollgate-attempts")).toBe("2")
  })

  it("count_tokens skips Vertex and uses the first direct Anthropic target", async () => {
    h = await start({ targets: ["vertex", "anthropic"] })
    const counted = await client(h).messages.countTokens({
      model: "claude",
      messages: [{ role: "user", content: "a b c" }],
    })
    expect(counted.input_tokens).toBe(3)
    expect(h.fakes[1]!.requests().count).toBe(0)
    expect(h.fakes[0]!.requests().recent.at(-1)!.path).toBe("/v1/messages/count_tokens")
  })

  it("count_tokens answers 404 when the route has no direct Anthropic target", async () => {
    h = await start({ targets: ["vertex"] })
    const error = await client(h)
      .messages.countTokens({ model: "claude", messages: [{ role: "user", content: "a" }] })
      .catch((e: unknown) => e as { status?: number })
    expect((error as { status?: number }).status).toBe(404)
  })
})

/**
 * A Security Token Service endpoint for an `external_account` ADC file: counts
 * token exchanges and hands out tok-1, tok-2, … valid for an hour.
 */
const tokenServer = async () => {
  let count = 0
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      count++
      res.writeHead(200, { "content-type": "application/json" })
      res.end(
        JSON.stringify({
          access_token: `tok-${count}`,
          issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
          token_type: "Bearer",
          expires_in: 3600,
        }),
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as { port: number }).port
  return {
    url: `http://127.0.0.1:${port}/token`,
    count: () => count,
    close: () => new Promise((r) => server.close(r)),
  }
}

effectDescribe("Application Default Credentials, offline", () => {
  effectIt.effect("ADC: the token is fetched once, reused, and refreshed 5 minutes before it expires", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.now())
      const tokens = yield* Effect.acquireRelease(Effect.promise(tokenServer), (t) => Effect.promise(t.close))
      const fake = yield* Effect.acquireRelease(
        Effect.promise(() => startFakeProvider()),
        (f) => Effect.promise(f.close),
      )
      const dir = tempDir("tollgate-adc-")
      // google-auth-library 10 sends service-account token requests to a fixed Google URL (it ignores the key
      // file's token_uri), so the offline test uses the other ADC file type whose token endpoint comes from
      // the file: an external account (workload identity federation) exchanging a subject token.
      const subjectToken = join(dir, "subject-token")
      writeFileSync(subjectToken, "subject-token-from-the-workload")
      const keyFile = join(dir, "adc.json")
      writeFileSync(
        keyFile,
        JSON.stringify({
          type: "external_account",
          audience:
            "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/tollgate",
          subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
          token_url: tokens.url,
          credential_source: { file: subjectToken },
        }),
      )
      process.env["GOOGLE_APPLICATION_CREDENTIALS"] = keyFile
      const key = generateKey()
      const url = yield* startCopy(
        {
          server: { listen: "127.0.0.1:0" },
          usage: { file: join(dir, "usage.jsonl") },
          providers: {
            vertex: { kind: "vertex", project: "my-project", region: "us-east5", base_url: fake.url },
          },
          routes: { claude: { api: "anthropic", targets: [{ provider: "vertex", model: VERTEX_MODEL }] } },
          tenants: { acme: { keys: [{ id: "ci", sha256: hashKey(key) }], routes: "*" } },
        },
        dir,
        Layer.succeed(Store, makeMemoryStore()),
      )
      const send = Effect.promise(async () => {
        const response = await fetch(`${url}/v1/messages`, {
          method: "POST",
          headers: { "x-api-key": key, "content-type": "application/json" },
          body: JSON.stringify({
            model: "claude",
            max_tokens: 2,
            messages: [{ role: "user", content: "hi" }],
          }),
        })
        await response.text()
        return fake.requests().recent.at(-1)!.headers["authorization"]
      })
      assert.strictEqual(tokens.count(), 1)
      for (let i = 0; i < 3; i++) assert.strictEqual(yield* send, "Bearer tok-1")
      assert.strictEqual(tokens.count(), 1)

      yield* TestClock.adjust("54 minutes")
      assert.strictEqual(yield* send, "Bearer tok-1")
      // To 55 min 5 s: past the refresh point (5 min before the 60 min expiry), short of the next 10 s minimum wait.
      yield* TestClock.adjust("65 seconds")
      // The refresh is a real HTTP call; wait for it with a generous bound.
      for (let i = 0; i < 100 && tokens.count() < 2; i++)
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
      assert.strictEqual(tokens.count(), 2)
      for (let i = 0; i < 50; i++) {
        if ((yield* send) === "Bearer tok-2") break
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
      }
      assert.strictEqual(yield* send, "Bearer tok-2")
      assert.strictEqual(tokens.count(), 2)
    }),
  )
})
