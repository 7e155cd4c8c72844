/**
 * One request/response exchange of the fake provider: the request log entry, byte counting, backpressure,
 * cancellable waits, and the ways a response can end (normally, hanging, or with a dropped connection).
 */
import type { ServerResponse } from "node:http"

/** One logged request, as `GET /_fake/requests` shows it. */
export interface FakeRequest {
  readonly method: string
  /** Path and query string as received. */
  readonly path: string
  /** Request headers with lower-case names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body, or the raw text when it is not JSON ("" when there was none). */
  body: unknown
  /** True when the client closed the connection before the response ended. */
  aborted: boolean
  /** Response body bytes written so far. */
  bytes_sent: number
}

/** Response headers, values as strings. */
export type Headers = Record<string, string>

/** A piece of a response body: text (written as UTF-8) or bytes (Bedrock's event-stream frames). */
export type Chunk = string | Uint8Array

/** The response side of one request. */
export class Exchange {
  /** True once the connection or response closed (client gone, reset, or ended). */
  closed = false
  private selfClosed = false
  private wake: (() => void) | undefined = undefined
  private readonly onClose: Promise<void>

  constructor(
    private readonly res: ServerResponse,
    readonly entry: FakeRequest,
    private readonly extraHeaders: Headers,
  ) {
    this.onClose = new Promise((resolve) => {
      res.once("close", () => {
        this.closed = true
        if (!res.writableEnded && !this.selfClosed) entry.aborted = true
        this.wake?.()
        resolve()
      })
    })
  }

  /** Sends the status line and headers now, before any body byte. */
  writeHead(status: number, headers: Headers): void {
    if (this.closed || this.res.headersSent) return
    this.res.writeHead(status, { ...headers, ...this.extraHeaders })
    this.res.flushHeaders()
  }

  /**
   * Writes one body chunk and counts its bytes. Returns a promise only when the socket buffer is full;
   * it resolves on `drain` or when the connection closes.
   */
  write(chunk: Chunk): Promise<void> | undefined {
    if (this.closed) return undefined
    this.entry.bytes_sent += Buffer.byteLength(chunk)
    if (this.res.write(chunk)) return undefined
    return new Promise((resolve) => {
      const done = (): void => {
        this.res.off("drain", done)
        this.res.off("close", done)
        resolve()
      }
      this.res.once("drain", done)
      this.res.once("close", done)
    })
  }

  /** Ends the response, optionally with a last chunk. */
  end(chunk?: Chunk): void {
    if (this.closed) return
    if (chunk !== undefined) this.entry.bytes_sent += Buffer.byteLength(chunk)
    if (chunk === undefined) this.res.end()
    else this.res.end(chunk)
  }

  /** Sends a complete response. */
  respond(status: number, headers: Headers, body: string): void {
    this.writeHead(status, { ...headers, "content-length": String(Buffer.byteLength(body)) })
    this.end(body)
  }

  /** Resolves when the client goes away (or the server closes the connection). */
  waitClose(): Promise<void> {
    return this.onClose
  }

  /** Waits `ms` milliseconds, or less when the connection closes first. */
  sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.closed) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wake?.(), ms)
      this.wake = () => {
        this.wake = undefined
        clearTimeout(timer)
        resolve()
      }
    })
  }

  /**
   * Closes the HTTP/1 connection in the middle of the response: what was written is flushed, then the
   * socket ends without the chunked terminator, so the client sees a connection failure.
   */
  dropConnection(): void {
    const socket = this.res.socket
    this.selfClosed = true
    if (socket === null || socket.destroyed) return
    socket.once("finish", () => socket.destroy())
    socket.end()
  }
}
