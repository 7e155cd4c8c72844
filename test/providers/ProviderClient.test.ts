import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Redacted, Scope, Stream } from "effect"
import { createServer } from "node:net"
import * as FakeProvider from "../../fakeprovider/layer.js"
import type { FakeProviderHandle, FakeRequest } from "../../fakeprovider/server.js"
import { Config } from "../../src/config/Config.js"
import { decodeConfig } from "../../src/config/load.js"
import {
  ProviderClient,
  ProviderError,
  type ProviderClientOptions,
  type SendRequest,
  type Usage,
} from "../../src/providers/index.js"
import * as Providers from "../../src/providers/Providers.js"
import { withEnv } from "../support/env.js"

const KEY = "sk-provider-client-test"

/** 4 input tokens for the fake ("Hello , world !"), 13 text bytes: an estimate of 4 too. */
const messages = [{ role: "user", content: "Hello, world!" }]
const anthropicBody = (extra: Record<string, unknown> = {}) => ({
  model: "claude-test",
  max_tokens: 10,
  messages,
  ...extra,
})
const chatBody = (extra: Record<string, unknown> = {}) => ({
  model: "gpt-test",
  max_tokens: 10,
  messages,
  ...extra,
})

const reported = (inputTokens: number, outputTokens: number): Usage => ({
  inputTokens,
  outputTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  estimated: false,
})

const bytesOf = <E>(body: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(body), (chunks) => Buffer.concat(chunks))

const lastRequest = (fake: FakeProviderHandle): FakeRequest => fake.requests().recent.at(-1)!

/** The fake's answer with its random parts (ids, `created`) made fixed, for comparing two answers. */
const normalize = (text: string): string =>
  text.replace(/(msg_|chatcmpl-)[0-9A-Za-z]{24}/g, "$1ID").replace(/"created":\d+/g, '"created":0')

/** What the fake answers when the request it logged last is sent to it again directly. */
const directAnswer = (fake: FakeProviderHandle, logged: FakeRequest) =>
  Effect.promise(async () => {
    const headers: Record<string, string> = { "content-type": "application/json" }
    for (const name of ["x-fake-scenario", "anthropic-version"])
      if (logged.headers[name] !== undefined) headers[name] = logged.headers[name]
    const response = await fetch(`${fake.url}${logged.path}`, {
      method: "POST",
      headers,
      body: JSON.stringify(logged.body),
    })
    return await response.text()
  })

/** An Anthropic client of the fake, with the test key. */
const anthropicClient = (fake: FakeProviderHandle) =>
  ProviderClient.make({ kind: "anthropic", baseUrl: fake.url, apiKey: Redacted.make(KEY) })

