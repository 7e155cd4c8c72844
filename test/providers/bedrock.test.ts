import { EventStreamCodec } from "@smithy/eventstream-codec"
import { Hash } from "@smithy/hash-node"
import { HttpRequest } from "@smithy/protocol-http"
import { SignatureV4 } from "@smithy/signature-v4"
import { fromUtf8, toUtf8 } from "@smithy/util-utf8"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeSseParser } from "../../src/meter/sse.js"
import {
  adaptBedrockHead,
  eventStreamToSse,
  makeSigner,
  MAX_FRAME_BYTES,
  signUpstream,
  THROTTLE_RETRY_AFTER_SECONDS,
} from "../../src/providers/bedrock.js"
import { decodeEventStreamMessage } from "../../src/providers/eventStreamFrame.js"
import { Sha256 } from "../../src/providers/sigv4Hash.js"

const codec = new EventStreamCodec(toUtf8, fromUtf8)

const chunkFrame = (event: Record<string, unknown>): Uint8Array =>
  codec.encode({
    headers: {
      ":event-type": { type: "string", value: "chunk" },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "event" },
    },
    body: fromUtf8(
      JSON.stringify({ bytes: Buffer.from(JSON.stringify(event)).toString("base64"), p: "abcdefgh" }),
    ),
  })

const exceptionFrame = (type: string, message: string): Uint8Array =>
  codec.encode({
    headers: {
      ":exception-type": { type: "string", value: type },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "exception" },
    },
    body: fromUtf8(JSON.stringify({ message })),
  })

const EVENTS = [
  { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 7, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "héllo\nworld" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 3 } },
  { type: "message_stop", "amazon-bedrock-invocationMetrics": { inputTokenCount: 7, outputTokenCount: 3 } },
]

/** The SSE events (name, parsed data) of adapted bytes. */
const sseEvents = (bytes: ReadonlyArray<Buffer | undefined>) => {
  const events: Array<[string, unknown]> = []
  const parser = makeSseParser((event, data) => events.push([event, JSON.parse(data)]))
  for (const b of bytes) if (b !== undefined) parser.push(b)
  parser.end()
  return events
}

describe("Bedrock event stream → Anthropic SSE", () => {
  const whole = Buffer.concat(EVENTS.map(chunkFrame))

  it("each chunk frame becomes the Anthropic event it holds, under its own event name, at any chunking", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: whole.length - 1 }), { maxLength: 12 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b)
        const adapter = eventStreamToSse()
        const out: Array<Buffer | undefined> = []
        let at = 0
        for (const p of [...points, whole.length]) {
          out.push(adapter.push(whole.subarray(at, p)))
          at = p
        }
        out.push(adapter.end())
        expect(sseEvents(out)).toEqual(EVENTS.map((e) => [e.type, e]))
      }),
      { numRuns: 200 },
    )
  })

  it("an exception frame becomes an Anthropic error event of the type the retry table reads", () => {
    const adapter = eventStreamToSse()
    const out = adapter.push(
      Buffer.concat([
        chunkFrame(EVENTS[0]!),
        exceptionFrame("throttlingException", "slow down"),
        exceptionFrame("serviceUnavailableException", "busy"),
        exceptionFrame("modelStreamErrorException", "broke"),
      ]),
    )
    expect(sseEvents([out]).slice(1)).toEqual([
      ["error", { type: "error", error: { type: "rate_limit_error", message: "slow down" } }],
      ["error", { type: "error", error: { type: "overloaded_error", message: "busy" } }],
      ["error", { type: "error", error: { type: "api_error", message: "broke" } }],
    ])
  })

  it("a frame with a bad checksum ends the stream as malformed; one longer than the bound fails the body", () => {
    const frame = Buffer.from(chunkFrame(EVENTS[0]!))
    frame[frame.length - 6]! ^= 0xff
    const adapter = eventStreamToSse()
    const out = adapter
      .push(Buffer.concat([chunkFrame(EVENTS[0]!), frame, chunkFrame(EVENTS[1]!)]))!
      .toString()
    expect(out).toMatch(/^event: message_start\n/)
    expect(out).toMatch(
      /event: message\ndata: malformed Bedrock event-stream frame: [^\n]*checksum[^\n]*\n\n$/i,
    )
    expect(adapter.push(Buffer.from(chunkFrame(EVENTS[1]!)))).toBeUndefined()
    const huge = Buffer.alloc(12)
    huge.writeUInt32BE(MAX_FRAME_BYTES + 1, 0)
    expect(() => eventStreamToSse().push(huge)).toThrow(/frame of/)
  })

  it("holds one partial frame, not the stream", () => {
    const adapter = eventStreamToSse()
    const frame = Buffer.from(chunkFrame(EVENTS[2]!))
    for (let i = 0; i < 100; i++) {
      expect(adapter.push(frame.subarray(0, 10))).toBeUndefined()
      expect(sseEvents([adapter.push(frame.subarray(10))])).toHaveLength(1)
    }
  })
})

