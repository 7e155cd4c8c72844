import { spawn } from "node:child_process"
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { Hash } from "@smithy/hash-node"
import { HttpRequest } from "@smithy/protocol-http"
import { SignatureV4 } from "@smithy/signature-v4"
import { fromUtf8, toUtf8 } from "@smithy/util-utf8"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { outputText } from "../../fakeprovider/tokens.js"
import {
  lastRequest,
  messagesBody,
  post,
  sseData,
  sseEvents,
  stillPending,
  until,
  expectHangBeforeHeaders,
} from "./helpers.js"

const MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
const invokePath = (model = MODEL) => `/model/${encodeURIComponent(model)}/invoke`
const streamPath = (model = MODEL) => `/model/${encodeURIComponent(model)}/invoke-with-response-stream`

/** A Bedrock body for Claude: Anthropic Messages without `model`, with `anthropic_version`. */
const bedrockBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  anthropic_version: "bedrock-2023-05-31",
  max_tokens: 10,
  messages: [{ role: "user", content: "Hello, world!" }],
  ...extra,
})

interface SignOptions {
  readonly accessKeyId?: string
  readonly secretAccessKey?: string
  readonly sessionToken?: string
  readonly region?: string
  readonly service?: string
  readonly scenario?: string
  readonly signal?: AbortSignal
  /** Sent instead of the signed body. */
  readonly sentBody?: string
}

/** POSTs `body` to the fake, signed with AWS's SigV4 signer as the AWS SDK signs it. */
const signedPost = async (
  fake: FakeProviderHandle,
  path: string,
  body: unknown,
  options: SignOptions = {},
): Promise<Response> => {
  const url = new URL(fake.url)
  const text = typeof body === "string" ? body : JSON.stringify(body)
  const signer = new SignatureV4({
    service: options.service ?? "bedrock",
    region: options.region ?? "us-east-1",
    credentials: {
      accessKeyId: options.accessKeyId ?? "AKIDFAKE",
      secretAccessKey: options.secretAccessKey ?? "fake-secret",
      ...(options.sessionToken !== undefined ? { sessionToken: options.sessionToken } : {}),
    },
    sha256: Hash.bind(null, "sha256"),
  })
  const signed = await signer.sign(
    new HttpRequest({
      method: "POST",
      protocol: "http:",
      hostname: url.hostname,
      port: Number(url.port),
      path,
      headers: { host: url.host, "content-type": "application/json", accept: "application/json" },
      body: text,
    }),
  )
  const { host: _host, ...headers } = signed.headers
  return fetch(`${fake.url}${path}`, {
    method: "POST",
    headers: {
      ...headers,
      ...(options.scenario !== undefined ? { "x-fake-scenario": options.scenario } : {}),
    },
    body: options.sentBody ?? text,
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
  })
}

const codec = new EventStreamCodec(toUtf8, fromUtf8)

/** One event-stream frame: its string headers and payload text, or the decode error (a bad CRC). */
type Frame =
  { readonly headers: Record<string, string>; readonly payload: string } | { readonly error: string }

/** Splits `bytes` at the frames' length prefixes and decodes each; returns the frames and the bytes left. */
const splitFrames = (bytes: Buffer): { frames: Array<Frame>; rest: Buffer } => {
  const frames: Array<Frame> = []
  let offset = 0
  while (bytes.length - offset >= 4) {
    const total = bytes.readUInt32BE(offset)
    if (bytes.length - offset < total) break
    try {
      const message = codec.decode(bytes.subarray(offset, offset + total))
      const headers: Record<string, string> = {}
      for (const [name, header] of Object.entries(message.headers)) headers[name] = String(header.value)
      frames.push({ headers, payload: toUtf8(message.body) })
    } catch (error) {
      frames.push({ error: error instanceof Error ? error.message : String(error) })
    }
    offset += total
  }
  return { frames, rest: bytes.subarray(offset) }
}

/** Reads frames until `enough(frames)` holds or the body ends; the reader stays open. */
const readFrames = async (
  response: Response,
  enough: (frames: ReadonlyArray<Frame>) => boolean = () => false,
): Promise<{ frames: Array<Frame>; reader: ReadableStreamDefaultReader<Uint8Array>; bytes: number }> => {
  const reader = response.body!.getReader()
  let buffered: Buffer = Buffer.alloc(0)
  let bytes = 0
  const frames: Array<Frame> = []
  while (!enough(frames)) {
    const { done, value } = await reader.read()
    if (done) break
    bytes += value.length
    const split = splitFrames(Buffer.concat([buffered, value]))
    frames.push(...split.frames)
    buffered = split.rest
  }
  return { frames, reader, bytes }
}