/** Polls the fake's log until the request at `index` is marked aborted; the time it took, ms. */
const abortedWithin = (fake: FakeProviderHandle, index: number, limitMs: number) =>
  Effect.promise(async () => {
    const start = performance.now()
    while (performance.now() - start < limitMs) {
      if (fake.requests().recent[index]?.aborted === true) return performance.now() - start
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    throw new Error(`request ${index} not aborted within ${limitMs} ms`)
  })

/**
 * Sends `request` through a client of `options` (the fake's URL as base) and
 * reads the whole body: what came back, the usage, and what the fake logged.
 */
const roundTrip = (fake: FakeProviderHandle, options: ProviderClientOptions, request: SendRequest) =>
  Effect.gen(function* () {
    const client = yield* ProviderClient.make(options)
    const response = yield* client.send(request)
    const body = yield* bytesOf(response.body)
    const usage = yield* response.usage
    const logged = lastRequest(fake)
    // The bytes are the fake's, all of them.
    assert.strictEqual(body.length, logged.bytes_sent)
    assert.strictEqual(normalize(body.toString("utf8")), normalize(yield* directAnswer(fake, logged)))
    return { response, body: body.toString("utf8"), usage, logged }
  })

describe("ProviderClient.send against the fake provider", () => {
  it.live("anthropic JSON: the body as sent, exact usage, the key and model upstream", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const { response, body, usage, logged } = yield* roundTrip(
        fake,
        { kind: "anthropic", baseUrl: fake.url, apiKey: Redacted.make(KEY) },
        { endpoint: "/v1/messages", body: anthropicBody(), headers: { "x-fake-scenario": "tokens:5" } },
      )
      assert.strictEqual(response.status, 200)
      assert.match(response.headers["content-type"]!, /^application\/json/)
      assert.strictEqual(JSON.parse(body).content[0].text, "tok0 tok1 tok2 tok3 tok4 ")
      assert.deepStrictEqual(usage, reported(4, 5))
      assert.strictEqual(logged.path, "/v1/messages")
      assert.strictEqual(logged.headers["x-api-key"], KEY)
      assert.strictEqual(logged.headers["anthropic-version"], "2023-06-01")
    }),
  )

  it.live("anthropic SSE: the event stream as sent, usage from message_start + message_delta", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const { response, body, usage } = yield* roundTrip(
        fake,
        { kind: "anthropic", baseUrl: fake.url, apiKey: Redacted.make(KEY) },
        {
          endpoint: "/v1/messages",
          body: anthropicBody({ stream: true }),
          headers: { "x-fake-scenario": "tokens:5" },
        },
      )
      assert.match(response.headers["content-type"]!, /^text\/event-stream/)
      assert.include(body, "event: message_stop")
      assert.deepStrictEqual(usage, reported(4, 5))
    }),
  )

  it.live("openai JSON and SSE: bearer key; a stream asks for include_usage and is metered", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const options: ProviderClientOptions = { kind: "openai", baseUrl: fake.url, apiKey: Redacted.make(KEY) }
      const json = yield* roundTrip(fake, options, {
        endpoint: "/v1/chat/completions",
        body: chatBody(),
        headers: { "x-fake-scenario": "tokens:3" },
      })
      assert.strictEqual(JSON.parse(json.body).choices[0].message.content, "tok0 tok1 tok2 ")
      assert.deepStrictEqual(json.usage, reported(4, 3))
      assert.strictEqual(json.logged.headers["authorization"], `Bearer ${KEY}`)

      const sse = yield* roundTrip(fake, options, {
        endpoint: "/v1/chat/completions",
        body: chatBody({ stream: true }),
        headers: { "x-fake-scenario": "tokens:3" },
      })
      assert.include(sse.body, "data: [DONE]")
      assert.deepStrictEqual(sse.usage, reported(4, 3))
      assert.deepStrictEqual((sse.logged.body as Record<string, unknown>)["stream_options"], {
        include_usage: true,
      })
    }),
  )

  it.live("vertex with a static access token: model in the URL, anthropic_version in the body", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const options: ProviderClientOptions = {
        kind: "vertex",
        project: "my-project",
        region: "us-east5",
        baseUrl: fake.url,
        accessToken: Redacted.make("ya29.static"),
      }
      const json = yield* roundTrip(fake, options, {
        endpoint: "/v1/messages",
        body: anthropicBody({ model: "claude-x@20250101" }),
        headers: { "x-fake-scenario": "tokens:2" },
      })
      assert.strictEqual(
        json.logged.path,
        "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-x@20250101:rawPredict",
      )
      assert.strictEqual(json.logged.headers["authorization"], "Bearer ya29.static")
      const sent = json.logged.body as Record<string, unknown>
      assert.strictEqual(sent["model"], undefined)
      assert.strictEqual(sent["anthropic_version"], "vertex-2023-10-16")
      assert.deepStrictEqual(json.usage, reported(4, 2))

      const sse = yield* roundTrip(fake, options, {
        endpoint: "/v1/messages",
        body: anthropicBody({ stream: true }),
        model: "claude-y",
        headers: { "x-fake-scenario": "tokens:2" },
      })
      assert.match(sse.logged.path, /\/models\/claude-y:streamRawPredict$/)
      assert.deepStrictEqual(sse.usage, reported(4, 2))
    }),
  )

  it.live("ollama: no credentials upstream", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const { usage, logged } = yield* roundTrip(
        fake,
        { kind: "ollama", baseUrl: fake.url },
        { endpoint: "/v1/chat/completions", body: chatBody(), headers: { "x-fake-scenario": "tokens:3" } },
      )
      assert.deepStrictEqual(usage, reported(4, 3))
      assert.strictEqual(logged.headers["authorization"], undefined)
    }),
  )

  it.live(
    "no-usage: the usage is estimated (input from the request's text, output from the streamed text)",
    () =>
      Effect.gen(function* () {
        const fake = yield* FakeProvider.make()
        const options: ProviderClientOptions = {
          kind: "anthropic",
          baseUrl: fake.url,
          apiKey: Redacted.make(KEY),
        }
        const headers = { "x-fake-scenario": "no-usage,tokens:5" }
        const json = yield* roundTrip(fake, options, {
          endpoint: "/v1/messages",
          body: anthropicBody(),
          headers,
        })
        assert.deepStrictEqual(json.usage, { ...reported(4, 0), estimated: true })
        const sse = yield* roundTrip(fake, options, {
          endpoint: "/v1/messages",
          body: anthropicBody({ stream: true }),
          headers,
        })
        // "tok0 " … "tok4 ": 25 bytes of text, ceil(25 / 4) = 7 tokens.
        assert.deepStrictEqual(sse.usage, { ...reported(4, 7), estimated: true })
      }),
  )

  it.live("raw bytes go upstream as they are but for the model", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const client = yield* anthropicClient(fake)
      const raw =
        '{ "max_tokens": 4, "zeta": 1.50, "messages": [{"role":"user","content":"hi"}], "model": "a" }'
      const response = yield* client.send({
        endpoint: "/v1/messages",
        body: new TextEncoder().encode(raw),
        model: "claude-b",
      })
      yield* bytesOf(response.body)
      // What reached the fake, byte for byte, is not logged; the parsed body keeps every member.
      assert.deepStrictEqual(lastRequest(fake).body, {
        max_tokens: 4,
        zeta: 1.5,
        messages: [{ role: "user", content: "hi" }],
        model: "claude-b",
      })
    }),
  )

  it.live("an error status is a response (status, body), not a ProviderError; its usage is 0", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const { response, body, usage } = yield* roundTrip(
        fake,
        { kind: "anthropic", baseUrl: fake.url, apiKey: Redacted.make(KEY) },
        { endpoint: "/v1/messages", body: anthropicBody(), headers: { "x-fake-scenario": "status:529" } },
      )
      assert.strictEqual(response.status, 529)
      assert.strictEqual(JSON.parse(body).error.type, "overloaded_error")
      assert.deepStrictEqual(usage, reported(0, 0))
    }),
  )

  it.live("a body that breaks off fails the stream with BodyFailed", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const client = yield* anthropicClient(fake)
      const response = yield* client.send({
        endpoint: "/v1/messages",
        body: anthropicBody({ stream: true }),
        headers: { "x-fake-scenario": "reset-after:2-tokens" },
      })
      const error = yield* Effect.flip(bytesOf(response.body))
      assert.instanceOf(error, ProviderError)
      assert.strictEqual(error.reason, "BodyFailed")
      // What arrived before the reset is metered: message_start reported the input.
      assert.strictEqual((yield* response.usage).inputTokens, 4)
    }),
  )
})

