import type { IncomingHttpHeaders, IncomingMessage } from "node:http"
import { BodyTimeout, BodyTooLarge, BuffersFull, InvalidRequest } from "../domain/errors.js"
import type { Endpoint } from "../domain/endpoint.js"
import { readRequest, type Parsed } from "../domain/request.js"
import { duplicatedMember, memberKeys } from "../providers/patch.js"

/** Where a body's bytes are taken from as they arrive (the buffer budget, src/ops/BodyBuffers.ts). */
export type TakeBytes = (bytes: number) => boolean

/**
 * Reads the whole request body with plain callbacks (before the request's
 * fiber starts: one `Effect.callback` fewer per request), answering with
 * BodyTooLarge past `limit` bytes (content-length is checked first),
 * BuffersFull when `take` refuses the bytes (a declared length is taken
 * whole before any is read; the rest of the upload is then not read),
 * BodyTimeout when it has not all arrived within `timeoutMs`, or
 * InvalidRequest when the body cannot be read (the client went away).
 */
export const collectBody = (
  req: IncomingMessage,
  limit: number,
  timeoutMs: number,
  take: TakeBytes,
  done: (body: Buffer | BodyTooLarge | BuffersFull | BodyTimeout | InvalidRequest) => void,
  /** Called once the body is to be read (before the first byte): a client waiting on `expect: 100-continue` may send it. */
  accepted?: () => void,
): void => {
  const declared = req.headers["content-length"]
  const length = declared === undefined ? Number.NaN : Number(declared)
  if (length > limit) {
    req.resume()
    return done(new BodyTooLarge({ limitBytes: limit }))
  }
  // A declared length is taken before the first byte is read; a chunked body as its chunks come.
  const sized = Number.isSafeInteger(length) && length >= 0
  if (sized && !take(length)) return done(new BuffersFull())
  const chunks: Array<Buffer> = []
  let size = 0
  let finished = false
  // A body still on its way gets a deadline (`server.body_timeout`). (When the request handler runs, Node has
  // not yet marked even a body that came with the headers complete, so in practice every body gets one.)
  const timer = req.complete
    ? undefined
    : setTimeout(() => {
        req.pause()
        finish(new BodyTimeout({ timeoutMs }))
      }, timeoutMs)
  const finish = (result: Buffer | BodyTooLarge | BuffersFull | BodyTimeout | InvalidRequest) => {
    if (finished) return
    finished = true
    if (timer !== undefined) clearTimeout(timer)
    req.off("data", onData)
    req.off("end", onEnd)
    req.off("error", onFailure)
    req.off("aborted", onFailure)
    req.off("close", onFailure)
    done(result)
  }
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size > limit) {
      req.resume()
      return finish(new BodyTooLarge({ limitBytes: limit }))
    }
    if (!sized && !take(chunk.length)) {
      req.pause()
      return finish(new BuffersFull())
    }
    chunks.push(chunk)
  }
  const onEnd = () => finish(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
  const onFailure = () => finish(new InvalidRequest({ message: "the request body could not be read" }))
  accepted?.()
  req.on("data", onData)
  req.on("end", onEnd)
  req.on("error", onFailure)
  req.on("aborted", onFailure)
  // Closed before its end (a deadline, a reset): whichever of these comes first ends the read.
  req.on("close", onFailure)
}

/** The top-level members Tollgate reads to route, budget and meter a request: each must be given once. */
const READ_MEMBERS = memberKeys([
  "model",
  "stream",
  "stream_options",
  "max_tokens",
  "max_completion_tokens",
  "max_output_tokens",
  "previous_response_id",
])

/** Longest model (route) name accepted, UTF-8 bytes. */
export const MAX_MODEL_CHARS = 256

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : undefined
}

/** Parses the JSON body and reads the few fields Tollgate needs; everything else stays in `raw`. */
export const parseRequest = (
  endpoint: Endpoint,
  raw: Buffer,
  headers: IncomingHttpHeaders,
): Parsed | InvalidRequest => {
  let json: unknown
  try {
    json = JSON.parse(raw.toString("utf8"))
  } catch {
    return new InvalidRequest({ message: "the request body is not valid JSON" })
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return new InvalidRequest({ message: "the request body must be a JSON object" })
  }
  const duplicated = duplicatedMember(raw, READ_MEMBERS)
  if (duplicated !== undefined) {
    // Parsers disagree on which of two equal keys wins; Tollgate budgets on one value (ADR 0047).
    return new InvalidRequest({ message: `${duplicated}: given more than once` })
  }
  const body = json as Record<string, unknown>
  const model = body["model"]
  if (typeof model !== "string" || model.length === 0) {
    return new InvalidRequest({ message: "model: a non-empty string is required" })
  }
  // The model name reaches records, logs and error messages: never a client-sized string.
  if (model.length > MAX_MODEL_CHARS || Buffer.byteLength(model, "utf8") > MAX_MODEL_CHARS) {
    return new InvalidRequest({ message: `model: at most ${MAX_MODEL_CHARS} bytes` })
  }
  const stream = body["stream"]
  if (stream !== undefined && stream !== null && typeof stream !== "boolean") {
    return new InvalidRequest({ message: "stream: must be a boolean" })
  }
  return {
    request: readRequest(endpoint, raw, body, model, (name) => header(headers, name)),
    json: body,
  }
}