/** The Anthropic event JSON of a `chunk` frame (its base64 `bytes`), as text. */
const chunkText = (frame: Frame): string => {
  if ("error" in frame) throw new Error(frame.error)
  const payload = JSON.parse(frame.payload) as { bytes: string; p?: string }
  return Buffer.from(payload.bytes, "base64").toString("utf8")
}

const chunkEvent = (frame: Frame): Record<string, unknown> =>
  JSON.parse(chunkText(frame)) as Record<string, unknown>

const types = (frames: ReadonlyArray<Frame>): Array<unknown> =>
  frames.map((frame) => chunkEvent(frame)["type"])

const errorOf = async (response: Response) => ({
  status: response.status,
  name: response.headers.get("x-amzn-errortype")?.split(":")[0],
  errortype: response.headers.get("x-amzn-errortype"),
  requestId: response.headers.get("x-amzn-requestid"),
  body: (await response.json()) as { message: string },
})

let fake: FakeProviderHandle

beforeAll(async () => {
  fake = await startFakeProvider({ name: "bedrock" })
})
afterAll(() => fake.close())
beforeEach(() => fake.reset())

describe("Bedrock SigV4", () => {
  it("accepts a request signed with the known credentials, with or without a session token", async () => {
    for (const sessionToken of [undefined, "any-session-token"]) {
      const response = await signedPost(fake, invokePath(), bedrockBody(), {
        ...(sessionToken !== undefined ? { sessionToken } : {}),
      })
      expect(response.status).toBe(200)
      await response.text()
      const logged = lastRequest(fake)
      expect(logged.path).toBe("/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke")
      expect(logged.headers["authorization"]).toMatch(
        /^AWS4-HMAC-SHA256 Credential=AKIDFAKE\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=.*host.*, Signature=[0-9a-f]{64}$/,
      )
      expect(logged.headers["x-amz-security-token"]).toBe(sessionToken)
    }
  })

  it("takes the region from the credential scope", async () => {
    const response = await signedPost(fake, invokePath(), bedrockBody(), { region: "eu-central-1" })
    expect(response.status).toBe(200)
    await response.text()
  })

  it("a wrong secret is 403 InvalidSignatureException", async () => {
    const response = await signedPost(fake, invokePath(), bedrockBody(), {
      secretAccessKey: "not-the-secret",
    })
    const error = await errorOf(response)
    expect(error.status).toBe(403)
    expect(error.errortype).toBe(
      "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.bedrock/",
    )
    expect(error.requestId).toMatch(/^[0-9a-f-]{36}$/)
    expect(error.body.message).toMatch(
      /^The request signature we calculated does not match the signature you provided\. /,
    )
  })

  it("a body changed after signing, or a signature for another service, is InvalidSignatureException", async () => {
    const tampered = await signedPost(fake, invokePath(), bedrockBody(), {
      sentBody: JSON.stringify(bedrockBody({ max_tokens: 11 })),
    })
    expect((await errorOf(tampered)).name).toBe("InvalidSignatureException")
    const otherService = await signedPost(fake, invokePath(), bedrockBody(), { service: "s3" })
    expect((await errorOf(otherService)).name).toBe("InvalidSignatureException")
  })

  it("an unknown access key is 403 UnrecognizedClientException", async () => {
    const response = await signedPost(fake, invokePath(), bedrockBody(), { accessKeyId: "AKIDOTHER" })
    const error = await errorOf(response)
    expect(error.status).toBe(403)
    expect(error.name).toBe("UnrecognizedClientException")
    expect(error.body).toEqual({ message: "The security token included in the request is invalid." })
  })

  it("an unsigned or garbled request is 403 MissingAuthenticationTokenException", async () => {
    for (const headers of [
      {},
      { authorization: "Bearer abc" },
      { authorization: "AWS4-HMAC-SHA256 Credential=AKIDFAKE/20250101/us-east-1/bedrock/aws4_request" },
    ]) {
      const response = await post(fake, invokePath(), bedrockBody(), { headers })
      const error = await errorOf(response)
      expect(error.status).toBe(403)
      expect(error.name).toBe("MissingAuthenticationTokenException")
      expect(error.body).toEqual({ message: "Missing Authentication Token" })
    }
  })

  it("checks against the environment's credentials at each request, and against awsCredentials when given", async () => {
    const saved = { id: process.env["AWS_ACCESS_KEY_ID"], secret: process.env["AWS_SECRET_ACCESS_KEY"] }
    process.env["AWS_ACCESS_KEY_ID"] = "AKIDENV"
    process.env["AWS_SECRET_ACCESS_KEY"] = "env-secret"
    try {
      const response = await signedPost(fake, invokePath(), bedrockBody(), {
        accessKeyId: "AKIDENV",
        secretAccessKey: "env-secret",
      })
      expect(response.status).toBe(200)
      await response.text()
      const defaults = await signedPost(fake, invokePath(), bedrockBody())
      expect((await errorOf(defaults)).name).toBe("UnrecognizedClientException")
    } finally {
      for (const [name, value] of [
        ["AWS_ACCESS_KEY_ID", saved.id],
        ["AWS_SECRET_ACCESS_KEY", saved.secret],
      ] as const) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
    }
    const pinned = await startFakeProvider({
      awsCredentials: { accessKeyId: "AKIDPIN", secretAccessKey: "pin" },
    })
    try {
      const response = await signedPost(pinned, invokePath(), bedrockBody(), {
        accessKeyId: "AKIDPIN",
        secretAccessKey: "pin",
      })
      expect(response.status).toBe(200)
      await response.text()
    } finally {
      await pinned.close()
    }
  })
})

