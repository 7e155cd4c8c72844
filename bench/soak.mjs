// `npm run soak`: a long run of mixed traffic through one Tollgate, to find what grows (#21).
// Starts a redis-server (free port, no persistence), two fake providers (bin/fakeprovider) and the built
// bin/tollgate on a Redis store with the admin API on, then sends an open-loop mix of Anthropic Messages
// requests at a fixed rate from this process (undici, no SDK): JSON and streams, failures in the seed's
// ways through `x-fake-scenario` (429 with retry-after, 529 and 503 overloaded, 500, a stream that breaks
// mid-way, a stream whose upstream goes idle, an in-band error, a slow first token) and clients that
// disconnect mid-stream or before the first token; halfway it stops redis-server and starts it again on
// the same port. Every sample interval it records the gateway's RSS, heap, open fds, event-loop delay p99,
// open upstream sockets and open streams. At the end it stops the load, waits for the requests in flight
// and for the idle upstream pools to close, and checks: one usage record per request that reached the
// gateway, spend (usage file = /admin/usage = metrics = client-side prices), no fd or socket growth, the
// RSS slope after warm-up. Writes samples (JSONL, CSV), one SVG per series and summary.json into the output
// dir; the last stdout line is `soak summary: FILE`. Exit 0 when every judged check holds, 1 otherwise.
// Options: flags or env (flags win), see bench/README.md "Soak" and `node bench/soak.mjs --help`.
import { createHash } from "node:crypto"
import {
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
} from "node:fs"
import { mkdtemp, writeFile, appendFile } from "node:fs/promises"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { Agent, request } from "undici"
import { killAllNow, logTail, shebangNodeArgs, startServer, stop, stopAll, which } from "./lib/procs.mjs"
import { startRedis } from "./lib/redis.mjs"
import {
  judgeSlope,
  MIN_SLOPE_WINDOW_MS,
  SLOPE_LIMIT_MB,
  WARMUP_MAX_MS,
  warmupMsOf,
} from "./lib/soakRule.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, "..")

const log = (line) => process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
const sleep = (ms) => new Promise((done) => setTimeout(done, ms))

// ---------------------------------------------------------------------------------------------------------
// Options

const HELP = `usage: node bench/soak.mjs [--minutes N] [--rate R] [--stream-share S] [--failure-share F]
  [--disconnect-share D] [--store redis|memory] [--restart on|off] [--out DIR] [--sample-s N]
  [--slope-limit MB] [--seed N]
Each flag also reads from env: SOAK_MINUTES, SOAK_RATE, SOAK_STREAM_SHARE, SOAK_FAILURE_SHARE,
SOAK_DISCONNECT_SHARE, SOAK_STORE, SOAK_RESTART, SOAK_OUT, SOAK_SAMPLE_S, SOAK_SLOPE_LIMIT, SOAK_SEED.
See bench/README.md, "Soak".
`

/** name: [env, default, kind] */
const OPTIONS = {
  minutes: ["SOAK_MINUTES", 60, "positive"],
  rate: ["SOAK_RATE", 300, "positive"],
  "stream-share": ["SOAK_STREAM_SHARE", 0.3, "share"],
  "failure-share": ["SOAK_FAILURE_SHARE", 0.1, "share"],
  "disconnect-share": ["SOAK_DISCONNECT_SHARE", 0.02, "share"],
  store: ["SOAK_STORE", "redis", ["redis", "memory"]],
  restart: ["SOAK_RESTART", "on", ["on", "off"]],
  out: ["SOAK_OUT", "", "string"],
  "sample-s": ["SOAK_SAMPLE_S", 10, "positive"],
  "slope-limit": ["SOAK_SLOPE_LIMIT", SLOPE_LIMIT_MB, "positive"],
  seed: ["SOAK_SEED", 1, "natural"],
}

const readOptions = (argv) => {
  const given = {}
  for (let i = 0; i < argv.length; i++) {
    const match = /^--([a-z-]+)(?:=(.*))?$/s.exec(argv[i])
    if (match === null) throw new Error(`unexpected argument "${argv[i]}"`)
    if (match[1] === "help") return undefined
    if (!(match[1] in OPTIONS)) throw new Error(`unknown option --${match[1]}`)
    const value = match[2] ?? argv[++i]
    if (value === undefined) throw new Error(`--${match[1]} needs a value`)
    given[match[1]] = value
  }
  const options = {}
  for (const [name, [env, fallback, kind]] of Object.entries(OPTIONS)) {
    const raw = given[name] ?? process.env[env]
    const key = name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    if (raw === undefined || raw === "") {
      options[key] = fallback
      continue
    }
    if (Array.isArray(kind)) {
      if (!kind.includes(raw))
        throw new Error(`--${name} (${env}) must be one of ${kind.join(", ")}, got "${raw}"`)
      options[key] = raw
    } else if (kind === "string") options[key] = raw
    else {
      const value = Number(raw)
      const ok =
        Number.isFinite(value) &&
        (kind === "positive"
          ? value > 0
          : kind === "share"
            ? value >= 0 && value <= 1
            : Number.isInteger(value) && value >= 0)
      if (!ok) throw new Error(`--${name} (${env}) must be a ${kind} number, got "${raw}"`)
      options[key] = value
    }
  }
  if (options.failureShare + options.disconnectShare > 1)
    throw new Error("--failure-share plus --disconnect-share must be at most 1")
  return options
}

let options
try {
  options = readOptions(process.argv.slice(2))
} catch (error) {
  process.stderr.write(`soak: ${error.message}\n\n${HELP}`)
  process.exit(1)
}
if (options === undefined) {
  process.stdout.write(HELP)
  process.exit(0)
}

const durationMs = options.minutes * 60_000
/** Samples before this are the warm-up: the first third of the run, at most 20 minutes (bench/lib/soakRule.mjs). */
const warmupMs = warmupMsOf(durationMs)
const sampleMs = options.sampleS * 1000
/** How long the store is down during the restart halfway. */
const STORE_DOWN_MS = 2000
/** Upstream keep-alive sockets idle longer than this are closed by the gateway (src/providers/transport.ts). */
const UPSTREAM_IDLE_MS = 30_000
/** Longest wait for the requests in flight when the load stops (the slowest kind ends within ~5 s). */
const DRAIN_MS = 30_000
/** fds_end may exceed fds_start by this much (a lazily opened descriptor) and still pass. */
const FD_BOUND = 4

const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "")
const outDir = resolve(options.out === "" ? join(root, "bench", "results", `soak-${stamp}`) : options.out)

