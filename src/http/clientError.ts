import type { Socket } from "node:net"
import { pathApi } from "../domain/endpoint.js"
import { InvalidRequest, renderError } from "../domain/errors.js"

/**
 * What Node's HTTP parser refuses before any handler runs — a malformed
 * request (400), headers over Node's limit (431), a request that took too
 * long to arrive (408) — answered in the error format of the API the
 * request line's path belongs to (when it can be read), with
 * `connection: close`, instead of Node's empty body.
 */

const STATUS: Record<string, { readonly status: number; readonly message: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, message: "the request headers are too large" },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, message: "the request took too long to arrive" },
}

const REASONS: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
}

/** The path of the request line at the start of `raw` (bounded), or "". */
const pathOf = (raw: Buffer | undefined): string => {
  if (raw === undefined) return ""
  const line = raw.subarray(0, 2048).toString("latin1").split("\r\n", 1)[0] ?? ""
  const target = line.split(" ")[1] ?? ""
  const q = target.indexOf("?")
  return q < 0 ? target : target.slice(0, q)
}

/** The server's `clientError` listener. */
export const onClientError = (error: Error & { code?: string; rawPacket?: Buffer }, socket: Socket): void => {
  if (!socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage !== undefined) {
    socket.destroy()
    return
  }
  const known = error.code === undefined ? undefined : STATUS[error.code]
  const status = known?.status ?? 400
  const rendered = renderError(
    pathApi(pathOf(error.rawPacket)),
    new InvalidRequest({ message: known?.message ?? "the request could not be parsed as HTTP" }),
  )
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status]}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(rendered.body)}\r\nconnection: close\r\n\r\n${rendered.body}`,
  )
}