describe("ProviderClient backpressure and cancellation", () => {
  it.live("the upstream call is paused while nobody pulls the body", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const client = yield* anthropicClient(fake)
      // About 25 MB of events: far more than the socket buffers hold.
      const tokens = 200_000
      const response = yield* client.send({
        endpoint: "/v1/messages",
        body: anthropicBody({ stream: true }),
        headers: { "x-fake-scenario": `tokens:${tokens}` },
      })
      // The fake sends until the socket buffers are full: wait until it stops (however long a loaded machine
      // takes to fill them, up to 10 s), then it must stay stopped, far short of the whole body.
      yield* Effect.sleep("300 millis")
      let stalled = lastRequest(fake).bytes_sent
      for (let waited = 0; waited < 10_000; waited += 200) {
        yield* Effect.sleep("200 millis")
        const sent = lastRequest(fake).bytes_sent
        if (sent === stalled) break
        stalled = sent
      }
      yield* Effect.sleep("300 millis")
      assert.strictEqual(lastRequest(fake).bytes_sent, stalled)
      assert.isBelow(stalled, 12 * 1024 * 1024)
      const body = yield* bytesOf(response.body)
      assert.isAbove(body.length, 20 * 1024 * 1024)
      assert.strictEqual(body.length, lastRequest(fake).bytes_sent)
      assert.deepStrictEqual(yield* response.usage, reported(4, tokens))
    }),
  )

  it.live("closing the scope mid-stream aborts the upstream request at once", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const client = yield* anthropicClient(fake)
      const scope = yield* Scope.make()
      const response = yield* client
        .send({
          endpoint: "/v1/messages",
          body: anthropicBody({ stream: true }),
          headers: { "x-fake-scenario": "tokens:1000,delay:20" },
        })
        .pipe(Scope.provide(scope))
      const first = yield* Stream.runCollect(Stream.take(response.body, 1))
      assert.include(Buffer.from(first[0]!).toString("utf8"), "message_start")
      assert.isFalse(lastRequest(fake).aborted)
      yield* Scope.close(scope, Exit.void)
      yield* abortedWithin(fake, 0, 1_000)
      // The usage resolves with what was read: message_start's input tokens.
      assert.strictEqual((yield* response.usage).inputTokens, 4)
      // The body cannot be read after its scope closed.
      const error = yield* Effect.flip(bytesOf(response.body))
      assert.strictEqual(error.reason, "BodyFailed")
    }),
  )

  it.live(
    "Effect.timeout around reading the body aborts the upstream request at once, and the usage resolves",
    () =>
      Effect.gen(function* () {
        const fake = yield* FakeProvider.make()
        const client = yield* anthropicClient(fake)
        const response = yield* client.send({
          endpoint: "/v1/messages",
          body: anthropicBody({ stream: true }),
          headers: { "x-fake-scenario": "hang-after:2-tokens" },
        })
        const read = yield* Stream.runDrain(response.body).pipe(Effect.timeoutOption("200 millis"))
        assert.strictEqual(read._tag, "None")
        // Still inside the scope: the interruption itself aborted the request.
        yield* abortedWithin(fake, 0, 1_000)
        assert.strictEqual((yield* response.usage).inputTokens, 4)
      }).pipe(Effect.scoped),
  )

  it.live("a caller's credentials and framing headers never reach the provider; the client's key does", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const client = yield* anthropicClient(fake)
      const response = yield* client.send({
        endpoint: "/v1/messages",
        body: anthropicBody(),
        headers: {
          authorization: "Bearer leaked",
          "x-api-key": "sk-caller",
          "transfer-encoding": "chunked",
          "anthropic-beta": "tools-1",
        },
      })
      assert.strictEqual(response.status, 200)
      yield* Stream.runDrain(response.body)
      const seen = lastRequest(fake).headers
      assert.isUndefined(seen["authorization"])
      assert.strictEqual(seen["x-api-key"], KEY)
      assert.strictEqual(seen["anthropic-beta"], "tools-1")
    }).pipe(Effect.scoped),
  )

  it.live("Effect.timeout around send aborts a request that hangs before its headers", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const client = yield* anthropicClient(fake)
      const result = yield* client
        .send({
          endpoint: "/v1/messages",
          body: anthropicBody(),
          headers: { "x-fake-scenario": "hang-before-headers" },
        })
        .pipe(Effect.timeout("200 millis"), Effect.scoped, Effect.flip)
      assert.strictEqual(result._tag, "TimeoutError")
      yield* abortedWithin(fake, 0, 1_000)
    }),
  )
})