describe("Bedrock InvokeModel", () => {
  it("answers the Anthropic message JSON with the URL's model id and the Anthropic endpoint's usage", async () => {
    const response = await signedPost(fake, invokePath(), bedrockBody({ system: "Be brief." }))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/json")
    expect(response.headers.get("x-amzn-requestid")).toMatch(/^[0-9a-f-]{36}$/)
    const message = (await response.json()) as Record<string, unknown>
    const direct = (await (
      await post(fake, "/v1/messages", messagesBody({ system: "Be brief." }))
    ).json()) as Record<string, unknown>
    expect(message).toEqual({ ...direct, id: message["id"], model: MODEL })
    expect(message["content"]).toEqual([{ type: "text", text: outputText(10) }])
    expect(message["usage"]).toMatchObject({ input_tokens: 7, output_tokens: 10 })
  })

  it("rejects bodies Bedrock rejects with 400 ValidationException", async () => {
    const cases: Array<[Record<string, unknown> | string, RegExp]> = [
      [bedrockBody({ model: "claude" }), /extraneous key \[model\] is not permitted/],
      [{ max_tokens: 5, messages: [] }, /required key \[anthropic_version\] not found/],
      [bedrockBody({ anthropic_version: "vertex-2023-10-16" }), /anthropic_version/],
      [{ anthropic_version: "bedrock-2023-05-31", messages: [] }, /required key \[max_tokens\] not found/],
      ["not json", /Malformed input request/],
    ]
    for (const [body, message] of cases) {
      const error = await errorOf(await signedPost(fake, invokePath(), body))
      expect(error.status).toBe(400)
      expect(error.name).toBe("ValidationException")
      expect(error.body.message).toMatch(message)
    }
  })

  it("ignores a stream field: the path says whether it streams", async () => {
    const response = await signedPost(fake, invokePath(), bedrockBody({ stream: true }))
    expect(response.headers.get("content-type")).toBe("application/json")
    expect(((await response.json()) as { type: string }).type).toBe("message")
  })

  it("answers a request that declares tools with one tool_use block", async () => {
    const response = await signedPost(
      fake,
      invokePath(),
      bedrockBody({ tools: [{ name: "get_weather", input_schema: { type: "object" } }] }),
    )
    const message = (await response.json()) as {
      stop_reason: string
      content: Array<Record<string, unknown>>
    }
    expect(message.stop_reason).toBe("tool_use")
    expect(message.content[0]).toMatchObject({
      type: "tool_use",
      name: "get_weather",
      input: { query: outputText(10) },
    })
  })
})

