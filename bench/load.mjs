// The load generator, run by bench/run.mjs in its own process (so it never shares an event loop with a
// server under test). One run per process: `node bench/load.mjs '<spec JSON>'`.
//
// spec: { origin, path, headers, body, stream, expect, expectHeaders, validate, mode, warmupS, durationS,
//         concurrency, rps }
//   mode "closed":  `concurrency` requests always in flight for warmupS + durationS;
//                   rate = responses completed inside the measured window ÷ durationS.
//   mode "open":    one request every 1/rps s scheduled by time, not by completion (open loop, so a slow
//                   server cannot slow the sender down); latency = completion − scheduled send time, for
//                   requests scheduled inside the measured window.
// A response counts only when its status is 2xx, it has the `expectHeaders` (name: true for present, or the
// exact value), and its body was read to the end and contains `expect` (streams: in their last 256 bytes,
// so a stream cut short does not count), and, when `validate` names one of bench/lib/validate.mjs's checks,
// its whole body passes it (else `invalid-body:REASON`). Everything else is counted in
// `errors` by kind, warm-up included. Each request has 10 s for headers and 10 s between body chunks.
//
// Prints `phase measure-start` / `phase measure-end` lines at the window edges (run.mjs samples the
// server's CPU time there), then one JSON line with the result.
import { performance } from "node:perf_hooks"
import { Pool } from "undici"
import { headerProblem } from "./lib/setup.mjs"
import { bodyProblem } from "./lib/validate.mjs"

const spec = JSON.parse(process.argv[2])
const payload = Buffer.from(spec.body)
const expect = Buffer.from(spec.expect)
/** How many bytes at the end of a stream must hold `expect`. */
const TAIL = 256
const warmupMs = spec.warmupS * 1000
const durationMs = spec.durationS * 1000

const pool = new Pool(spec.origin, {
  connections: spec.concurrency,
  pipelining: 1,
  keepAliveTimeout: 30_000,
  headersTimeout: 10_000,
  bodyTimeout: 10_000,
})

const stats = { errors: {}, events: 0, bytes: 0, ok: 0, minBytes: Infinity, maxBytes: 0 }
const countOk = (bytes) => {
  stats.ok++
  stats.bytes += bytes
  stats.minBytes = Math.min(stats.minBytes, bytes)
  stats.maxBytes = Math.max(stats.maxBytes, bytes)
}
const countError = (kind) => {
  stats.errors[kind] = (stats.errors[kind] ?? 0) + 1
}

/** Event separators (`\n\n`) in one chunk; `carry` is whether the previous chunk ended in `\n`. */
const countEvents = (chunk, carry) => {
  let events = carry && chunk[0] === 10 ? 1 : 0
  let at = chunk.indexOf("\n\n")
  while (at !== -1) {
    events++
    at = chunk.indexOf("\n\n", at + 2)
  }
  return events
}

/** Whether a whole body passes `spec.validate` (always, without one); counts the failure when not. */
const valid = (bytes) => {
  if (spec.validate === undefined) return true
  const problem = bodyProblem(spec.validate, bytes.toString("utf8"))
  if (problem === undefined) return true
  countError(`invalid-body:${problem}`)
  return false
}

