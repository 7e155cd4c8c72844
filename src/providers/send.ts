/**
 * `ProviderClient.send`: one upstream request as a scoped resource, its body
 * as a pulled `Stream` over `UpstreamCall`, its usage metered as the body is
 * pulled.
 */
import { Cause, Deferred, Effect, Stream } from "effect"
import type { Scope } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { IncomingHttpHeaders } from "node:http"
import { readRequest, type ParsedRequest } from "../domain/request.js"
import type { Usage } from "../domain/usage.js"
import { estimateInputTokens } from "../domain/estimate.js"
import { makeBodyUsage, type BodyUsage, type UsageBasis } from "./bodyUsage.js"
import type { ProviderClient, ProviderResponse, SendRequest } from "./ProviderClient.js"
import { ProviderError } from "./ProviderError.js"
import {
  describeUpstreamError,
  isConnectTimeout,
  UpstreamCall,
  type BodyReader,
  type UpstreamError,
} from "./transport.js"

type Client = Omit<ProviderClient["Service"], "send">

type Chunks = NonEmptyReadonlyArray<Uint8Array>

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const lowerCased = (headers: Readonly<Record<string, string>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value
  return out
}

/**
 * Headers a caller may add to its request: not credentials (the client's own go upstream, never a
 * caller's), not the framing or hop-by-hop headers the transport sets.
 */
const NOT_FROM_CALLER = new Set([
  "authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
  "x-amz-date",
  "x-amz-security-token",
  "x-amz-content-sha256",
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-authorization",
  "te",
  "trailer",
  "upgrade",
])

const callerHeaders = (headers: Record<string, string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name in headers) if (!NOT_FROM_CALLER.has(name)) out[name] = headers[name]!
  return out
}

