/**
 * Response adapters at the transport (ADR 0071): a provider whose wire
 * format Tollgate does not read (Bedrock's event stream, Gemini's answers)
 * wraps the dispatch handler, so the head and body reach the attempt loop,
 * the meter and the relay in a format they already read. Backpressure is
 * untouched: the inner handler gets undici's own controller, and its pause
 * stops undici's parser as before.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Dispatcher } from "undici"

/** Turns the upstream body into the inner handler's; throws when the body is broken (a bad frame). */
export interface BodyAdapter {
  /** Upstream bytes, any chunking; the bytes for the inner handler now (undefined: nothing yet). */
  push(chunk: Buffer): Buffer | undefined
  /** The upstream ended: what is still to deliver (undefined: nothing). */
  end(): Buffer | undefined
}

/** The head the inner handler sees, and how its body is adapted (undefined: passed through). */
export interface AdaptedHead {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: BodyAdapter | undefined
}

/** `headers` with a new content type and no content length (the adapted body has another length). */
export const retyped = (headers: IncomingHttpHeaders, contentType: string): IncomingHttpHeaders => {
  const out: IncomingHttpHeaders = { ...headers, "content-type": contentType }
  delete out["content-length"]
  return out
}

/** A body adapter that keeps the whole body (at most `maxBytes`) and delivers `convert`'s result at its end. */
export const wholeBodyAdapter = (maxBytes: number, convert: (body: Buffer) => Buffer): BodyAdapter => {
  let chunks: Array<Buffer> = []
  let size = 0
  return {
    push: (chunk) => {
      size += chunk.length
      if (size > maxBytes) throw new Error(`upstream body larger than ${maxBytes} bytes`)
      chunks.push(chunk)
      return undefined
    },
    end: () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
      chunks = []
      return convert(body)
    },
  }
}

const asError = (cause: unknown): Error => (cause instanceof Error ? cause : new Error(String(cause)))

/**
 * A dispatch handler that adapts the response for `inner`: `adaptHead` maps
 * the status and headers and picks the body's adapter. A body adapter that
 * throws fails the response after its head, as a broken upstream stream
 * does, and the request is aborted.
 */
export class AdaptingHandler implements Dispatcher.DispatchHandler {
  private body: BodyAdapter | undefined = undefined
  private failed = false

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly adaptHead: (status: number, headers: IncomingHttpHeaders) => AdaptedHead,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.inner.onRequestStart?.(controller, context)
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    if (statusCode < 200) return this.inner.onResponseStart?.(controller, statusCode, headers, statusMessage)
    let head: AdaptedHead
    try {
      head = this.adaptHead(statusCode, headers)
    } catch (cause) {
      return this.fail(controller, asError(cause))
    }
    this.body = head.body
    this.inner.onResponseStart?.(controller, head.status, head.headers, statusMessage)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.failed) return
    const body = this.body
    if (body === undefined) return this.inner.onResponseData?.(controller, chunk)
    let out: Buffer | undefined
    try {
      out = body.push(chunk)
    } catch (cause) {
      return this.fail(controller, asError(cause))
    }
    if (out !== undefined && out.length > 0) this.inner.onResponseData?.(controller, out)
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.failed) return
    const body = this.body
    if (body !== undefined) {
      let out: Buffer | undefined
      try {
        out = body.end()
      } catch (cause) {
        return this.fail(controller, asError(cause))
      }
      if (out !== undefined && out.length > 0) this.inner.onResponseData?.(controller, out)
    }
    this.inner.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    if (this.failed) return
    this.failed = true
    this.inner.onResponseError?.(controller, error)
  }

  /** The inner handler gets `error` once, and undici stops the request. */
  private fail(controller: Dispatcher.DispatchController, error: Error): void {
    this.failed = true
    this.inner.onResponseError?.(controller, error)
    if (!controller.aborted) controller.abort(error)
  }
}
