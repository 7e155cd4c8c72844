// The open-streams client, run by bench/run.mjs in its own process: opens `streams` SSE streams at once to
// one server, waits until every one has delivered its first body bytes, says so, holds them open until the
// bench has sampled the server's memory, then closes them all. One run per process:
// `node bench/hold.mjs '<spec JSON>'`.
//
// spec: { origin, path, headers, body, streams, openTimeoutS, holdS }
//   headers should carry an `x-fake-scenario` that makes the fake upstream stop sending after a few tokens
//   and wait for the client to go away (`max-tokens,hang-after:5-tokens`), so every stream stays open until
//   this process closes it.
// At most `CONNECTING` streams are being opened at a time (the servers' listen backlog is 511; a burst of
// 1,000 SYNs would be partly dropped and retried a second later). A stream counts as open once its status
// is 2xx and its first body chunk arrived; anything else is counted in `errors` by kind.
//
// Prints `phase open N` once every stream is open or `openTimeoutS` has passed (N = streams open), then
// waits for a line `close` on stdin (or `holdS` seconds, whichever is first), closes every stream, and
// prints one JSON line with the result.
import { performance } from "node:perf_hooks"
import { createInterface } from "node:readline"
import { Agent } from "undici"

const spec = JSON.parse(process.argv[2])
const CONNECTING = 100
const payload = Buffer.from(spec.body)

const agent = new Agent({
  connections: spec.streams,
  pipelining: 1,
  connectTimeout: 10_000,
  headersTimeout: spec.openTimeoutS * 1000,
  bodyTimeout: 0,
})

const errors = {}
const countError = (kind) => {
  errors[kind] = (errors[kind] ?? 0) + 1
}
const controllers = []
let open = 0
let connecting = 0
const waiting = []
const slot = () =>
  connecting < CONNECTING ? (connecting++, Promise.resolve()) : new Promise((r) => waiting.push(r))
const release = () => {
  const next = waiting.shift()
  if (next === undefined) connecting--
  else next()
}

/** Opens one stream; resolves when it delivered its first bytes (true) or failed (false). */
const openOne = async () => {
  await slot()
  const controller = new AbortController()
  controllers.push(controller)
  try {
    const { statusCode, body } = await agent.request({
      origin: spec.origin,
      path: spec.path,
      method: "POST",
      headers: spec.headers,
      body: payload,
      signal: controller.signal,
    })
    if (statusCode < 200 || statusCode > 299) {
      countError(`status:${statusCode}`)
      body.destroy()
      return false
    }
    const first = await new Promise((resolve) => {
      body.once("data", () => resolve(true))
      body.once("end", () => resolve(false))
      body.once("error", () => resolve(false))
    })
    // Keep reading (and dropping) whatever else comes, so the server is never held up by a full socket.
    body.on("data", () => {})
    body.on("error", () => {})
    if (!first) {
      countError("ended-before-first-bytes")
      return false
    }
    open++
    return true
  } catch (error) {
    if (!controller.signal.aborted) countError(`error:${error?.code ?? error?.name ?? "unknown"}`)
    return false
  } finally {
    release()
  }
}

const start = performance.now()
const all = Promise.all(Array.from({ length: spec.streams }, openOne))
await Promise.race([all, new Promise((r) => setTimeout(r, spec.openTimeoutS * 1000).unref())])
const openMs = performance.now() - start
const openAtSample = open
process.stdout.write(`phase open ${open}\n`)

await new Promise((resolve) => {
  const timer = setTimeout(resolve, spec.holdS * 1000)
  createInterface({ input: process.stdin }).on("line", (line) => {
    if (line.trim() === "close") {
      clearTimeout(timer)
      resolve()
    }
  })
  process.stdin.on("end", resolve)
})

for (const controller of controllers) controller.abort()
await agent.destroy().catch(() => {})
const errorCount = Object.values(errors).reduce((sum, n) => sum + n, 0)
process.stdout.write(
  `${JSON.stringify({ requested: spec.streams, open: openAtSample, openMs: Math.round(openMs), errors, errorCount })}\n`,
)
process.exit(0)
