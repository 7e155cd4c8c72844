// The Node limit Tollgate is compared with: a node:http server that forwards each POST to one upstream
// through a keep-alive undici Agent and relays the response with backpressure. No auth, no parsing, no
// metering. Usage: node bench/plain-proxy.mjs --upstream http://127.0.0.1:PORT [--listen 127.0.0.1:0]
// Prints `listening on http://HOST:PORT` when ready; exits on SIGTERM/SIGINT or when its stdin pipe closes.
import { fstatSync } from "node:fs"
import http from "node:http"
import { parseArgs } from "node:util"
import { Agent } from "undici"

const { values } = parseArgs({
  options: {
    listen: { type: "string", default: "127.0.0.1:0" },
    upstream: { type: "string" },
  },
})
if (values.upstream === undefined) {
  process.stderr.write("plain-proxy: --upstream URL is required\n")
  process.exit(1)
}
const origin = new URL(values.upstream).origin
const agent = new Agent({ keepAliveTimeout: 30_000, pipelining: 1 })

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus ones undici sets itself. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
])

const requestHeaders = (incoming) => {
  const out = {}
  for (const name in incoming) {
    if (!HOP_BY_HOP.has(name) && name !== "content-length") out[name] = incoming[name]
  }
  return out
}

const responseHeaders = (upstream) => {
  const out = {}
  for (const name in upstream) {
    if (!HOP_BY_HOP.has(name)) out[name] = upstream[name]
  }
  return out
}

const fail = (res, message) => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = JSON.stringify({ type: "error", error: { type: "api_error", message } })
  res.writeHead(502, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
}

const relay = (upstreamBody, res) => {
  upstreamBody.on("data", (chunk) => {
    if (!res.write(chunk)) upstreamBody.pause()
  })
  res.on("drain", () => upstreamBody.resume())
  upstreamBody.on("end", () => res.end())
  upstreamBody.on("error", () => res.destroy())
}

const forward = (req, res, body) => {
  const controller = new AbortController()
  res.on("close", () => {
    if (!res.writableFinished) controller.abort()
  })
  agent
    .request({
      origin,
      path: req.url,
      method: req.method,
      headers: requestHeaders(req.headers),
      body,
      signal: controller.signal,
    })
    .then(
      ({ statusCode, headers, body: upstreamBody }) => {
        if (res.destroyed) {
          upstreamBody.destroy()
          return
        }
        res.writeHead(statusCode, responseHeaders(headers))
        relay(upstreamBody, res)
      },
      (error) => fail(res, error instanceof Error ? error.message : String(error)),
    )
}

const server = http.createServer((req, res) => {
  const chunks = []
  req.on("data", (chunk) => chunks.push(chunk))
  req.on("end", () => forward(req, res, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
  req.on("error", () => res.destroy())
})
server.keepAliveTimeout = 60_000

const stop = () => {
  server.close()
  server.closeAllConnections()
  void agent.close()
  process.exit(0)
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
const stdin = fstatSync(0)
if (stdin.isFIFO() || stdin.isSocket()) {
  process.stdin.on("end", stop)
  process.stdin.resume()
}

const separator = values.listen.lastIndexOf(":")
server.listen(Number(values.listen.slice(separator + 1)), values.listen.slice(0, separator), () => {
  const address = server.address()
  process.stdout.write(`listening on http://${address.address}:${address.port}\n`)
})
