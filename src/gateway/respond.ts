import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http"
import type { ErrorResponse } from "../domain/errors.js"
import type { Progress, RequestInfo } from "./stages.js"

/** Upstream response headers that reach the client (SPEC: the headers that matter). */
const FORWARDED = ["content-type", "retry-after", "request-id"] as const

/** Tollgate's own headers on a proxied response. */
const tollgateHeaders = (
  info: RequestInfo,
  progress: Progress,
  headers: OutgoingHttpHeaders,
): OutgoingHttpHeaders => {
  headers["x-request-id"] = info.id
  // The response that went out names its target (a held one may be an earlier attempt's); else the last attempt.
  const target = progress.committed?.target ?? progress.tally.target
  if (target !== undefined) {
    headers["x-tollgate-provider"] = target.provider
    headers["x-tollgate-model"] = target.model
  }
  headers["x-tollgate-attempts"] = String(progress.tally.attempts)
  const session = progress.plan?.sessionId
  if (session !== undefined) headers["x-tollgate-session"] = session
  const rate = progress.admission?.headers
  if (rate !== undefined) Object.assign(headers, rate)
  return headers
}

/**
 * The client's response headers for a relayed upstream response; `nowMs` is
 * the commit time, `eventStream` whether the attempt found a 2xx event stream,
 * `translated` whether the body is rewritten into another format.
 */
export const relayHeaders = (
  info: RequestInfo,
  progress: Progress,
  upstream: IncomingHttpHeaders,
  nowMs: number,
  eventStream: boolean,
  translated = false,
): OutgoingHttpHeaders => {
  const headers: Record<string, string | Array<string>> = {}
  for (const name of FORWARDED) {
    const value = upstream[name]
    if (value !== undefined) headers[name] = value
  }
  if (eventStream) headers["cache-control"] = "no-cache"
  else if (translated) {
    // A translated body is JSON of another length.
    headers["content-type"] = "application/json"
  } else {
    // The body is relayed byte for byte: its length stands, and the client gets it without chunked framing
    // (ADR 0040). An event stream is never sized.
    const length = upstream["content-length"]
    if (length !== undefined) headers["content-length"] = length
  }
  // Tollgate's own time and the upstream's until the commit, so a user can see the overhead per request.
  const total = Math.max(0, nowMs - info.startMs)
  const upstreamMs = progress.tally.upstreamMs
  headers["server-timing"] = `tollgate;dur=${Math.max(0, total - upstreamMs)}, upstream;dur=${upstreamMs}`
  return tollgateHeaders(info, progress, headers)
}

/** Writes an error response that Tollgate made itself (see `renderError`), unless the response already started. */
export const writeError = (
  res: ServerResponse,
  rendered: ErrorResponse,
  request?: { readonly info: RequestInfo; readonly progress: Progress },
): void => {
  if (res.headersSent || res.destroyed) return
  const headers: OutgoingHttpHeaders = { ...rendered.headers }
  // Sized, like a relayed body with a known length (ADR 0040): no chunked framing for a body Tollgate made whole.
  headers["content-length"] = String(Buffer.byteLength(rendered.body))
  if (request !== undefined) tollgateHeaders(request.info, request.progress, headers)
  const req = res.req
  if (req !== undefined && !req.complete && headers["connection"] !== "close") linger(req, res)
  res.writeHead(rendered.status, headers)
  res.end(rendered.body)
}

/** How long a refused upload may go on arriving after its answer, ms. */
const LINGER_MS = 5_000

/**
 * A refusal answered before its upload arrived (admission before the body,
 * ADR 0049): closing at once with bytes still arriving would reset the
 * connection, and a reset can destroy the answer before the client reads it
 * (RFC 9112 §9.6). So the rest of the upload is read and dropped as it
 * arrives — never held: a paused connection would hold its last socket
 * reads — for up to LINGER_MS; a client that finishes its upload may send its
 * next request, one still sending then is cut off.
 */
const linger = (req: IncomingMessage, res: ServerResponse): void => {
  const socket = res.socket
  if (socket === null) return
  req.resume()
  const timer = setTimeout(() => socket.destroy(), LINGER_MS)
  const done = () => clearTimeout(timer)
  req.once("end", done)
  socket.once("close", done)
}