const flatHeaders = (headers: IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

/** The send request as the builders take it (the gateway's `ParsedRequest`), with what metering needs. */
interface Prepared {
  readonly parsed: ParsedRequest
  readonly model: string
  readonly headers: Record<string, string>
  readonly basis: UsageBasis
}

const prepare = (client: Client, request: SendRequest): Prepared | ProviderError => {
  const invalid = (message: string) =>
    new ProviderError({ reason: "InvalidRequest", provider: client.name, message })
  const { endpoint } = request
  if (!client.serves(endpoint)) return invalid(`${client.name} (${client.kind}) does not serve ${endpoint}`)
  let raw: Buffer
  let body: unknown
  try {
    if (request.body instanceof Uint8Array) {
      raw = Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength)
      body = JSON.parse(raw.toString("utf8"))
    } else {
      body = request.body
      raw = Buffer.from(JSON.stringify(body), "utf8")
    }
  } catch (cause) {
    return invalid(`the body is not JSON: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
  if (!isObject(body)) return invalid("the body must be a JSON object")
  const model = request.model ?? body["model"]
  if (typeof model !== "string" || model === "") return invalid("no model: give `model` or a body `model`")
  const headers = request.headers === undefined ? {} : lowerCased(request.headers)
  const countTokens = endpoint === "/v1/messages/count_tokens"
  const parsed = readRequest(endpoint, raw, body, model, (name) => headers[name])
  const refusal = client.refuse?.(parsed)
  if (refusal !== undefined) return invalid(refusal)
  return {
    parsed,
    model,
    headers,
    basis: {
      endpoint,
      inputEstimate: countTokens ? 0 : estimateInputTokens(body),
      maxTokens: parsed.maxTokens,
    },
  }
}

/** The failure of a request before its response head; the message is the low-level cause (`describeUpstreamError`). */
const failureOf = (provider: string, error: UpstreamError, connectMs: number): ProviderError =>
  new ProviderError({
    reason: isConnectTimeout(error) ? "ConnectTimeout" : "ConnectionFailed",
    provider,
    message: describeUpstreamError(error, connectMs),
  })

const bodyFailed = (provider: string, message: string) =>
  new ProviderError({ reason: "BodyFailed", provider, message })

/**
 * A response body as a pulled stream: each pull attaches a reader to the
 * paused call and resumes it; the first chunks that arrive pause it again
 * and are metered, then handed over. `close` (the scope closed) fails the
 * pull waiting, if any, and every later one.
 */
const responseBody = (call: UpstreamCall, provider: string, meter: BodyUsage, settle: () => void) => {
  let state: "open" | "ended" | "closed" = "open"
  let failure: ProviderError | undefined
  let waiting: ((effect: Effect.Effect<Chunks, ProviderError | Cause.Done>) => void) | undefined
  const pull = Effect.callback<Chunks, ProviderError | Cause.Done>((resume) => {
    if (failure !== undefined) return resume(Effect.fail(failure))
    if (state === "ended") return resume(Cause.done())
    if (state === "closed") return resume(Effect.fail(bodyFailed(provider, "the response's scope closed")))
    waiting = resume
    const take = (chunks: ReadonlyArray<Uint8Array>) => {
      // Paused before the chunks are handed over: undici reads no further until the next pull.
      call.pause()
      call.detach()
      waiting = undefined
      for (const chunk of chunks) meter.push(chunk)
      resume(Effect.succeed(chunks as Chunks))
    }
    const reader: BodyReader = {
      onData: (chunk) => take([chunk]),
      onDataMany: (chunks) => {
        take(chunks)
        return chunks.length
      },
      onEnd: () => {
        state = "ended"
        waiting = undefined
        settle()
        resume(Cause.done())
      },
      onError: (error) => {
        failure = bodyFailed(provider, describeUpstreamError(error))
        waiting = undefined
        settle()
        resume(Effect.fail(failure))
      },
    }
    call.attach(reader)
    call.resume()
    // The reader was interrupted (a timeout, the fiber ended): the body will not be read, so the upstream
    // request is aborted at once and the usage is what was pulled.
    return Effect.sync(() => {
      waiting = undefined
      if (state === "open") state = "closed"
      call.close()
      settle()
    })
  })
  return {
    stream: Stream.fromPull(Effect.succeed(pull)),
    close: () => {
      if (state === "open") state = "closed"
      const resume = waiting
      waiting = undefined
      resume?.(Effect.fail(bodyFailed(provider, "the response's scope closed")))
    },
  }
}

/**
 * `send` for `client`, connecting within `connectMs`. The call is closed by
 * a finalizer of the caller's scope (an abort unless the response ended),
 * and by the canceler of the wait for the head; the usage resolves at the
 * end of the body or in that finalizer.
 */
export const makeSend = (client: Client, connectMs: number) =>
  Effect.fnUntraced(function* (
    request: SendRequest,
  ): Effect.fn.Return<ProviderResponse, ProviderError, Scope.Scope> {
    const prepared = prepare(client, request)
    if (prepared instanceof ProviderError) return yield* prepared
    const built = client.build(prepared.parsed, prepared.model)
    const upstream = { ...built, headers: { ...callerHeaders(prepared.headers), ...built.headers } }
    let call: UpstreamCall | undefined
    let body: ReturnType<typeof responseBody> | undefined
    const usage = Deferred.makeUnsafe<Usage>()
    let meter: BodyUsage | undefined
    const settle = () => {
      if (meter !== undefined && !Deferred.isDoneUnsafe(usage))
        Deferred.doneUnsafe(usage, Effect.succeed(meter.result()))
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        call?.close()
        settle()
        body?.close()
      }),
    )
    const head = yield* Effect.callback<UpstreamCall, ProviderError>((resume) => {
      call = new UpstreamCall(
        (c) => {
          // Nobody reads yet: the body waits for the first pull.
          c.pause()
          resume(Effect.succeed(c))
        },
        (error) => resume(Effect.fail(failureOf(client.name, error, connectMs))),
      )
      try {
        client.dispatch(upstream, call, connectMs)
      } catch (cause) {
        call.close()
        const message = cause instanceof Error ? cause.message : String(cause)
        resume(Effect.fail(new ProviderError({ reason: "InvalidRequest", provider: client.name, message })))
      }
      return Effect.sync(() => call?.close())
    })
    const contentType = head.headers["content-type"]
    meter = makeBodyUsage(
      prepared.basis,
      head.status,
      typeof contentType === "string" ? contentType : undefined,
      request.endpoint === "/v1/messages/count_tokens",
    )
    body = responseBody(head, client.name, meter, settle)
    return {
      status: head.status,
      headers: flatHeaders(head.headers),
      body: body.stream,
      usage: Deferred.await(usage),
    }
  })