describe("ProviderClient errors", () => {
  /** A port nobody listens on: bound, then closed. */
  const closedPort = Effect.promise(
    () =>
      new Promise<number>((resolve) => {
        const server = createServer()
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as { port: number }
          server.close(() => resolve(port))
        })
      }),
  )

  it.live("a connection refused is a ProviderError (ConnectionFailed)", () =>
    Effect.gen(function* () {
      const port = yield* closedPort
      const client = yield* ProviderClient.make({
        kind: "openai",
        name: "nowhere",
        baseUrl: `http://127.0.0.1:${port}`,
        apiKey: Redacted.make(KEY),
      })
      const error = yield* Effect.flip(client.send({ endpoint: "/v1/chat/completions", body: chatBody() }))
      assert.instanceOf(error, ProviderError)
      assert.strictEqual(error.reason, "ConnectionFailed")
      assert.strictEqual(error.provider, "nowhere")
      assert.include(error.message, "ECONNREFUSED")
    }),
  )

  it.live("requests that cannot be sent fail with InvalidRequest and send nothing", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const vertex = yield* ProviderClient.make({
        kind: "vertex",
        project: "p",
        region: "global",
        baseUrl: fake.url,
        accessToken: Redacted.make("t"),
      })
      const anthropic = yield* ProviderClient.make({
        kind: "anthropic",
        baseUrl: fake.url,
        apiKey: Redacted.make(KEY),
      })
      const failures = [
        vertex.send({ endpoint: "/v1/messages/count_tokens", body: anthropicBody() }),
        anthropic.send({ endpoint: "/v1/messages", body: { max_tokens: 1, messages } }),
        anthropic.send({ endpoint: "/v1/messages", body: new TextEncoder().encode("[1, 2]") }),
        anthropic.send({ endpoint: "/v1/messages", body: new TextEncoder().encode("{nope") }),
      ]
      for (const failure of failures) {
        const error = yield* Effect.flip(failure)
        assert.strictEqual(error.reason, "InvalidRequest")
      }
      assert.strictEqual(fake.requests().count, 0)
    }),
  )

  it.live("an empty key fails ProviderClient.layer with MissingCredentials", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Layer.build(ProviderClient.layer({ kind: "anthropic", name: "main", apiKey: Redacted.make("") })),
      )
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(
        Layer.build(ProviderClient.layer({ kind: "openai", name: "main", apiKey: Redacted.make("") })),
      )
      assert.strictEqual(error.reason, "MissingCredentials")
      assert.strictEqual(error.provider, "main")
    }),
  )
})