// ---------------------------------------------------------------------------------------------------------
// Setup: config, processes

const CLIENT_KEY = "tg_soakSoakSoakSoakSoakSoakSoak00"
const ADMIN_TOKEN = "soak-admin-token-not-a-secret"
const ADMIN_ENV = "TOLLGATE_SOAK_ADMIN_TOKEN"
const UPSTREAM_ENV = "TOLLGATE_SOAK_UPSTREAM_KEY"
const TENANT = "soak"
/** USD per million tokens, as in pricing.yaml below: cost in micro-USD = tokens × price. */
const PRICES = {
  "fake-claude": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  "fake-claude-limited": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
}

const writeConfig = async (dir, { fakeA, fakeB, redisUrl }) => {
  const sha256 = createHash("sha256").update(CLIENT_KEY).digest("hex")
  const store = redisUrl === undefined ? "  kind: memory\n" : `  kind: redis\n  url: ${redisUrl}\n`
  const config = `server:
  listen: 127.0.0.1:0
  shutdown_grace: 5s
admin:
  token_env: ${ADMIN_ENV}
store:
${store}usage:
  file: usage.jsonl
pricing:
  file: pricing.yaml
retry:
  budget_ratio: 0.5
timeouts:
  first_token: 10s
  idle: 3s
providers:
  primary: { kind: anthropic, base_url: "${fakeA}", api_key_env: ${UPSTREAM_ENV} }
  backup: { kind: anthropic, base_url: "${fakeB}", api_key_env: ${UPSTREAM_ENV} }
routes:
  soak-ab:
    api: anthropic
    targets:
      - { provider: primary, model: fake-claude }
      - { provider: backup, model: fake-claude }
  soak-ba:
    api: anthropic
    targets:
      - { provider: backup, model: fake-claude }
      - { provider: primary, model: fake-claude }
  soak-limited:
    api: anthropic
    targets:
      - { provider: primary, model: fake-claude-limited }
      - { provider: backup, model: fake-claude-limited }
tenants:
  ${TENANT}:
    keys:
      - { id: soak, sha256: ${sha256} }
    routes: "*"
    limits: { requests_per_minute: 100000000, tokens_per_minute: 1000000000 }
    budgets:
      month: { limit_usd: 1000000, mode: hard }
`
  const pricing = `prices:\n${Object.entries(PRICES)
    .map(
      ([model, p]) =>
        `  - { model: ${model}, input: ${p.input}, output: ${p.output}, cache_read: ${p.cacheRead}, cache_write: ${p.cacheWrite} }\n`,
    )
    .join("")}`
  await writeFile(join(dir, "tollgate.yaml"), config)
  await writeFile(join(dir, "pricing.yaml"), pricing)
  return join(dir, "tollgate.yaml")
}

// ---------------------------------------------------------------------------------------------------------
// What the load generator sends

/**
 * The failures, in the seed's ways (shares within --failure-share). `stream`: true, false or "either"
 * (then by --stream-share). The header reaches every target of the route, so each of these fails on both
 * targets: the gateway falls back (429, 529) or retries and falls back (500, 503), then answers with the
 * last upstream response; a 429's retry-after puts both targets of `soak-limited` in a 1 s cooldown, and
 * requests in it get a fast 502 without an upstream attempt.
 */
const FAILURES = [
  { kind: "429-retry-after", route: "soak-limited", stream: false, scenario: "status:429:1", weight: 15 },
  { kind: "529-overloaded", stream: "either", scenario: "status:529", weight: 15 },
  { kind: "503-overloaded", stream: false, scenario: "status:503", weight: 10 },
  { kind: "500-error", stream: "either", scenario: "status:500", weight: 15 },
  { kind: "stream-reset", stream: true, scenario: "reset-after:3-tokens", weight: 12 },
  { kind: "stream-malformed", stream: true, scenario: "malformed-after:3-tokens", weight: 8 },
  { kind: "stream-idle-timeout", stream: true, scenario: "hang-after:2-tokens", weight: 5 },
  { kind: "stream-inband-error", stream: true, scenario: "inband-error:overloaded_error", weight: 5 },
  { kind: "slow-first-token", stream: "either", scenario: "delay:200,tokens:4", weight: 15 },
]
/** Clients that go away: after the first bytes of a stream, or while waiting for its first token. */
const DISCONNECTS = [
  {
    kind: "disconnect-mid-stream",
    stream: true,
    scenario: "tokens:30,delay:20",
    abort: "first-chunk",
    weight: 1,
  },
  {
    kind: "disconnect-before-first-token",
    stream: true,
    scenario: "delay:800,tokens:3",
    abort: 300,
    weight: 1,
  },
]

/** mulberry32: a small seeded generator, so a run's mix can be repeated with --seed. */
const random = (() => {
  let a = options.seed >>> 0 || 0x9e3779b9
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
})()

const pick = (list) => {
  const total = list.reduce((sum, item) => sum + item.weight, 0)
  let at = random() * total
  for (const item of list) if ((at -= item.weight) < 0) return item
  return list.at(-1)
}

const PROMPT = "You are a soak test. Reply with a few words about gateways that run for weeks."

/** The next request of the mix. */
const nextRequest = () => {
  const roll = random()
  const mainRoute = random() < 0.5 ? "soak-ab" : "soak-ba"
  const streamByShare = random() < options.streamShare
  let spec
  if (roll < options.failureShare) {
    const failure = pick(FAILURES)
    spec = {
      kind: failure.kind,
      route: failure.route ?? mainRoute,
      stream: failure.stream === "either" ? streamByShare : failure.stream,
      scenario: failure.scenario,
    }
  } else if (roll < options.failureShare + options.disconnectShare) {
    const disconnect = pick(DISCONNECTS)
    spec = {
      kind: disconnect.kind,
      route: mainRoute,
      stream: true,
      scenario: disconnect.scenario,
      abort: disconnect.abort,
    }
  } else {
    spec = { kind: streamByShare ? "ok-stream" : "ok-json", route: mainRoute, stream: streamByShare }
  }
  return spec
}

// ---------------------------------------------------------------------------------------------------------
// Client side: sending, reading, what each request came to