describe("event-stream message decoding", () => {
  const headerValue = fc.oneof(
    fc.boolean().map((value) => ({ type: "boolean" as const, value })),
    fc.integer({ min: -128, max: 127 }).map((value) => ({ type: "byte" as const, value })),
    fc.integer({ min: -32768, max: 32767 }).map((value) => ({ type: "short" as const, value })),
    fc.integer().map((value) => ({ type: "integer" as const, value })),
    fc.uint8Array({ maxLength: 20 }).map((value) => ({ type: "binary" as const, value })),
    fc.string({ maxLength: 30 }).map((value) => ({ type: "string" as const, value })),
    fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((value) => ({
      type: "timestamp" as const,
      value,
    })),
    fc.uuid().map((value) => ({ type: "uuid" as const, value })),
  )
  const messageArb = fc.record({
    headers: fc.dictionary(fc.stringMatching(/^:?[a-z-]{1,12}$/), headerValue, { maxKeys: 6 }),
    body: fc.uint8Array({ maxLength: 300 }),
  })

  it("reads every message AWS's codec writes: its string headers and its payload", () => {
    fc.assert(
      fc.property(messageArb, (message) => {
        const decoded = decodeEventStreamMessage(Buffer.from(codec.encode(message as never)))
        const strings = Object.entries(message.headers).filter(([, h]) => h.type === "string")
        expect([...decoded.headers]).toEqual(strings.map(([name, h]) => [name, h.value]))
        expect(Buffer.compare(decoded.body, Buffer.from(message.body))).toBe(0)
      }),
      { numRuns: 300 },
    )
  })

  it("refuses a message with any one byte changed", () => {
    fc.assert(
      fc.property(messageArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (message, at, flip) => {
        const frame = Buffer.from(codec.encode(message as never))
        frame[at % frame.length]! ^= flip
        expect(() => decodeEventStreamMessage(frame)).toThrow(/checksum|length|overrun|type/)
      }),
      { numRuns: 300 },
    )
  })
})

