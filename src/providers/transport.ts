/**
 * Provider transport over undici: the upstream request, keep-alive pools,
 * and `UpstreamCall`, the dispatch handler every upstream request goes
 * through (the gateway's attempts and relay, and `ProviderClient.send`).
 */
import { Effect } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { Agent, type Dispatcher } from "undici"
import type { Endpoint } from "../domain/endpoint.js"

/** One upstream HTTP request, ready for undici. */
export interface UpstreamRequest {
  /** The API the request calls (how its response reads); Vertex calls the Messages API under its own path. */
  readonly endpoint: Endpoint
  readonly origin: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: Buffer
}

/** Idle upstream sockets stay in a pool this long, ms. */
const KEEP_ALIVE_MS = 30_000

/**
 * Keep-alive pools for one provider, one undici `Agent` per connect timeout
 * (ms; undici takes it per Agent), made on first use and destroyed when the
 * scope closes.
 */
export const makePools = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => new Map<number, Agent>()),
    (agents) => Effect.promise(() => Promise.all([...agents.values()].map((agent) => agent.destroy()))),
  ),
  (agents) =>
    (connectMs: number): Dispatcher => {
      let agent = agents.get(connectMs)
      if (agent === undefined) {
        agent = new Agent({
          connect: { timeout: connectMs },
          keepAliveTimeout: KEEP_ALIVE_MS,
          // The caller's own deadlines govern headers and body; undici's would race them.
          headersTimeout: 0,
          bodyTimeout: 0,
        })
        agents.set(connectMs, agent)
      }
      return agent
    },
)

/**
 * `body`, or a copy of it when it is a slice of a much larger memory block (Node's shared allocation pool,
 * 64 KiB on Node 24, or a socket read): undici holds the body until the response ends, and a stream open for
 * minutes would keep the whole block alive (issue #21: memory per open stream).
 */
const ownBuffer = (body: Buffer): Buffer => {
  if (body.buffer.byteLength - body.length <= OWN_BUFFER_SLACK_BYTES) return body
  const own = Buffer.allocUnsafeSlow(body.length)
  body.copy(own)
  return own
}

/** How many bytes more than the body its memory block may have before the body is copied out of it. */
const OWN_BUFFER_SLACK_BYTES = 1024

/** Sends `upstream` (a POST) through `dispatcher`; `handler` gets the response. */
export const dispatchUpstream = (
  dispatcher: Dispatcher,
  upstream: UpstreamRequest,
  handler: Dispatcher.DispatchHandler,
): void => {
  dispatcher.dispatch(
    {
      origin: upstream.origin,
      path: upstream.path,
      method: "POST",
      headers: upstream.headers,
      body: ownBuffer(upstream.body),
    },
    handler,
  )
}

/** An error undici reports for an upstream request (connect failure, reset, …), with its code. */
export type UpstreamError = Error & { readonly code?: string }

/** The failure is the connect timeout running out (every other failure before the head is a failed connection). */
export const isConnectTimeout = (error: UpstreamError): boolean => error.code === "UND_ERR_CONNECT_TIMEOUT"

/** Longest text `describeUpstreamError` returns, characters. */
export const MAX_CAUSE_LENGTH = 200

/** `scheme://user:password@` → `scheme://`: the userinfo of any URL in a text. */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]*@/gi

/** Control characters (a message is one line of a log). */
const CONTROL = /[\u0000-\u001f\u007f]+/g

/** `text` on one line, without URL userinfo, at most `MAX_CAUSE_LENGTH` characters. */
export const boundedCause = (text: string): string => {
  const clean = text.replace(USERINFO, "$1").replace(CONTROL, " ").trim()
  return clean.length <= MAX_CAUSE_LENGTH ? clean : `${clean.slice(0, MAX_CAUSE_LENGTH - 1)}…`
}

type ErrorFields = Error & {
  readonly code?: unknown
  readonly errors?: unknown
  readonly socket?: { readonly remoteAddress?: unknown; readonly remotePort?: unknown } | null
}

/** The innermost error of `error`'s `cause` chain (a wrapper such as fetch's `fetch failed` says less). */
const rootError = (error: Error): ErrorFields => {
  let current: Error = error
  for (let depth = 0; depth < 5 && current.cause instanceof Error; depth++) current = current.cause
  return current
}

/** An error's own text: its message (the messages of an `AggregateError`'s errors when it has none). */
const messageOf = (error: ErrorFields): string => {
  if (error.message !== "") return error.message
  if (Array.isArray(error.errors)) {
    const messages = [
      ...new Set(error.errors.map((e: unknown) => (e instanceof Error ? e.message : "")).filter(Boolean)),
    ]
    if (messages.length > 0) return messages.join("; ")
  }
  return error.name
}