/** What the client saw, per outcome and per kind. */
const client = {
  sent: 0,
  finished: 0,
  /** Requests that never reached the gateway: the connection failed before the request was sent. */
  connectFailures: 0,
  /** Aborted by us before the response headers: reached the gateway (it has the request), no request id. */
  abortedBeforeHeaders: 0,
  /** Failed before the headers for another reason (not by us): counted as reached, listed to look at. */
  errorsBeforeHeaders: {},
  outcomes: {},
  byKind: {},
  /** request id → the cost the client expects (micro-USD) for a complete 2xx, or null. */
  seen: new Map(),
  /** Response headers without an x-request-id (each is a failure of the record check). */
  missingRequestId: 0,
  complete2xx: 0,
  expectedCost: 0,
}
let inFlight = 0
/** Per-interval counters for the request-rate plot. */
let intervalSent = 0
let intervalFinished = 0

const bump = (table, key) => (table[key] = (table[key] ?? 0) + 1)

const CONNECT_FAILURES = new Set(["ECONNREFUSED", "UND_ERR_CONNECT_TIMEOUT", "EADDRNOTAVAIL", "ENETUNREACH"])

const costOf = (model, usage) => {
  const price = PRICES[model]
  if (price === undefined || usage === undefined) return undefined
  // The gateway rounds a fractional micro-USD up (src/meter/cost.ts).
  return Math.ceil(
    (usage.input_tokens ?? 0) * price.input +
      (usage.output_tokens ?? 0) * price.output +
      (usage.cache_read_input_tokens ?? 0) * price.cacheRead +
      (usage.cache_creation_input_tokens ?? 0) * price.cacheWrite,
  )
}

/** The usage of a complete Anthropic event stream (message_start, then message_delta), or undefined. */
const streamUsage = (text) => {
  if (!text.includes("event: message_stop")) return undefined
  let usage
  for (const block of text.split("\n\n")) {
    const data = block.split("\n").find((line) => line.startsWith("data:"))
    if (data === undefined) continue
    let event
    try {
      event = JSON.parse(data.slice(5))
    } catch {
      return undefined
    }
    if (event.type === "error") return undefined
    if (event.type === "message_start") usage = { ...event.message?.usage }
    if (event.type === "message_delta" && event.usage !== undefined) usage = { ...usage, ...event.usage }
  }
  return usage
}

const send = async (agent, origin, spec) => {
  client.sent++
  intervalSent++
  inFlight++
  bump(client.byKind, spec.kind)
  const controller = new AbortController()
  let headersAt
  let outcome
  const timer = typeof spec.abort === "number" ? setTimeout(() => controller.abort(), spec.abort) : undefined
  try {
    const res = await request(`${origin}/v1/messages`, {
      dispatcher: agent,
      method: "POST",
      signal: controller.signal,
      headers: {
        "content-type": "application/json",
        "x-api-key": CLIENT_KEY,
        "anthropic-version": "2023-06-01",
        ...(spec.scenario === undefined ? {} : { "x-fake-scenario": spec.scenario }),
      },
      body: JSON.stringify({
        model: spec.route,
        max_tokens: spec.stream ? 50 : 16,
        messages: [{ role: "user", content: PROMPT }],
        ...(spec.stream ? { stream: true } : {}),
      }),
    })
    headersAt = performance.now()
    const id = res.headers["x-request-id"]
    if (typeof id === "string") client.seen.set(id, null)
    else client.missingRequestId++
    if (spec.abort === "first-chunk") {
      for await (const _chunk of res.body) {
        controller.abort()
        break
      }
      outcome = "aborted-mid-stream"
      return
    }
    let text = ""
    for await (const chunk of res.body) text += chunk
    outcome = `status:${res.statusCode}`
    if (res.statusCode >= 200 && res.statusCode < 300) {
      const model = res.headers["x-tollgate-model"]
      let usage
      if (spec.stream) usage = streamUsage(text)
      else {
        try {
          usage = JSON.parse(text).usage
        } catch {
          usage = undefined
        }
      }
      const cost = costOf(model, usage)
      if (cost === undefined) outcome = `status:${res.statusCode}-incomplete`
      else if (typeof id === "string") {
        client.seen.set(id, cost)
        client.complete2xx++
        client.expectedCost += cost
      }
    }
  } catch (error) {
    const code = error?.code ?? error?.name ?? "error"
    if (headersAt !== undefined)
      outcome = controller.signal.aborted ? "aborted-mid-stream" : `body-error:${code}`
    else if (controller.signal.aborted) {
      outcome = "aborted-before-headers"
      client.abortedBeforeHeaders++
    } else if (CONNECT_FAILURES.has(code)) {
      outcome = `connect-failure:${code}`
      client.connectFailures++
    } else {
      outcome = `error-before-headers:${code}`
      bump(client.errorsBeforeHeaders, code)
    }
  } finally {
    clearTimeout(timer)
    inFlight--
    client.finished++
    intervalFinished++
    bump(client.outcomes, `${spec.kind} ${outcome}`)
  }
}

/**
 * Sends the mix open-loop: every 5 ms, as many requests as the clock says are due (sent = rate × elapsed),
 * whatever the responses do. Resolves when `until` (ms on the performance clock) has passed.
 */
const runLoad = async (agent, origin, startAt, until) => {
  let due = 0
  while (performance.now() < until) {
    const target = Math.floor(((performance.now() - startAt) / 1000) * options.rate)
    while (due < target) {
      due++
      void send(agent, origin, nextRequest())
    }
    await sleep(5)
  }
}

// ---------------------------------------------------------------------------------------------------------
// Sampling the gateway

const readStatusKb = (pid, field) => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)
    return match === null ? null : Number(match[1])
  } catch {
    return null
  }
}

/** Resident kB of the process's `[heap]` mapping (glibc's main malloc arena), from smaps; null when unreadable. */
const mallocHeapKb = (pid) => {
  try {
    const smaps = readFileSync(`/proc/${pid}/smaps`, "utf8")
    const at = smaps.indexOf(" [heap]\n")
    if (at < 0) return 0
    const match = /^Rss:\s+(\d+) kB/m.exec(smaps.slice(at))
    return match === null ? null : Number(match[1])
  } catch {
    return null
  }
}

const fdCount = (pid) => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return null
  }
}

/** The socket inodes among the process's descriptors. */
const socketInodes = (pid) => {
  const inodes = new Set()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match !== null) inodes.add(match[1])
    } catch {
      // closed meanwhile
    }
  }
  return inodes
}

const TCP_STATES = {
  "01": "ESTABLISHED",
  "02": "SYN_SENT",
  "04": "FIN_WAIT1",
  "05": "FIN_WAIT2",
  "06": "TIME_WAIT",
  "07": "CLOSE",
  "08": "CLOSE_WAIT",
  "09": "LAST_ACK",
  "0A": "LISTEN",
  "0B": "CLOSING",
}