/** Sends one request and reads the response to its end. Resolves true when it counts as a success. */
const send = async () => {
  let response
  try {
    response = await pool.request({ path: spec.path, method: "POST", headers: spec.headers, body: payload })
  } catch (error) {
    countError(`error:${error?.code ?? error?.name ?? "unknown"}`)
    return false
  }
  const { statusCode, headers, body } = response
  try {
    if (statusCode < 200 || statusCode > 299) {
      await body.dump()
      countError(`status:${statusCode}`)
      return false
    }
    const problem = headerProblem(spec.expectHeaders, headers)
    if (problem !== undefined) {
      await body.dump()
      countError(problem)
      return false
    }
    if (!spec.stream) {
      const bytes = Buffer.from(await body.arrayBuffer())
      if (bytes.indexOf(expect) === -1) {
        countError("unexpected-body")
        return false
      }
      if (!valid(bytes)) return false
      countOk(bytes.length)
      return true
    }
    let tail = Buffer.alloc(0)
    let endsInNewline = false
    let bytes = 0
    let events = 0
    const chunks = spec.validate === undefined ? undefined : []
    for await (const chunk of body) {
      chunks?.push(chunk)
      bytes += chunk.length
      events += countEvents(chunk, endsInNewline)
      endsInNewline = chunk[chunk.length - 1] === 10
      // 256: a Bedrock stream's message_stop carries Bedrock's invocation metrics after its type.
      tail =
        chunk.length >= TAIL
          ? chunk.subarray(chunk.length - TAIL)
          : Buffer.concat([tail, chunk]).subarray(-TAIL)
    }
    if (tail.indexOf(expect) === -1) {
      countError("incomplete-stream")
      return false
    }
    if (chunks !== undefined && !valid(Buffer.concat(chunks))) return false
    countOk(bytes)
    stats.events += events
    return true
  } catch (error) {
    countError(`error:${error?.code ?? error?.name ?? "unknown"}`)
    return false
  }
}

/** Announces the window edges; resolves once the end has been announced. */
const markPhases = (start) => {
  setTimeout(
    () => process.stdout.write("phase measure-start\n"),
    Math.max(0, start + warmupMs - performance.now()),
  )
  return new Promise((resolve) =>
    setTimeout(
      () => {
        process.stdout.write("phase measure-end\n")
        resolve()
      },
      Math.max(0, start + warmupMs + durationMs - performance.now()),
    ),
  )
}

const closedLoop = async () => {
  const start = performance.now()
  const from = start + warmupMs
  const to = from + durationMs
  const ended = markPhases(start)
  let completed = 0
  const worker = async () => {
    while (performance.now() < to) {
      const ok = await send()
      const done = performance.now()
      if (ok && done >= from && done <= to) completed++
    }
  }
  await Promise.all([ended, ...Array.from({ length: spec.concurrency }, worker)])
  return { completed, rate: completed / spec.durationS }
}

const openLoop = () =>
  new Promise((resolve) => {
    const start = performance.now()
    const from = start + warmupMs
    const to = from + durationMs
    const interval = 1000 / spec.rps
    const latencies = []
    const inFlight = new Set()
    let next = start
    let sent = 0
    let maxLagMs = 0
    const ended = markPhases(start)
    const fire = (scheduled) => {
      sent++
      const request = send().then((ok) => {
        if (ok && scheduled >= from) latencies.push(performance.now() - scheduled)
        inFlight.delete(request)
      })
      inFlight.add(request)
    }
    const tick = () => {
      const now = performance.now()
      maxLagMs = Math.max(maxLagMs, now - next)
      while (next <= now && next < to) {
        fire(next)
        next += interval
      }
      if (next < to) {
        setTimeout(tick, Math.max(0, next - performance.now()))
        return
      }
      void Promise.all([ended, ...inFlight]).then(() => {
        latencies.sort((a, b) => a - b)
        const at = (q) =>
          latencies.length === 0 ? null : latencies[Math.max(0, Math.ceil(q * latencies.length) - 1)]
        resolve({
          sent,
          completed: latencies.length,
          rate: latencies.length / spec.durationS,
          p50Ms: at(0.5),
          p90Ms: at(0.9),
          p99Ms: at(0.99),
          maxMs: at(1),
          maxSenderLagMs: maxLagMs,
        })
      })
    }
    tick()
  })

const result = spec.mode === "open" ? await openLoop() : await closedLoop()
await pool.close()
const errorCount = Object.values(stats.errors).reduce((sum, n) => sum + n, 0)
process.stdout.write(
  `${JSON.stringify({
    ...result,
    errors: stats.errors,
    errorCount,
    bytesPerResponse: stats.ok === 0 ? 0 : Math.round(stats.bytes / stats.ok),
    minBytes: stats.ok === 0 ? 0 : stats.minBytes,
    maxBytes: stats.maxBytes,
    eventsPerStream: spec.stream && stats.ok > 0 ? Math.round((stats.events / stats.ok) * 10) / 10 : null,
  })}\n`,
)
process.exit(0)
