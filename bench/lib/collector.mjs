// A tiny OTLP/HTTP sink for the tracing rows (issue #18): Tollgate POSTs its spans to
// `{otlp_endpoint}/v1/traces`; this server reads each request body whole (so the exporter pays for
// sending all of it), counts posts and bytes, in all and per request path (so servers given different
// `otlp_endpoint` paths on the same sink are told apart), and answers 200 `{}` (an empty
// ExportTraceServiceResponse, as OTLP/HTTP JSON). It decodes nothing: it is there to be cheap, not to
// check the spans. It runs in the bench's own process, not in the measured server's.
import { createServer } from "node:http"

const OK = Buffer.from("{}")
const HEADERS = { "content-type": "application/json", "content-length": String(OK.length) }

/**
 * Starts the sink on 127.0.0.1 (a free port); `url` is the root to configure as `otlp_endpoint` (any path
 * under it works too). `stats`: `{ posts, bytes, byPath: { [path]: { posts, bytes } } }`, live.
 */
export const startCollector = async () => {
  const stats = { posts: 0, bytes: 0, byPath: {} }
  const server = createServer((req, res) => {
    const path = (stats.byPath[req.url] ??= { posts: 0, bytes: 0 })
    req.on("data", (chunk) => {
      stats.bytes += chunk.length
      path.bytes += chunk.length
    })
    req.on("end", () => {
      stats.posts++
      path.posts++
      res.writeHead(200, HEADERS)
      res.end(OK)
    })
    req.on("error", () => res.destroy())
  })
  server.keepAliveTimeout = 60_000
  await new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", resolve)
  })
  const { port } = server.address()
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