describe("Providers (one ProviderClient per configured provider)", () => {
  const ENV = "TG_PROVIDERS_TEST_KEY"
  const decoded = (url: string) =>
    decodeConfig(
      {
        server: { listen: "127.0.0.1:0" },
        providers: {
          primary: { kind: "anthropic", base_url: url, api_key_env: ENV },
          local: { kind: "ollama", base_url: url },
        },
        routes: { claude: { api: "anthropic", targets: [{ provider: "primary", model: "claude-test" }] } },
        tenants: { acme: { keys: [{ id: "ci", sha256: "0".repeat(64) }], routes: "*" } },
      },
      { path: "/tmp/tollgate.yaml", mode: "validate" },
    ).pipe(withEnv({}))

  it.live("each client sends with the key from its env var", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider.make()
      const { config } = yield* decoded(fake.url)
      const providers = yield* Layer.build(
        Providers.layer.pipe(Layer.provide(Config.layerFrom(config))),
      ).pipe(
        withEnv({ [ENV]: KEY }),
        Effect.map((context) => Context.get(context, Providers.Providers)),
      )
      const primary = providers.get("primary")
      assert.strictEqual(primary.kind, "anthropic")
      const response = yield* primary.send({ endpoint: "/v1/messages", body: anthropicBody() })
      yield* bytesOf(response.body)
      assert.strictEqual(lastRequest(fake).headers["x-api-key"], KEY)
      assert.strictEqual(providers.get("local").api, "openai")
    }),
  )

  it.live(
    "an unset key env var fails the layer with MissingCredentials naming the provider and the variable",
    () =>
      Effect.gen(function* () {
        const { config } = yield* decoded("http://127.0.0.1:9")
        const error = yield* Effect.flip(
          Layer.build(Providers.layer.pipe(Layer.provide(Config.layerFrom(config)))).pipe(withEnv({})),
        )
        assert.strictEqual(error._tag, "ProviderError")
        assert.strictEqual((error as ProviderError).reason, "MissingCredentials")
        assert.strictEqual((error as ProviderError).provider, "primary")
        assert.include(error.message, ENV)
      }),
  )
})