describe("Bedrock InvokeModelWithResponseStream", () => {
  it("sends each Anthropic event as one chunk frame, the same sequence and usage as the Anthropic stream", async () => {
    const response = await signedPost(fake, streamPath(), bedrockBody({ max_tokens: 3 }))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/vnd.amazon.eventstream")
    const { frames } = await readFrames(response)
    for (const frame of frames) {
      expect(frame).toMatchObject({
        headers: { ":event-type": "chunk", ":content-type": "application/json", ":message-type": "event" },
      })
      const payload = JSON.parse("payload" in frame ? frame.payload : "") as Record<string, unknown>
      expect(Object.keys(payload)).toEqual(["bytes", "p"])
      expect(payload["p"]).toMatch(/^[a-zA-Z0-9]+$/)
    }
    const events = frames.map(chunkEvent)
    const direct = sseData(
      await (await post(fake, "/v1/messages", messagesBody({ max_tokens: 3, stream: true }))).text(),
    )
    const directEvents = direct.map((data) => JSON.parse(data) as Record<string, unknown>)
    expect(types(frames)).toEqual(directEvents.map((event) => event["type"]))
    expect(types(frames)).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ])
    const start = events[0]!["message"] as Record<string, unknown>
    expect(start["model"]).toBe(MODEL)
    expect(start["usage"]).toEqual((directEvents[0]!["message"] as Record<string, unknown>)["usage"])
    expect(events[7]).toEqual(directEvents[7])
    expect(
      events
        .slice(3, 6)
        .map((event) => (event["delta"] as { text: string }).text)
        .join(""),
    ).toBe(outputText(3))
    const stop = events[8]!
    expect(stop["type"]).toBe("message_stop")
    const metrics = stop["amazon-bedrock-invocationMetrics"] as Record<string, number>
    expect(Object.keys(metrics)).toEqual([
      "inputTokenCount",
      "outputTokenCount",
      "invocationLatency",
      "firstByteLatency",
    ])
    expect(metrics).toMatchObject({ inputTokenCount: 4, outputTokenCount: 3 })
    expect(metrics["invocationLatency"]).toBeGreaterThanOrEqual(metrics["firstByteLatency"]!)
  })

  it("streams a tool call as input_json_delta events in frames", async () => {
    const response = await signedPost(
      fake,
      streamPath(),
      bedrockBody({ max_tokens: 2, tools: [{ name: "lookup", input_schema: { type: "object" } }] }),
    )
    const events = (await readFrames(response)).frames.map(chunkEvent)
    expect(events[1]).toMatchObject({ content_block: { type: "tool_use", name: "lookup" } })
    const json = events
      .filter((event) => event["type"] === "content_block_delta")
      .map((event) => (event["delta"] as { partial_json: string }).partial_json)
      .join("")
    expect(JSON.parse(json)).toEqual({ query: outputText(2) })
    expect(events.at(-2)).toMatchObject({ delta: { stop_reason: "tool_use" } })
  })
})