describe("Bedrock error responses", () => {
  const errorBody = (status: number, exception: string, message: string) => {
    const head = adaptBedrockHead(status, {
      "x-amzn-errortype": `${exception}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
      "content-type": "application/json",
      "content-length": "40",
    })
    const body = head.body!
    body.push(Buffer.from(JSON.stringify({ message })))
    return { head, body: JSON.parse(body.end()!.toString()) as unknown }
  }

  it("exceptions map to the statuses of the retry table, with Anthropic error bodies", () => {
    const cases: Array<[number, string, number, string]> = [
      [429, "ThrottlingException", 429, "rate_limit_error"],
      [503, "ServiceUnavailableException", 503, "overloaded_error"],
      [429, "ModelNotReadyException", 529, "overloaded_error"],
      [500, "InternalServerException", 500, "api_error"],
      [400, "ValidationException", 400, "invalid_request_error"],
      [403, "AccessDeniedException", 403, "permission_error"],
      [404, "ResourceNotFoundException", 404, "not_found_error"],
      [403, "InvalidSignatureException", 403, "authentication_error"],
      [418, "SomethingNewException", 418, "invalid_request_error"],
    ]
    for (const [status, exception, mapped, type] of cases) {
      const { head, body } = errorBody(status, exception, `m-${exception}`)
      expect(head.status).toBe(mapped)
      expect(head.headers["content-length"]).toBeUndefined()
      expect(body).toEqual({ type: "error", error: { type, message: `m-${exception}` } })
    }
  })

  it("a throttle without retry-after gets one, so the target cools down; a given one is kept", () => {
    expect(errorBody(429, "ThrottlingException", "x").head.headers["retry-after"]).toBe(
      String(THROTTLE_RETRY_AFTER_SECONDS),
    )
    const kept = adaptBedrockHead(429, { "x-amzn-errortype": "ThrottlingException", "retry-after": "9" })
    expect(kept.headers["retry-after"]).toBe("9")
    expect(errorBody(500, "InternalServerException", "x").head.headers["retry-after"]).toBeUndefined()
  })

  it("a 2xx event stream is retyped as SSE; a 2xx JSON answer passes unchanged", () => {
    const stream = adaptBedrockHead(200, { "content-type": "application/vnd.amazon.eventstream" })
    expect(stream.headers["content-type"]).toMatch(/^text\/event-stream/)
    expect(stream.body).toBeDefined()
    const json = adaptBedrockHead(200, { "content-type": "application/json", "content-length": "10" })
    expect(json.body).toBeUndefined()
    expect(json.headers["content-length"]).toBe("10")
  })
})

describe("SigV4", () => {
  it("the signature verifies with AWS's signer over what undici sends, and changes with the secret", async () => {
    const credentials = { accessKeyId: "AKIDTEST", secretAccessKey: "secret-1", sessionToken: "tok" }
    const upstream = {
      endpoint: "/v1/messages" as const,
      origin: "http://127.0.0.1:8093",
      path: "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream",
      headers: { "content-type": "application/json" },
      body: Buffer.from('{"max_tokens":5}'),
    }
    const signed = await signUpstream(
      makeSigner("us-east-1", () => Promise.resolve(credentials)),
      upstream,
    )
    const auth = signed.headers["authorization"]!
    expect(auth).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDTEST\/\d{8}\/us-east-1\/bedrock\/aws4_request, /)
    expect(signed.headers["x-amz-security-token"]).toBe("tok")
    expect(signed.headers["host"]).toBe("127.0.0.1:8093")
    const amzDate = signed.headers["x-amz-date"]!
    const date = new Date(
      `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
    )
    const verify = async (secretAccessKey: string) => {
      const signedHeaders = /SignedHeaders=([^,]+)/.exec(auth)![1]!.split(";")
      const headers: Record<string, string> = {}
      for (const name of signedHeaders) headers[name] = signed.headers[name]!
      const again = await new SignatureV4({
        service: "bedrock",
        region: "us-east-1",
        credentials: { ...credentials, secretAccessKey },
        sha256: Hash.bind(null, "sha256"),
      }).sign(
        new HttpRequest({
          method: "POST",
          protocol: "http:",
          hostname: "127.0.0.1",
          port: 8093,
          path: upstream.path,
          headers,
          body: upstream.body,
        }),
        { signingDate: date },
      )
      return again.headers["authorization"]
    }
    expect(await verify("secret-1")).toBe(auth)
    expect(await verify("secret-2")).not.toBe(auth)
  })

  it("the signer's hash gives the digests of AWS's own, for any data and key, and again with a key seen before", async () => {
    const digest = async (
      make: new (secret?: never) => { update(d: unknown): void; digest(): Promise<Uint8Array> },
      secret: unknown,
      data: unknown,
    ) => {
      const hash = new make(secret as never)
      hash.update(data)
      return Buffer.from(await hash.digest()).toString("hex")
    }
    const smithy = Hash.bind(null, "sha256") as never
    const reused = new Uint8Array([1, 2, 3, 4])
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constant(undefined), fc.string(), fc.uint8Array({ minLength: 1 }), fc.constant(reused)),
        fc.oneof(fc.string(), fc.uint8Array()),
        async (secret, data) => {
          expect(await digest(Sha256 as never, secret, data)).toBe(await digest(smithy, secret, data))
        },
      ),
      { numRuns: 300 },
    )
  })

  it("every request of a day signs right, also once the signing key is cached", async () => {
    const signer = makeSigner("eu-west-1", () =>
      Promise.resolve({ accessKeyId: "AKIDTEST", secretAccessKey: "secret-1" }),
    )
    const reference = new SignatureV4({
      service: "bedrock",
      region: "eu-west-1",
      credentials: { accessKeyId: "AKIDTEST", secretAccessKey: "secret-1" },
      sha256: Hash.bind(null, "sha256"),
    })
    const signingDate = new Date("2026-12-07T10:00:00Z")
    for (const body of ['{"a":1}', '{"b":2}', "{}"]) {
      const request = () =>
        new HttpRequest({
          method: "POST",
          protocol: "https:",
          hostname: "bedrock-runtime.eu-west-1.amazonaws.com",
          path: "/model/m/invoke",
          headers: { "content-type": "application/json", host: "bedrock-runtime.eu-west-1.amazonaws.com" },
          body: Buffer.from(body),
        })
      const ours = await signer.sign(request(), { signingDate })
      const theirs = await reference.sign(request(), { signingDate })
      expect(ours.headers["authorization"]).toBe(theirs.headers["authorization"])
    }
  })
})