/**
 * The low-level cause of an upstream request that failed, for the 502's
 * `targets[].cause` and the log: the system error's own message
 * (`connect ECONNREFUSED 127.0.0.1:9`, `getaddrinfo ENOTFOUND api.example.com`),
 * a TLS or undici error's code and message
 * (`DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate`), a closed socket's
 * peer, `connect timeout after 5000 ms (host:port)` (`connectMs`, the
 * timeout in force). Built only from the error's message, code and peer
 * address — never from the request (no headers, no keys) — with any URL
 * userinfo removed, on one line, at most `MAX_CAUSE_LENGTH` characters.
 */
export const describeUpstreamError = (error: UpstreamError, connectMs?: number): string => {
  if (isConnectTimeout(error)) {
    const address = /attempted address: ([^,)\s]+)/.exec(error.message)?.[1]
    const after = connectMs === undefined ? "" : ` after ${connectMs} ms`
    return boundedCause(`connect timeout${after}${address === undefined ? "" : ` (${address})`}`)
  }
  const root = rootError(error)
  const message = messageOf(root)
  const code = typeof root.code === "string" ? root.code : undefined
  let text = code === undefined || message.includes(code) ? message : `${code}: ${message}`
  const socket = root.socket
  if (code === "UND_ERR_SOCKET" && typeof socket?.remoteAddress === "string") {
    text += ` (${socket.remoteAddress}${typeof socket.remotePort === "number" ? `:${socket.remotePort}` : ""})`
  }
  return boundedCause(text)
}

/** What reads an upstream body: the attempt's prelude reader, then the relay; or `send`'s body stream. */
export interface BodyReader {
  readonly onData: (chunk: Buffer) => void
  /**
   * Several queued chunks at once (ADR 0038): takes chunks from the start
   * of `chunks`, at least one, and returns how many it took (fewer when it
   * paused or failed on one of them; the rest stay queued). Without it,
   * queued chunks go to `onData` one by one.
   */
  readonly onDataMany?: (chunks: ReadonlyArray<Buffer>) => number
  readonly onEnd: () => void
  readonly onError: (error: UpstreamError) => void
}

/**
 * Bytes queued with no reader attached before the call pauses undici (the
 * relay's one 32 KiB buffer). An error body or a short JSON body usually
 * ends within it while the attempt loop decides, so the connection goes
 * back to the pool instead of being aborted.
 */
export const QUEUE_LIMIT_BYTES = 32 * 1024

const ignore = (): void => {}

/** The reason undici is given when Tollgate closes a call (one object: closing allocates no error). */
const CLOSED_BY_TOLLGATE: UpstreamError = Object.assign(new Error("closed by Tollgate"), {
  code: "TOLLGATE_CLOSED",
})

/**
 * One upstream request, as undici's dispatch handler (ADR 0034): the
 * response head and each body chunk arrive as calls, with no `Readable`
 * stream per response. Whoever reads the body attaches a `BodyReader`;
 * while none is attached, chunks are queued up to `QUEUE_LIMIT_BYTES`, then
 * the call pauses; a reader pauses it for backpressure. A pause stops
 * undici's parser after the chunk in hand (queued too), so the socket is
 * not read further and the upstream sees backpressure; `resume` goes on.
 *
 * `onHead` runs once, when the status and headers arrive; `onFailure` when
 * the request fails before that. Later failures go to the reader (or wait
 * in `error` for the next one). `close` aborts the request unless it already
 * ended; after it nothing is delivered.
 */
export class UpstreamCall implements Dispatcher.DispatchHandler {
  status = 0
  headers: IncomingHttpHeaders = {}
  /** The response ended (all of it parsed; queued chunks may still wait for a reader). */
  ended = false
  /** A failure after the head, kept for the next reader when none is attached. */
  error: UpstreamError | undefined = undefined
  /** Bytes received but not yet given to a reader. */
  queuedBytes = 0
  private queued: Array<Buffer> | undefined = undefined
  private reader: BodyReader | undefined = undefined
  private controller: Dispatcher.DispatchController | undefined = undefined
  private paused = false
  private closed = false
  private headed = false
  /** `flush` is delivering: what arrives or attaches meanwhile waits for its loop (order is kept). */
  private flushing = false

  /**
   * Each runs at most once, and neither after the head: the head drops both, so a response that streams
   * for minutes does not keep alive what the caller's closures hold (its request, its attempt state).
   */
  private onHead: (call: UpstreamCall) => void
  private onFailure: (error: UpstreamError) => void