describe("Bedrock scenarios", () => {
  it("status:N answers Bedrock's exception for N, with retry-after when given", async () => {
    const table: Array<[string, number, string]> = [
      ["status:429:7", 429, "ThrottlingException"],
      ["status:529", 429, "ModelNotReadyException"],
      ["status:503", 503, "ServiceUnavailableException"],
      ["status:500", 500, "InternalServerException"],
      ["status:424", 424, "ModelErrorException"],
      ["status:400", 400, "ValidationException"],
      ["status:403", 403, "AccessDeniedException"],
      ["status:404", 404, "ResourceNotFoundException"],
      ["status:408", 408, "ModelTimeoutException"],
      ["status:418", 418, "InternalServerException"],
    ]
    for (const [scenario, status, name] of table) {
      const error = await errorOf(await signedPost(fake, invokePath(), bedrockBody(), { scenario }))
      expect([scenario, error.status, error.name]).toEqual([scenario, status, name])
      expect(error.errortype).toBe(`${name}:http://internal.amazon.com/coral/com.amazon.bedrock/`)
      expect(error.body.message).toBeTypeOf("string")
    }
    const throttled = await signedPost(fake, streamPath(), bedrockBody(), { scenario: "status:429:7" })
    expect(throttled.headers.get("retry-after")).toBe("7")
    expect((await errorOf(throttled)).body).toEqual({
      message: "Too many requests, please wait before trying again.",
    })
    const plain = await signedPost(fake, invokePath(), bedrockBody(), { scenario: "status:503" })
    expect(plain.headers.has("retry-after")).toBe(false)
    await plain.text()
  })

  it("the signature is checked before the scenario applies", async () => {
    const response = await post(fake, invokePath(), bedrockBody(), { scenario: "status:429" })
    expect((await errorOf(response)).name).toBe("MissingAuthenticationTokenException")
  })

  it("an x-fake-scenario that does not parse is a 400 ValidationException", async () => {
    const error = await errorOf(await signedPost(fake, invokePath(), bedrockBody(), { scenario: "explode" }))
    expect(error.status).toBe(400)
    expect(error.name).toBe("ValidationException")
    expect(error.body.message).toContain("explode")
  })

  it("hang-before-headers sends nothing until the client aborts", async () => {
    const entry = await expectHangBeforeHeaders(fake, (signal) =>
      signedPost(fake, streamPath(), bedrockBody(), { scenario: "hang-before-headers", signal }),
    )
    expect(entry.bytes_sent).toBe(0)
  })

  it("hang-after:2-tokens sends the prelude and two deltas as frames, then waits", async () => {
    const controller = new AbortController()
    const response = await signedPost(fake, streamPath(), bedrockBody(), {
      scenario: "hang-after:2-tokens",
      signal: controller.signal,
    })
    const { frames, reader, bytes } = await readFrames(response, (f) => f.length >= 5)
    expect(types(frames)).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta",
      "content_block_delta",
    ])
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    controller.abort()
    const entry = await until(() => (lastRequest(fake).aborted ? lastRequest(fake) : undefined))
    expect(entry.bytes_sent).toBe(bytes)
  })

  it("reset-after:2-tokens drops the connection after two deltas", async () => {
    const response = await signedPost(fake, streamPath(), bedrockBody(), { scenario: "reset-after:2-tokens" })
    const reader = response.body!.getReader()
    let received = Buffer.alloc(0)
    const outcome = await (async () => {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return "ended"
        received = Buffer.concat([received, value])
      }
    })().catch((error: unknown) => error)
    expect(outcome).toBeInstanceOf(Error)
    expect(types(splitFrames(received).frames)).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta",
      "content_block_delta",
    ])
  })

  it("malformed-after:2-tokens sends two deltas, a chunk whose event is not JSON, a frame with a bad CRC, then ends", async () => {
    const response = await signedPost(fake, streamPath(), bedrockBody(), {
      scenario: "malformed-after:2-tokens",
    })
    const { frames } = await readFrames(response)
    expect(frames).toHaveLength(7)
    expect(types(frames.slice(0, 5))).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta",
      "content_block_delta",
    ])
    expect(chunkText(frames[5]!)).toContain("oops")
    expect(() => chunkEvent(frames[5]!)).toThrow()
    expect(frames[6]).toEqual({ error: expect.stringMatching(/checksum/) })
  })

  it("malformed-after on InvokeModel ends with a body that is not JSON", async () => {
    const text = await (
      await signedPost(fake, invokePath(), bedrockBody(), { scenario: "malformed-after:3-tokens" })
    ).text()
    expect(text).toContain("tok0 tok1 tok2 ")
    expect(() => JSON.parse(text)).toThrow()
  })

  it("inband-error:TYPE on a stream: message_start and ping, then an exception frame", async () => {
    for (const [type, exception] of [
      ["overloaded_error", "serviceUnavailableException"],
      ["rate_limit_error", "throttlingException"],
      ["api_error", "internalServerException"],
      ["invalid_request_error", "modelStreamErrorException"],
    ] as const) {
      const response = await signedPost(fake, streamPath(), bedrockBody(), {
        scenario: `inband-error:${type}`,
      })
      expect(response.status).toBe(200)
      const { frames } = await readFrames(response)
      expect(types(frames.slice(0, 2))).toEqual(["message_start", "ping"])
      expect(frames).toHaveLength(3)
      const last = frames[2]!
      expect(last).toMatchObject({
        headers: {
          ":message-type": "exception",
          ":exception-type": exception,
          ":content-type": "application/json",
        },
      })
      expect(JSON.parse("payload" in last ? last.payload : "")).toEqual({
        message: expect.stringContaining(type),
      })
    }
  })

  it("inband-error:TYPE on InvokeModel is the exception as an error status", async () => {
    const error = await errorOf(
      await signedPost(fake, invokePath(), bedrockBody(), { scenario: "inband-error:overloaded_error" }),
    )
    expect([error.status, error.name]).toEqual([503, "ServiceUnavailableException"])
  })

  it("no-usage: no usage in any event and no invocation metrics", async () => {
    const response = await signedPost(fake, streamPath(), bedrockBody(), { scenario: "no-usage" })
    const events = (await readFrames(response)).frames.map(chunkEvent)
    expect(events).toHaveLength(3 + 10 + 3)
    expect(JSON.stringify(events)).not.toContain("usage")
    expect(events.at(-1)).toEqual({ type: "message_stop" })
    const json = (await (
      await signedPost(fake, invokePath(), bedrockBody(), { scenario: "no-usage" })
    ).json()) as Record<string, unknown>
    expect(json["usage"]).toBeUndefined()
  })

  it("tokens:N and max-tokens set the output, in the deltas, message_delta and the metrics", async () => {
    const response = await signedPost(fake, streamPath(), bedrockBody({ max_tokens: 3 }), {
      scenario: "tokens:25",
    })
    const events = (await readFrames(response)).frames.map(chunkEvent)
    expect(events.filter((event) => event["type"] === "content_block_delta")).toHaveLength(25)
    expect(events.at(-2)).toMatchObject({ usage: { output_tokens: 25 } })
    expect(events.at(-1)).toMatchObject({ "amazon-bedrock-invocationMetrics": { outputTokenCount: 25 } })
    const limited = (await (
      await signedPost(fake, invokePath(), bedrockBody({ max_tokens: 20 }), { scenario: "max-tokens" })
    ).json()) as { stop_reason: string; usage: { output_tokens: number } }
    expect(limited).toMatchObject({ stop_reason: "max_tokens", usage: { output_tokens: 20 } })
  })

  it("delay:MS waits before each frame", async () => {
    const started = performance.now()
    const response = await signedPost(fake, streamPath(), bedrockBody({ max_tokens: 2 }), {
      scenario: "delay:40",
    })
    await readFrames(response)
    expect(performance.now() - started).toBeGreaterThanOrEqual(40 * 8 - 20)
  })

  it("error-body-stall:503 sends the exception's status and headers and half its body, then nothing", async () => {
    const controller = new AbortController()
    const response = await signedPost(fake, invokePath(), bedrockBody(), {
      scenario: "error-body-stall:503:2",
      signal: controller.signal,
    })
    expect(response.status).toBe(503)
    expect(response.headers.get("retry-after")).toBe("2")
    expect(response.headers.get("x-amzn-errortype")).toMatch(/^ServiceUnavailableException:/)
    const reader = response.body!.getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toMatch(/^\{"message":/)
    expect(await stillPending(reader.read(), 300)).toBe("pending")
    controller.abort()
  })
})