/**
 * The process's TCP sockets to any of `ports` (remote port), by state: /proc/PID/net/tcp and tcp6 list
 * every socket of the network namespace; only those whose inode is one of the process's descriptors count.
 */
const upstreamSockets = (pid, ports) => {
  try {
    const inodes = socketInodes(pid)
    const byState = {}
    let total = 0
    for (const file of ["tcp", "tcp6"]) {
      let table = ""
      try {
        table = readFileSync(`/proc/${pid}/net/${file}`, "utf8")
      } catch {
        continue
      }
      for (const line of table.split("\n").slice(1)) {
        const fields = line.trim().split(/\s+/)
        if (fields.length < 10) continue
        const remotePort = parseInt(fields[2].split(":").at(-1), 16)
        if (!ports.has(remotePort) || !inodes.has(fields[9])) continue
        total++
        bump(byState, TCP_STATES[fields[3]] ?? fields[3])
      }
    }
    return { total, byState }
  } catch {
    return { total: null, byState: {} }
  }
}

/** `name value` lines of the Prometheus text, summed over labels when `labels` is not given. */
const metricSum = (text, name) => {
  let sum = 0
  let found = false
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue
    const rest = line.slice(name.length)
    if (rest[0] !== " " && rest[0] !== "{") continue
    const value = Number(line.slice(line.lastIndexOf(" ") + 1))
    if (Number.isFinite(value)) {
      sum += value
      found = true
    }
  }
  return found ? sum : null
}

// ---------------------------------------------------------------------------------------------------------
// Plots: one hand-made SVG line chart per series

const escapeXml = (text) =>
  String(text).replace(/[<>&"]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;" })[c])

const niceStep = (span, count) => {
  const raw = span / Math.max(1, count)
  const power = 10 ** Math.floor(Math.log10(raw))
  const unit = raw / power
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * power
}

const formatTick = (value) => {
  const abs = Math.abs(value)
  if (abs !== 0 && (abs >= 1e6 || abs < 0.01)) return value.toExponential(1)
  return Number(value.toFixed(abs < 10 ? 2 : abs < 100 ? 1 : 0)).toString()
}

/**
 * An SVG line chart: `series` = [{ label, color, points: [[xMinutes, y], …] }]; `marks` = vertical lines
 * [{ x, label }]; `shade` = [x0, x1] (the warm-up); `fit` = a straight line { a, b } (y = a + b·x).
 */
const svgChart = ({ title, yLabel, series, marks = [], shade, fit }) => {
  const width = 900
  const height = 360
  const left = 80
  const right = 30
  const top = 56
  const bottom = 40
  const plotW = width - left - right
  const plotH = height - top - bottom
  const xs = series.flatMap((s) => s.points.map((p) => p[0]))
  const ys = series.flatMap((s) => s.points.map((p) => p[1])).filter((y) => Number.isFinite(y))
  const xMax = Math.max(1e-9, ...xs, ...marks.map((m) => m.x))
  let yMin = Math.min(0, ...ys)
  let yMax = Math.max(...ys, 0)
  if (yMax === yMin) yMax = yMin + 1
  const yStep = niceStep(yMax - yMin, 5)
  yMin = Math.floor(yMin / yStep) * yStep
  yMax = Math.ceil(yMax / yStep) * yStep
  const xStep = niceStep(xMax, 10)
  const px = (x) => left + (x / xMax) * plotW
  const py = (y) => top + plotH - ((y - yMin) / (yMax - yMin)) * plotH
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(title)}</text>`,
  ]
  if (shade !== undefined)
    parts.push(
      `<rect x="${px(shade[0])}" y="${top}" width="${Math.max(0, px(shade[1]) - px(shade[0]))}" height="${plotH}" fill="#eee"/>`,
      `<text x="${px(shade[0]) + 4}" y="${top + 14}" fill="#888">warm-up</text>`,
    )
  for (let y = yMin; y <= yMax + yStep / 2; y += yStep) {
    parts.push(
      `<line x1="${left}" x2="${left + plotW}" y1="${py(y)}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${left - 6}" y="${py(y) + 4}" text-anchor="end">${formatTick(y)}</text>`,
    )
  }
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    parts.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${top + plotH}" y2="${top + plotH + 5}" stroke="#333"/>`,
      `<text x="${px(x)}" y="${top + plotH + 18}" text-anchor="middle">${formatTick(x)}</text>`,
    )
  }
  parts.push(
    `<line x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}" stroke="#333"/>`,
    `<line x1="${left}" x2="${left + plotW}" y1="${top + plotH}" y2="${top + plotH}" stroke="#333"/>`,
    `<text x="${left + plotW / 2}" y="${height - 6}" text-anchor="middle">minutes since the load started</text>`,
    `<text x="18" y="${top + plotH / 2}" text-anchor="middle" transform="rotate(-90 18 ${top + plotH / 2})">${escapeXml(yLabel)}</text>`,
  )
  for (const mark of marks)
    parts.push(
      `<line x1="${px(mark.x)}" x2="${px(mark.x)}" y1="${top}" y2="${top + plotH}" stroke="#c60" stroke-dasharray="4 3"/>`,
      `<text x="${px(mark.x) + 4}" y="${top + plotH - 6}" fill="#c60">${escapeXml(mark.label)}</text>`,
    )
  series.forEach((s, index) => {
    const points = s.points.filter((p) => Number.isFinite(p[1]))
    if (points.length > 0)
      parts.push(
        `<polyline fill="none" stroke="${s.color}" stroke-width="1.6" points="${points.map((p) => `${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`).join(" ")}"/>`,
      )
    parts.push(
      `<rect x="${left + index * 180}" y="36" width="12" height="3" fill="${s.color}"/>`,
      `<text x="${left + 16 + index * 180}" y="41" font-size="11">${escapeXml(s.label)}</text>`,
    )
  })
  if (fit !== undefined)
    parts.push(
      `<line x1="${px(fit.x0)}" x2="${px(fit.x1)}" y1="${py(fit.a + fit.b * fit.x0)}" y2="${py(fit.a + fit.b * fit.x1)}" stroke="#d22" stroke-dasharray="6 4"/>`,
      `<text x="${left + plotW - 4}" y="${top + 14}" text-anchor="end" fill="#d22">${escapeXml(fit.label)}</text>`,
    )
  parts.push("</svg>\n")
  return parts.join("\n")
}

// ---------------------------------------------------------------------------------------------------------
// Main