  constructor(onHead: (call: UpstreamCall) => void, onFailure: (error: UpstreamError) => void) {
    this.onHead = onHead
    this.onFailure = onFailure
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Closed while the request waited for a connection: it is never written.
    if (this.closed) return controller.abort(CLOSED_BY_TOLLGATE)
    this.controller = controller
    if (this.paused) controller.pause()
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // Informational (1xx) heads come before the response's own; undici handles them.
    if (this.closed || statusCode < 200) return
    // undici keeps the raw header lines on the controller until the response ends: views into the socket
    // read that brought them, which would stay alive (~3 KB) for as long as the stream is open. `headers`
    // has them parsed.
    controller.rawHeaders = null
    this.headed = true
    this.status = statusCode
    this.headers = headers
    const onHead = this.onHead
    this.onHead = ignore
    this.onFailure = ignore
    onHead(this)
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.closed) return
    const reader = this.reader
    if (reader === undefined || this.paused || this.flushing) {
      ;(this.queued ??= []).push(chunk)
      this.queuedBytes += chunk.length
      // Nobody reads it yet: past the limit, stop undici after this chunk until someone resumes.
      if (this.queuedBytes >= QUEUE_LIMIT_BYTES) this.pause()
      return
    }
    reader.onData(chunk)
  }

  onResponseEnd(): void {
    if (this.closed) return
    this.ended = true
    // The controller's pause and resume act on the socket's parser, which now serves the next request.
    this.controller = undefined
    if (this.queued === undefined && !this.paused && !this.flushing) this.finish()
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.closed) return
    if (!this.headed) {
      this.closed = true
      return this.onFailure(error)
    }
    this.error = error
    this.controller = undefined
    if (this.queued === undefined && !this.paused && !this.flushing) this.finish()
  }

  /**
   * Makes `reader` the one that gets the body: what is queued, then the end
   * or a failure — at once unless the call is paused (then from `resume`).
   */
  attach(reader: BodyReader): void {
    this.reader = reader
    this.flush()
  }

  /** Stops delivering to the current reader; what arrives is queued for the next one. */
  detach(): void {
    this.reader = undefined
  }

  /** Stops reading upstream after the chunk being delivered. */
  pause(): void {
    this.paused = true
    this.controller?.pause()
  }

  /** Delivers what is queued, then reads upstream again (unless the reader paused meanwhile). */
  resume(): void {
    if (this.closed || !this.paused) return
    this.paused = false
    this.flush()
    if (!this.paused && !this.closed) this.controller?.resume()
  }

  /** Aborts the request (unless it already ended) and delivers nothing more. Idempotent. */
  close(): void {
    if (this.closed) return
    this.closed = true
    this.reader = undefined
    this.queued = undefined
    this.queuedBytes = 0
    if (!this.ended) this.controller?.abort(CLOSED_BY_TOLLGATE)
    this.controller = undefined
  }

  /**
   * Delivers the queue, then the end or a failure. Outside undici's parser
   * callbacks (which catch what a reader throws and abort the request), so
   * a reader that throws here gets the error as a failure, and the request
   * is aborted, rather than the exception reaching the event loop.
   */
  private flush(): void {
    // A reader that attaches, resumes or receives while the queue is delivered is served by this loop.
    if (this.flushing) return
    this.flushing = true
    let reader = this.reader
    try {
      let queued = this.queued
      while (queued !== undefined && !this.paused && reader !== undefined) {
        if (queued.length > 1 && reader.onDataMany !== undefined) {
          // The whole queue leaves before the reader runs (it may pause, close or detach the call); what it
          // does not take goes back in front of anything that arrived meanwhile.
          this.queued = undefined
          this.queuedBytes = 0
          const taken = reader.onDataMany(queued)
          if (this.closed) return
          // (The catch below closes the call, which drops the queue.)
          if (!(taken >= 1 && taken <= queued.length))
            throw new Error(`a body reader took ${String(taken)} of ${queued.length} chunks`)
          if (taken < queued.length) this.requeue(queued.slice(taken))
        } else {
          const chunk = queued.shift()!
          this.queuedBytes -= chunk.length
          if (queued.length === 0) this.queued = queued = undefined
          reader.onData(chunk)
          if (this.closed) return
        }
        queued = this.queued
        reader = this.reader
      }
      if (this.queued === undefined && !this.paused) this.finish()
    } catch (cause) {
      this.close()
      const error: UpstreamError = cause instanceof Error ? cause : new Error(String(cause))
      reader?.onError(error)
    } finally {
      this.flushing = false
    }
  }

  /** Puts chunks a reader did not take back in front of the queue. */
  private requeue(chunks: Array<Buffer>): void {
    let bytes = 0
    for (const chunk of chunks) bytes += chunk.length
    this.queued = this.queued === undefined ? chunks : chunks.concat(this.queued)
    this.queuedBytes += bytes
  }

  /** Gives the reader the end or the failure, if there is one, and detaches it (each is delivered once). */
  private finish(): void {
    const reader = this.reader
    if (reader === undefined || (this.error === undefined && !this.ended)) return
    this.reader = undefined
    if (this.error !== undefined) reader.onError(this.error)
    else reader.onEnd()
  }
}