describe("Bedrock routing", () => {
  it("--kind bedrock serves only Bedrock paths and labels responses", async () => {
    const only = await startFakeProvider({ kind: "bedrock" })
    try {
      const other = await post(only, "/v1/messages", messagesBody())
      expect(other.status).toBe(404)
      expect(other.headers.get("x-amzn-errortype")).toMatch(/^UnknownOperationException:/)
      expect(other.headers.get("x-fake-kind")).toBe("bedrock")
      await other.text()
      const response = await signedPost(only, invokePath(), bedrockBody())
      expect(response.status).toBe(200)
      expect(response.headers.get("x-fake-kind")).toBe("bedrock")
      await response.text()
    } finally {
      await only.close()
    }
  })

  it("an Anthropic stream on the same fake is unchanged", async () => {
    const text = await (
      await post(fake, "/v1/messages", messagesBody({ stream: true, max_tokens: 2 }))
    ).text()
    expect(sseEvents(text)).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ])
  })

  it("the built bin/fakeprovider checks signatures with the credentials of its environment", async () => {
    const child = spawn(
      process.execPath,
      ["bin/fakeprovider", "--listen", "127.0.0.1:0", "--kind", "bedrock"],
      {
        env: { ...process.env, AWS_ACCESS_KEY_ID: "AKIDBIN", AWS_SECRET_ACCESS_KEY: "bin-secret" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    )
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = ""
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString()
          const match = /listening on (\S+)\n/.exec(out)
          if (match !== null) resolve(match[1]!)
        })
        child.once("exit", (code) => reject(new Error(`exited with ${code}`)))
      })
      const handle = { url } as FakeProviderHandle
      const ok = await signedPost(handle, streamPath(), bedrockBody({ max_tokens: 2 }), {
        accessKeyId: "AKIDBIN",
        secretAccessKey: "bin-secret",
      })
      expect(ok.status).toBe(200)
      expect(types((await readFrames(ok)).frames).at(-1)).toBe("message_stop")
      const bad = await signedPost(handle, streamPath(), bedrockBody(), { accessKeyId: "AKIDBIN" })
      expect((await errorOf(bad)).name).toBe("InvalidSignatureException")
    } finally {
      child.kill("SIGTERM")
    }
  })
})