const round = (value, digits = 2) =>
  value === null || value === undefined ? null : Number(value.toFixed(digits))

let tempDir

const main = async () => {
  const dir = await mkdtemp(join(tmpdir(), "tollgate-soak-"))
  tempDir = dir
  mkdirSync(outDir, { recursive: true })
  const machine = { cpus: availableParallelism(), loadAverageAtStart: round(loadavg()[0]) }
  log(
    `${options.minutes} min at ${options.rate} req/s, streams ${options.streamShare}, failures ${options.failureShare}, ` +
      `disconnects ${options.disconnectShare}, store ${options.store}, restart ${options.store === "redis" ? options.restart : "n/a"}, ` +
      `sample every ${options.sampleS} s; output ${outDir}`,
  )

  // --- processes
  let redis
  const redisBin = process.env.SOAK_REDIS_SERVER || which("redis-server")
  if (options.store === "redis") {
    if (redisBin === undefined || !existsSync(redisBin))
      throw new Error("redis-server not on PATH (or use --store memory)")
    redis = await startRedis({ bin: redisBin, dir, logFile: join(dir, "redis.log") })
    log(`redis-server ${redis.url} (pid ${redis.pid})`)
  }
  const fakeBin = process.env.SOAK_FAKEPROVIDER || join(root, "bin", "fakeprovider")
  const tollgateBin = process.env.SOAK_TOLLGATE || join(root, "bin", "tollgate")
  const fakes = []
  for (const name of ["primary", "backup"]) {
    fakes.push(
      await startServer({
        name: `fake ${name}`,
        script: fakeBin,
        args: ["--listen", "127.0.0.1:0", "--name", name],
        nodeArgs: shebangNodeArgs(fakeBin),
        logFile: join(dir, `fake-${name}.log`),
      }),
    )
  }
  const fakePorts = new Set(fakes.map((fake) => Number(new URL(fake.url).port)))
  const configPath = await writeConfig(dir, {
    fakeA: fakes[0].url,
    fakeB: fakes[1].url,
    redisUrl: redis?.url,
  })
  const gatewayLog = join(dir, "tollgate.log")
  const gateway = await startServer({
    name: "tollgate",
    script: tollgateBin,
    args: ["serve", "--config", configPath],
    nodeArgs: [
      ...shebangNodeArgs(tollgateBin),
      ...(process.env.SOAK_GATEWAY_NODE_ARGS ?? "").split(/\s+/).filter(Boolean),
    ],
    env: { [ADMIN_ENV]: ADMIN_TOKEN, [UPSTREAM_ENV]: "soak-upstream-key" },
    logFile: gatewayLog,
  })
  const pid = gateway.child.pid
  const origin = gateway.url
  log(`tollgate ${origin} (pid ${pid}), fakes ${fakes.map((fake) => fake.url).join(", ")}`)

  // Admin and metrics reads use their own agent, closed before each descriptor count.
  let adminAgent = new Agent({ connections: 2 })
  const get = async (path, admin = true) => {
    const res = await request(`${origin}${path}`, {
      dispatcher: adminAgent,
      headers: admin ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {},
    })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`GET ${path}: ${res.statusCode} ${text.slice(0, 200)}`)
    return text
  }
  const closeAdmin = async () => {
    await adminAgent.close()
    adminAgent = new Agent({ connections: 2 })
  }

  /** Waits until the gateway has no upstream socket open (the pools' idle timeout), ≤ `maxMs`. */
  const waitUpstreamIdle = async (maxMs) => {
    const deadline = performance.now() + maxMs
    for (;;) {
      const sockets = upstreamSockets(pid, fakePorts).total
      if (sockets === 0 || performance.now() > deadline) return sockets
      await sleep(500)
    }
  }
  /** The gateway's descriptor count once its inbound connections from us have closed (≤ 3 s). */
  const settledFds = async (atMost) => {
    let fds = fdCount(pid)
    for (let waited = 0; waited < 3000 && atMost !== undefined && fds > atMost; waited += 100) {
      await sleep(100)
      fds = fdCount(pid)
    }
    return fds
  }

  // --- priming: one request of every kind (so lazily opened descriptors exist), then idle, then fds_start
  const primeAgent = new Agent({ connections: 16 })
  const primeSpecs = [
    { kind: "ok-json", route: "soak-ab", stream: false },
    { kind: "ok-stream", route: "soak-ba", stream: true },
    ...FAILURES.map((f) => ({
      kind: f.kind,
      route: f.route ?? "soak-ab",
      stream: f.stream === true,
      scenario: f.scenario,
    })),
    ...DISCONNECTS.map((d) => ({
      kind: d.kind,
      route: "soak-ab",
      stream: true,
      scenario: d.scenario,
      abort: d.abort,
    })),
  ]
  await Promise.all(primeSpecs.map((spec) => send(primeAgent, origin, spec)))
  await get("/metrics", false)
  await get(`/admin/usage?tenant=${TENANT}`)
  await primeAgent.close()
  await closeAdmin()
  log("primed; waiting for the upstream pools to go idle before fds_start")
  const upstreamStart = await waitUpstreamIdle(UPSTREAM_IDLE_MS + 15_000)
  const fdsStart = await settledFds(undefined)
  await sleep(1000)
  const fdsStartSettled = Math.min(fdsStart, fdCount(pid))
  log(`fds_start ${fdsStartSettled}, upstream sockets ${upstreamStart}`)
  const primed = { sent: client.sent, connectFailures: client.connectFailures }

  // --- load, sampling, the restart halfway
  const samplesFile = join(outDir, "samples.jsonl")
  await writeFile(samplesFile, "")
  const samples = []
  const loadAgent = new Agent({ keepAliveTimeout: 10_000, connections: null })
  const startAt = performance.now()
  const endAt = startAt + durationMs
  let restart = null
  let lastSampleAt = startAt
  let loadEndedAt = null

  const takeSample = async (phase) => {
    const now = performance.now()
    const seconds = (now - lastSampleAt) / 1000
    lastSampleAt = now
    let metrics = ""
    try {
      metrics = await get("/metrics", false)
    } catch (error) {
      log(`metrics: ${error.message}`)
    }
    const sockets = upstreamSockets(pid, fakePorts)
    const rssKb = readStatusKb(pid, "VmRSS")
    const mb = (kb) => (kb === null ? null : round(kb / 1024))
    const sample = {
      t_s: round((now - startAt) / 1000, 1),
      phase,
      rss_mb: mb(rssKb),
      // Where RSS is: anonymous memory (V8's heap pages, malloc, buffers) and file pages (the node binary).
      rss_anon_mb: mb(readStatusKb(pid, "RssAnon")),
      rss_file_mb: mb(readStatusKb(pid, "RssFile")),
      malloc_heap_mb: mb(mallocHeapKb(pid)),
      heap_used_mb: round((metricSum(metrics, "tollgate_nodejs_heap_size_used_bytes") ?? NaN) / 2 ** 20),
      heap_total_mb: round((metricSum(metrics, "tollgate_nodejs_heap_size_total_bytes") ?? NaN) / 2 ** 20),
      external_mb: round((metricSum(metrics, "tollgate_nodejs_external_memory_bytes") ?? NaN) / 2 ** 20),
      fds: fdCount(pid),
      eventloop_p99_ms: round(
        (metricSum(metrics, "tollgate_nodejs_eventloop_lag_p99_seconds") ?? NaN) * 1000,
      ),
      upstream_sockets: sockets.total,
      upstream_sockets_by_state: sockets.byState,
      open_streams: metricSum(metrics, "tollgate_open_streams"),
      open_requests: metricSum(metrics, "tollgate_open_requests"),
      sent_per_s: round(intervalSent / seconds, 1),
      answered_per_s: round(intervalFinished / seconds, 1),
      client_in_flight: inFlight,
    }
    for (const key of ["heap_used_mb", "heap_total_mb", "external_mb", "eventloop_p99_ms"])
      if (Number.isNaN(sample[key])) sample[key] = null
    intervalSent = 0
    intervalFinished = 0
    samples.push(sample)
    await appendFile(samplesFile, `${JSON.stringify(sample)}\n`)
    return sample
  }

  const restartStore = async () => {
    const at = performance.now()
    log(`store restart: stopping redis-server (port ${redis.port})`)
    await stop(redis.child)
    await sleep(STORE_DOWN_MS)
    redis = await startRedis({ bin: redisBin, dir, logFile: join(dir, "redis.log"), port: redis.port })
    log(`store restart: redis-server is back on port ${redis.port} (pid ${redis.pid})`)
    restart = {
      atS: round((at - startAt) / 1000, 1),
      downMs: round(performance.now() - at, 0),
      ts: new Date(Date.now() - (performance.now() - at)).toISOString(),
    }
  }

  const sampler = (async () => {
    for (let next = startAt + sampleMs; ; next += sampleMs) {
      await sleep(Math.max(0, next - performance.now()))
      if (loadEndedAt !== null) return
      const sample = await takeSample("load")
      if (Math.round(sample.t_s) % 60 < options.sampleS)
        log(
          `t=${(sample.t_s / 60).toFixed(1)} min  sent ${client.sent - primed.sent}  rss ${sample.rss_mb} MB  heap ${sample.heap_used_mb} MB  ` +
            `fds ${sample.fds}  upstream ${sample.upstream_sockets}  streams ${sample.open_streams}  p99 ${sample.eventloop_p99_ms} ms  in flight ${inFlight}`,
        )
    }
  })()
  const restarter =
    options.store === "redis" && options.restart === "on"
      ? (async () => {
          await sleep(durationMs / 2)
          await restartStore()
        })()
      : Promise.resolve()

  await runLoad(loadAgent, origin, startAt, endAt)
  loadEndedAt = performance.now()
  await restarter
  await sampler
  const sent = client.sent - primed.sent
  log(`load stopped: ${sent} requests sent; waiting for ${inFlight} in flight`)
  const drainDeadline = performance.now() + DRAIN_MS
  while (inFlight > 0 && performance.now() < drainDeadline) await sleep(100)
  const stuck = inFlight
  await takeSample("drained")
  await loadAgent.close()

  // --- idle tail: the upstream pools close their idle sockets; sample until then
  log("waiting for the upstream pools to go idle")
  const idleDeadline = performance.now() + UPSTREAM_IDLE_MS + 15_000
  let idleSample
  for (;;) {
    await sleep(Math.min(sampleMs, 5000))
    idleSample = await takeSample("idle")
    if (idleSample.upstream_sockets === 0 || performance.now() > idleDeadline) break
  }

  // --- what the gateway says
  const metricsText = await get("/metrics", false)
  const adminUsage = JSON.parse(await get(`/admin/usage?tenant=${TENANT}`))
  const adminAll = JSON.parse(await get("/admin/usage"))
  // Far from every limit the copy holds leases (ADR 0063, 0065): what they have not used stays reserved in
  // Redis until it is given back, 1 s after the lease's minute ends. Wait for that (at most a minute and a
  // bit) before judging "nothing reserved" — only judged without a restart, so only then.
  let tenantState = JSON.parse(await get(`/admin/tenants/${TENANT}`))
  const leaseDeadline = performance.now() + 65_000
  while (
    restart === null &&
    (tenantState.month?.reserved_micro_usd ?? 0) > 0 &&
    performance.now() < leaseDeadline
  ) {
    await sleep(1000)
    tenantState = JSON.parse(await get(`/admin/tenants/${TENANT}`))
  }
  await closeAdmin()
  const upstreamEnd = await waitUpstreamIdle(5000)
  const upstreamEndByState = upstreamSockets(pid, fakePorts).byState
  const fdsEnd = await settledFds(fdsStartSettled)
  const rssEndKb = readStatusKb(pid, "VmRSS")
  const hwmKb = readStatusKb(pid, "VmHWM")
  log(`fds_end ${fdsEnd}, upstream sockets ${upstreamEnd}`)

  // --- stop the gateway (it flushes the usage file), then read the file
  const exit = new Promise((done) => gateway.child.once("exit", (code, signal) => done({ code, signal })))
  await stop(gateway.child, 10_000)
  const gatewayExit = await exit
  const file = join(dir, "usage.jsonl")
  const counts = new Map()
  let records = 0
  let fileCost = 0
  let costMismatches = 0
  let costMismatchExamples = []
  let matchedComplete = 0
  let unseenRecords = 0
  const unseenByStatus = {}
  const recordsByStatus = {}
  const month = new Date().toISOString().slice(0, 7)
  let monthCost = 0
  let costAfterRestart = 0
  const lines = createInterface({ input: createReadStream(file, "utf8"), crlfDelay: Infinity })
  for await (const line of lines) {
    if (line.trim() === "") continue
    const record = JSON.parse(line)
    records++
    fileCost += record.cost_micro_usd
    if (record.ts.startsWith(month)) monthCost += record.cost_micro_usd
    if (restart !== null && record.ts >= restart.ts) costAfterRestart += record.cost_micro_usd
    bump(recordsByStatus, record.status)
    counts.set(record.request_id, (counts.get(record.request_id) ?? 0) + 1)
    if (!client.seen.has(record.request_id)) {
      unseenRecords++
      bump(unseenByStatus, record.status)
      continue
    }
    const expected = client.seen.get(record.request_id)
    if (expected !== null) {
      matchedComplete++
      if (expected !== record.cost_micro_usd) {
        costMismatches++
        if (costMismatchExamples.length < 5)
          costMismatchExamples.push({
            request_id: record.request_id,
            expected,
            recorded: record.cost_micro_usd,
          })
      }
    }
  }
  const duplicates = [...counts.values()].filter((n) => n > 1).length
  const seenWithoutRecord = [...client.seen.keys()].filter((id) => !counts.has(id)).length

  // --- the checks
  const reached = client.sent - client.connectFailures
  const loadSamples = samples.filter((s) => s.phase === "load")
  const rssJudge = judgeSlope(loadSamples, "rss_mb", durationMs, options.slopeLimit)
  const heapJudge = judgeSlope(loadSamples, "heap_used_mb", durationMs, options.slopeLimit)
  const rssFit = rssJudge.fit
  const rssSlope = rssJudge.slope
  const heapSlope = heapJudge.slope
  const metricsSpend = metricSum(metricsText, "tollgate_spend_micro_usd_total")
  const metricsRequests = metricSum(metricsText, "tollgate_requests_total")
  const storeMonth = tenantState.month ?? null
  const restarted = restart !== null
  const storeJudged = !restarted && storeMonth !== null
  const slopeJudged = rssJudge.judged

  const checks = {
    records_equal_answered: {
      pass:
        records === reached &&
        duplicates === 0 &&
        seenWithoutRecord === 0 &&
        client.missingRequestId === 0 &&
        unseenRecords === client.abortedBeforeHeaders,
      what:
        "usage records = requests sent − connect failures (priming included); each x-request-id the client got has exactly one record; " +
        "records whose id the client never saw = requests it aborted before the headers",
      records,
      answered: reached,
      duplicates,
      seen_without_record: seenWithoutRecord,
      unseen_records: unseenRecords,
      aborted_before_headers: client.abortedBeforeHeaders,
    },
    spend_equal: {
      pass:
        fileCost === adminUsage.totals.cost_micro_usd &&
        records === adminUsage.totals.requests &&
        adminAll.totals.cost_micro_usd === fileCost &&
        metricsSpend === fileCost &&
        metricsRequests === records,
      what: "Σ cost_micro_usd of the usage file = /admin/usage totals (the usage index) = Σ tollgate_spend_micro_usd_total; record count = index requests = Σ tollgate_requests_total",
      file_micro_usd: fileCost,
      admin_usage_micro_usd: adminUsage.totals.cost_micro_usd,
      admin_usage_requests: adminUsage.totals.requests,
      metrics_micro_usd: metricsSpend,
      metrics_requests: metricsRequests,
    },
    client_cost_equal: {
      pass: costMismatches === 0 && matchedComplete === client.complete2xx,
      what: "for every complete 2xx response, the record's cost_micro_usd = the client's own price × the usage in the response it read",
      complete_2xx: client.complete2xx,
      matched: matchedComplete,
      mismatches: costMismatches,
      examples: costMismatchExamples,
      client_micro_usd: client.expectedCost,
    },
    store_spend: {
      pass: storeJudged
        ? storeMonth.spend_micro_usd === monthCost && storeMonth.reserved_micro_usd === 0
        : null,
      what: restarted
        ? "not judged: the store was restarted empty (no persistence), so its month spend counts only what settled after the restart"
        : "the store's month spend (/admin/tenants) = Σ cost of this month's records, nothing reserved",
      store_month_spend_micro_usd: storeMonth?.spend_micro_usd ?? null,
      store_month_reserved_micro_usd: storeMonth?.reserved_micro_usd ?? null,
      records_month_micro_usd: monthCost,
      records_after_restart_micro_usd: restarted ? costAfterRestart : null,
    },
    fds: {
      pass: fdsEnd !== null && fdsEnd <= fdsStartSettled + FD_BOUND,
      what: `open descriptors after the load (idle, our connections closed) ≤ fds_start + ${FD_BOUND}`,
      fds_start: fdsStartSettled,
      fds_end: fdsEnd,
    },
    upstream_sockets: {
      pass: upstreamEnd === 0,
      what: `no TCP socket of the gateway to a fake provider is left once the load ended and the pools' idle timeout (${UPSTREAM_IDLE_MS / 1000} s) passed`,
      end: upstreamEnd,
      end_by_state: upstreamEndByState,
      peak_during_load: Math.max(0, ...loadSamples.map((s) => s.upstream_sockets ?? 0)),
    },
    nothing_stuck: {
      pass: stuck === 0,
      what: `every request ended within ${DRAIN_MS / 1000} s of the load stopping`,
      still_in_flight: stuck,
    },
    gateway_exit: {
      pass: gatewayExit.code === 0,
      what: "the gateway exits 0 on SIGTERM after the run",
      ...gatewayExit,
    },
    rss_slope: {
      pass: rssJudge.pass,
      what:
        `least-squares slope of RSS after warm-up (minutes ${round(warmupMs / 60_000)} on) < ${options.slopeLimit} MB per 10 min` +
        (slopeJudged
          ? ""
          : `; not judged: needs the whole ${WARMUP_MAX_MS / 60_000}-minute warm-up and ${MIN_SLOPE_WINDOW_MS / 60_000} minutes after it (a 60-minute run)`),
      rss_slope_mb_per_10min: round(rssSlope, 3),
      heap_used_slope_mb_per_10min: round(heapSlope, 3),
    },
  }
  const failed = Object.entries(checks)
    .filter(([, check]) => check.pass === false)
    .map(([name]) => name)

  // --- plots
  const minutes = (s) => s.t_s / 60
  const warmupMin = warmupMs / 60_000
  const marks = [
    ...(restart === null ? [] : [{ x: restart.atS / 60, label: "store restart" }]),
    { x: (loadEndedAt - startAt) / 60_000, label: "load ends" },
  ]
  const line = (key, label, color) => ({ label, color, points: samples.map((s) => [minutes(s), s[key]]) })
  const plots = {
    "rss.svg": {
      title: "Gateway RSS",
      yLabel: "MB",
      series: [line("rss_mb", "RSS (VmRSS)", "#1f77b4")],
      fit:
        rssFit === null
          ? undefined
          : {
              ...rssFit,
              x0: warmupMin,
              x1: loadSamples.at(-1).t_s / 60,
              label: `fit after warm-up: ${rssSlope.toFixed(2)} MB / 10 min`,
            },
    },
    "rss-parts.svg": {
      title: "Where the gateway's RSS is",
      yLabel: "MB",
      series: [
        line("rss_anon_mb", "anonymous (RssAnon)", "#1f77b4"),
        line("rss_file_mb", "file pages (RssFile)", "#8c564b"),
        line("heap_total_mb", "V8 heap total", "#2ca02c"),
        line("external_mb", "external", "#9467bd"),
        line("malloc_heap_mb", "malloc main arena ([heap])", "#d62728"),
      ],
    },
    "heap.svg": {
      title: "Gateway heap",
      yLabel: "MB",
      series: [
        line("heap_used_mb", "heap used", "#2ca02c"),
        line("heap_total_mb", "heap total", "#98df8a"),
        line("external_mb", "external", "#9467bd"),
      ],
    },
    "fds.svg": {
      title: "Gateway open file descriptors",
      yLabel: "descriptors",
      series: [line("fds", "open fds", "#8c564b")],
    },
    "eventloop.svg": {
      title: "Gateway event-loop delay p99 (per scrape interval)",
      yLabel: "ms",
      series: [line("eventloop_p99_ms", "p99", "#d62728")],
    },
    "upstream-sockets.svg": {
      title: "Gateway TCP sockets to the fake providers",
      yLabel: "sockets",
      series: [line("upstream_sockets", "sockets", "#ff7f0e")],
    },
    "open-streams.svg": {
      title: "Open streams (tollgate_open_streams) and client requests in flight",
      yLabel: "count",
      series: [
        line("open_streams", "open streams", "#17becf"),
        line("client_in_flight", "client in flight", "#7f7f7f"),
      ],
    },
    "request-rate.svg": {
      title: "Request rate (client side)",
      yLabel: "requests / s",
      series: [line("sent_per_s", "sent", "#1f77b4"), line("answered_per_s", "ended", "#ff7f0e")],
    },
  }
  for (const [name, plot] of Object.entries(plots))
    await writeFile(join(outDir, name), svgChart({ ...plot, marks, shade: [0, warmupMin] }))

  // --- CSV
  const columns = [
    "t_s",
    "phase",
    "rss_mb",
    "rss_anon_mb",
    "rss_file_mb",
    "malloc_heap_mb",
    "heap_used_mb",
    "heap_total_mb",
    "external_mb",
    "fds",
    "eventloop_p99_ms",
    "upstream_sockets",
    "open_streams",
    "open_requests",
    "sent_per_s",
    "answered_per_s",
    "client_in_flight",
  ]
  await writeFile(
    join(outDir, "samples.csv"),
    `${columns.join(",")}\n${samples.map((s) => columns.map((c) => s[c] ?? "").join(",")).join("\n")}\n`,
  )

  // --- summary
  const peakRss = Math.max(...samples.map((s) => s.rss_mb ?? 0))
  const summary = {
    minutes: options.minutes,
    requests: client.sent,
    requests_during_load: sent,
    records,
    answered: reached,
    spend_equal: checks.spend_equal.pass,
    rss_slope_mb_per_10min: round(rssSlope, 3),
    heap_used_slope_mb_per_10min: round(heapSlope, 3),
    rss_peak_mb: round(peakRss),
    rss_hwm_mb: hwmKb === null ? null : round(hwmKb / 1024),
    rss_end_mb: rssEndKb === null ? null : round(rssEndKb / 1024),
    fds_start: fdsStartSettled,
    fds_end: fdsEnd,
    upstream_sockets_end: upstreamEnd,
    eventloop_p99_ms_max: Math.max(0, ...loadSamples.map((s) => s.eventloop_p99_ms ?? 0)),
    pass: failed.length === 0,
    failed,
    checks,
    options: { ...options, out: outDir, warmupMinutes: round(warmupMin, 2) },
    machine: { ...machine, loadAverageAtEnd: round(loadavg()[0]) },
    store_restart: restart,
    client: {
      sent_total: client.sent,
      priming: primed.sent,
      connect_failures: client.connectFailures,
      aborted_before_headers: client.abortedBeforeHeaders,
      errors_before_headers: client.errorsBeforeHeaders,
      missing_request_id: client.missingRequestId,
      by_kind: client.byKind,
      outcomes: Object.fromEntries(Object.entries(client.outcomes).sort()),
    },
    records_by_status: recordsByStatus,
    records_unseen_by_status: unseenByStatus,
    samples: samples.length,
    files: {
      samples_jsonl: samplesFile,
      samples_csv: join(outDir, "samples.csv"),
      plots: Object.keys(plots).map((name) => join(outDir, name)),
    },
  }
  if (failed.length > 0) summary.gateway_log_tail = logTail(gatewayLog, 20)
  const summaryFile = join(outDir, "summary.json")
  await writeFile(summaryFile, `${JSON.stringify(summary, null, 2)}\n`)
  log(
    `${sent} requests, ${records} records, spend ${fileCost} µUSD, RSS slope ${summary.rss_slope_mb_per_10min} MB/10 min, ` +
      `peak ${summary.rss_peak_mb} MB, ` +
      `fds ${fdsStartSettled} → ${fdsEnd}, upstream sockets at end ${upstreamEnd}`,
  )
  log(failed.length === 0 ? "all judged checks hold" : `FAILED: ${failed.join(", ")}`)
  process.stdout.write(`soak summary: ${summaryFile}\n`)
  return failed.length === 0
}

process.on("exit", () => {
  killAllNow()
  if (tempDir !== undefined && process.env.SOAK_KEEP_TEMP !== "1")
    rmSync(tempDir, { recursive: true, force: true })
})
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    killAllNow()
    process.exit(130)
  })
}
// A backstop: the run, drain, idle tail and checks take minutes + about 2; give up well after that.
setTimeout(
  () => {
    log("still running long after the expected end, giving up")
    process.exit(2)
  },
  durationMs * 1.5 + 10 * 60_000,
).unref()

main().then(
  async (ok) => {
    await stopAll()
    process.exit(ok ? 0 : 1)
  },
  async (error) => {
    log(`soak failed: ${error.stack ?? error.message}`)
    await stopAll()
    process.exit(1)
  },
)
