// `npm run bench`: Tollgate against the fake upstream directly and against a plain Node proxy, in one run,
// plus what limits and budgets (memory and Redis store), breakers shared through Redis (`breaker.shared`),
// one fallback and OpenTelemetry tracing cost.
// Starts the fake upstream, the plain proxy and one Tollgate per row (each its own process; a Redis and a
// second fake answering 529 for the rows that need them, the one Redis shared by both Redis rows; for the
// tracing rows, one OTLP/HTTP sink in this process, bench/lib/collector.mjs, that both send their spans
// to), then runs the measurements of every
// row, each in a fresh load-generator process, rotating the row order between measurements, then the paired
// phase (adjacent runs of the plain proxy and of each of `tollgate` and the Redis row: JSON and SSE
// throughput, p50/p99 at BENCH_RPS; the headline ratios), then the open-streams phase (BENCH_STREAMS SSE
// streams held open at once through each server, its RSS sampled; `tollgate` and the Redis row on either
// side of the plain proxy). Before the
// open-streams phase, the API-path phase: the OpenAI Responses API through Tollgate and through the plain
// proxy, and Chat Completions through a translating route (to an Anthropic target) next to the plain proxy
// and Tollgate's untranslated route, in adjacent runs. Prints a table, then the same results as one JSON
// line (the last line of stdout).
// Options (env): BENCH_DURATION_S (5), BENCH_WARMUP_S (1), BENCH_PRIME_S (6), BENCH_CONCURRENCY (64), BENCH_RPS (500),
// BENCH_ROUNDS (1), BENCH_PAIRS (4), BENCH_PAIR_S (3), BENCH_LATENCY_PAIR_S (5), BENCH_STREAMS (1000), BENCH_API (anthropic | openai), BENCH_UPSTREAM (fake | stub), BENCH_LIMITS (1 | 0),
// BENCH_REDIS (1 | 0), BENCH_SHARED (1 | 0: the shared-breakers row, with BENCH_REDIS), BENCH_FALLBACK (1 | 0), BENCH_TRACING (1 | 0), BENCH_RESPONSES (1 | 0), BENCH_TRANSLATED (1 | 0), BENCH_CLOUDS (1 | 0), BENCH_STICKY (1 | 0), BENCH_PATH_ROUNDS (2),
// BENCH_TOLLGATE, BENCH_FAKEPROVIDER and BENCH_REDIS_SERVER
// (binary paths; default bin/tollgate, bin/fakeprovider, redis-server on PATH). See bench/README.md.
import { existsSync, rmSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { request } from "undici"
import { startCollector } from "./lib/collector.mjs"
import {
  cpuTimeMs,
  killAllNow,
  logTail,
  memoryMb,
  runHold,
  runLoad,
  shebangNodeArgs,
  startServer,
  stopAll,
  which,
} from "./lib/procs.mjs"
import { redisCommand, startRedis } from "./lib/redis.mjs"
import {
  formatSummary,
  holdsStreams,
  kindsOf,
  LABELS,
  PAIRED_ROWS,
  PATH_GROUPS,
  summarise,
  TARGETS,
} from "./lib/report.mjs"
import {
  AWS_ENV,
  headerProblem,
  requestFor,
  UPSTREAM_KEY,
  UPSTREAM_KEY_ENV,
  writeTollgateConfig,
} from "./lib/setup.mjs"
import { bodyProblem } from "./lib/validate.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, "..")

const number = (name, fallback, { zero = false } = {}) => {
  const raw = process.env[name]
  const value = raw === undefined || raw === "" ? fallback : Number(raw)
  if (!Number.isFinite(value) || value < 0 || (value === 0 && !zero))
    throw new Error(`${name} must be a ${zero ? "non-negative" : "positive"} number, got "${raw}"`)
  return value
}

const oneOf = (name, allowed) => {
  const value = process.env[name] || allowed[0]
  if (!allowed.includes(value))
    throw new Error(`${name} must be one of ${allowed.join(", ")}, got "${value}"`)
  return value
}

const flag = (name) => oneOf(name, ["1", "0"]) === "1"

const readOptions = () => ({
  durationS: number("BENCH_DURATION_S", 5),
  warmupS: number("BENCH_WARMUP_S", 1),
  primeS: number("BENCH_PRIME_S", 6, { zero: true }),
  concurrency: Math.round(number("BENCH_CONCURRENCY", 64)),
  rps: number("BENCH_RPS", 500),
  rounds: Math.round(number("BENCH_ROUNDS", 1)),
  // Rounded up to an even count: the alternating order is balanced only over whole rounds in each order.
  pairs: 2 * Math.ceil(Math.round(number("BENCH_PAIRS", 4, { zero: true })) / 2),
  pairS: number("BENCH_PAIR_S", 3),
  // Longer than a throughput pair's: at 500 req/s, 5 s give 2,500 latencies, the p99 being the 25th-slowest.
  latencyPairS: number("BENCH_LATENCY_PAIR_S", 5),
  streams: Math.round(number("BENCH_STREAMS", 1000, { zero: true })),
  api: oneOf("BENCH_API", ["anthropic", "openai"]),
  upstream: oneOf("BENCH_UPSTREAM", ["fake", "stub"]),
  limits: flag("BENCH_LIMITS"),
  redis: flag("BENCH_REDIS"),
  shared: flag("BENCH_SHARED"),
  fallback: flag("BENCH_FALLBACK"),
  tracing: flag("BENCH_TRACING"),
  responses: flag("BENCH_RESPONSES"),
  translated: flag("BENCH_TRANSLATED"),
  clouds: flag("BENCH_CLOUDS"),
  sticky: flag("BENCH_STICKY"),
  // Rounded up to an even count, like BENCH_PAIRS: the order of each group alternates from round to round.
  pathRounds: 2 * Math.ceil(Math.round(number("BENCH_PATH_ROUNDS", 2, { zero: true })) / 2),
  jsonTokens: 16,
  streamTokens: 50,
})

let options
try {
  options = readOptions()
} catch (error) {
  process.stderr.write(`bench: ${error.message}\n`)
  process.exit(1)
}

/** The rows of this run, in table order. */
const enabled = TARGETS.filter(
  (target) =>
    !(target.startsWith("tollgate_limits") && !options.limits) &&
    !(target.startsWith("tollgate_limits_redis") && !options.redis) &&
    !(target === "tollgate_limits_redis_shared" && !options.shared) &&
    !(target === "tollgate_fallback" && !options.fallback) &&
    !(target.startsWith("tollgate_traced") && !options.tracing),
)

/** The groups of the API-path phase this run measures (none with BENCH_PATH_ROUNDS=0), and their rows. */
const pathGroups =
  options.pathRounds === 0
    ? []
    : Object.entries(PATH_GROUPS)
        .filter(([group]) => options[group])
        .map(([, rows]) => rows)
const pathRows = pathGroups.flat()
/** The rows that are the plain proxy on another path (the same process as the main table's plain proxy). */
const PROXY_ALIASES = new Set(["plain_proxy_responses", "plain_proxy_chat"])
/** The width of the row names in the progress lines. */
const labelWidth = Math.max(26, ...[...enabled, ...pathRows].map((target) => LABELS[target].length))

const log = (line) => process.stderr.write(`${line}\n`)

/**
 * The requests of `target` for its measured kinds through `url`, each of which must answer 2xx with the
 * expected headers and a complete body; returns a reason when one does not.
 */
const smokeTest = async (url, target) => {
  const streams = kindsOf(target).includes("sse") ? [false, true] : [false]
  for (const stream of streams) {
    const req = requestFor({ api: options.api, target, stream, ...options })
    const what = stream ? "SSE" : "JSON"
    try {
      const res = await request(`${url}${req.path}`, { method: "POST", headers: req.headers, body: req.body })
      const text = await res.body.text()
      if (res.statusCode < 200 || res.statusCode > 299)
        return `${what} ${res.statusCode}: ${text.slice(0, 300)}`
      const problem = headerProblem(req.expectHeaders, res.headers)
      if (problem !== undefined) return `${what} ${problem}`
      if (!text.includes(req.expect)) return `${what} body without ${req.expect}: ${text.slice(0, 300)}`
      const invalid = req.validate === undefined ? undefined : bodyProblem(req.validate, text)
      if (invalid !== undefined) return `${what} body not valid (${invalid}): ${text.slice(0, 300)}`
    } catch (error) {
      return `${what} request failed: ${error.message}`
    }
  }
  return undefined
}

/** Thrown for a row that cannot run because an optional tool is missing (shown, but the run stays valid). */
class Unavailable extends Error {}

/** The redis-server of the Redis rows (a promise of it), started by the first of them that starts. */
let redisServer

/** The one redis-server both Redis rows use (same server, as a fleet's copies would share one). */
const sharedRedis = (dir) => {
  redisServer ??= (async () => {
    const bin = process.env.BENCH_REDIS_SERVER || which("redis-server")
    if (bin === undefined)
      throw new Unavailable("redis-server not on PATH (install it, or set BENCH_REDIS_SERVER)")
    if (!existsSync(bin)) throw new Unavailable(`BENCH_REDIS_SERVER ${bin} not found`)
    const redis = await startRedis({ bin, dir, logFile: join(dir, "redis.log") })
    log(`redis-server    ${redis.url}  (${bin})`)
    return redis
  })()
  return redisServer
}

/** The key of the fleet's retry budget (src/reliability/sharedRetryBudget.ts): only `breaker.shared` writes it. */
const SHARED_RETRY_KEY = "tollgate:{retry}"

/** The OTLP/HTTP sink of the tracing rows (a promise of it), started by the first row that needs it. */
let collector

/** The sink's root, started once (in this process); each tracing row posts under a path of its own. */
const collectorUrl = async () => {
  collector ??= startCollector().then((started) => {
    log(`otlp collector  ${started.url}  (in the bench process)`)
    return started
  })
  return (await collector).url
}

/** The sink's counts, logged at the end so one sees the spans were exported; undefined if never started. */
const collectorStats = async () => {
  if (collector === undefined) return undefined
  const { stats } = await collector
  return stats
}

const startAll = async (dir) => {
  const fakeScript =
    options.upstream === "stub"
      ? join(here, "stub-upstream.mjs")
      : resolve(process.env.BENCH_FAKEPROVIDER || join(root, "bin", "fakeprovider"))
  if (!existsSync(fakeScript)) {
    throw new Error(
      `${fakeScript} not found: run \`npm run build\` first (or BENCH_UPSTREAM=stub to use bench's stub)`,
    )
  }
  const startFake = (name, scenario) =>
    startServer({
      name,
      script: fakeScript,
      args: ["--listen", "127.0.0.1:0", "--scenario", scenario, "--name", name.replace(/ /g, "-")],
      // The credentials the Bedrock row's signatures are checked against: the ones its Tollgate signs with.
      env: AWS_ENV,
      logFile: join(dir, `${name.replace(/ /g, "-")}.log`),
      pipeStdin: options.upstream === "stub",
    })
  const fake = await startFake("fake upstream", "max-tokens")
  log(`fake upstream   ${fake.url}  (${fakeScript})`)
  const servers = { direct: { url: fake.url, pid: fake.child.pid } }
  const skipped = {}
  const unavailable = {}
  const extras = {}

  const tollgateBin = resolve(process.env.BENCH_TOLLGATE || join(root, "bin", "tollgate"))
  const startTollgate = async (target, urls) => {
    if (!existsSync(tollgateBin)) throw new Error(`${tollgateBin} not found (run \`npm run build\`)`)
    const config = await writeTollgateConfig(dir, target, { upstreamUrl: fake.url, ...urls })
    return startServer({
      name: LABELS[target],
      script: tollgateBin,
      nodeArgs: shebangNodeArgs(tollgateBin),
      args: ["serve", "--config", config],
      env: { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY, ...AWS_ENV },
      logFile: join(dir, `${target}.log`),
    })
  }
  const startRedisRow = async (target) => {
    const redis = await sharedRedis(dir)
    extras.redis = redis
    return { ...(await startTollgate(target, { redisUrl: redis.url })), extraPid: redis.pid }
  }
  const starters = {
    plain_proxy: () =>
      startServer({
        name: "plain proxy",
        script: join(here, "plain-proxy.mjs"),
        args: ["--listen", "127.0.0.1:0", "--upstream", fake.url],
        logFile: join(dir, "plain-proxy.log"),
        pipeStdin: true,
      }),
    tollgate: () => startTollgate("tollgate", {}),
    tollgate_limits_memory: () => startTollgate("tollgate_limits_memory", {}),
    tollgate_limits_redis: () => startRedisRow("tollgate_limits_redis"),
    tollgate_limits_redis_shared: () => startRedisRow("tollgate_limits_redis_shared"),
    tollgate_fallback: async () => {
      const failing = await startFake("fake 529", "status:529")
      log(`fake 529        ${failing.url}`)
      return startTollgate("tollgate_fallback", { failingUrl: failing.url })
    },
    tollgate_traced: async () =>
      startTollgate("tollgate_traced", { collectorUrl: `${await collectorUrl()}/tollgate_traced` }),
    tollgate_traced_sampled: async () =>
      startTollgate("tollgate_traced_sampled", {
        collectorUrl: `${await collectorUrl()}/tollgate_traced_sampled`,
      }),
    tollgate_responses: () => startTollgate("tollgate_responses", {}),
    tollgate_chat: () => startTollgate("tollgate_chat", {}),
    tollgate_translated: () => startTollgate("tollgate_translated", {}),
    tollgate_messages: () => startTollgate("tollgate_messages", {}),
    tollgate_bedrock: () => startTollgate("tollgate_bedrock", {}),
    tollgate_gemini: () => startTollgate("tollgate_gemini", {}),
    tollgate_unsticky: () => startTollgate("tollgate_unsticky", {}),
    tollgate_sticky: () => startTollgate("tollgate_sticky", {}),
    tollgate_unsticky_redis: () => startRedisRow("tollgate_unsticky_redis"),
    tollgate_sticky_redis: () => startRedisRow("tollgate_sticky_redis"),
  }
  const started = [
    ...enabled.filter((target) => target !== "direct"),
    ...pathRows.filter((target) => !PROXY_ALIASES.has(target)),
  ]
  const results = await Promise.allSettled(started.map((target) => starters[target]()))
  started.forEach((target, i) => {
    const result = results[i]
    if (result.status === "fulfilled") {
      const { url, child, logFile, extraPid } = result.value
      servers[target] = { url, pid: child.pid, logFile, extraPid }
      log(`${LABELS[target].padEnd(15)} ${url}`)
    } else {
      const into = result.reason instanceof Unavailable ? unavailable : skipped
      into[target] = result.reason.message.split("\n")[0]
      log(`${LABELS[target]}: ${result.reason.message}`)
    }
  })
  for (const target of pathRows.filter((target) => PROXY_ALIASES.has(target))) {
    if (servers.plain_proxy !== undefined) servers[target] = servers.plain_proxy
    else skipped[target] = `plain proxy not started: ${skipped.plain_proxy ?? "disabled"}`
  }
  for (const target of [...enabled, ...pathRows]) {
    if (servers[target] === undefined) continue
    let problem = await smokeTest(servers[target].url, target)
    if (problem === undefined && target.startsWith("tollgate_limits_redis")) {
      const size = await redisCommand(extras.redis.port, "DBSIZE").catch((error) => error.message)
      if (!/^:[1-9]/.test(size)) problem = `no keys in Redis after the smoke test (DBSIZE ${size})`
    }
    if (problem === undefined && target === "tollgate_limits_redis_shared") {
      // The copy adds its counts to the fleet's at its next sync (every 0.5 s): wait for up to 3 s.
      let exists
      for (let tries = 0; tries < 30 && exists !== ":1"; tries++) {
        if (tries > 0) await sleep(100)
        exists = await redisCommand(extras.redis.port, `EXISTS ${SHARED_RETRY_KEY}`).catch(
          (error) => error.message,
        )
      }
      if (exists !== ":1")
        problem = `no shared retry budget (${SHARED_RETRY_KEY}) in Redis 3 s after the smoke test (EXISTS ${exists})`
    }
    if (problem !== undefined) {
      skipped[target] = problem.split("\n")[0]
      log(`${LABELS[target]} failed its smoke test: ${problem}`)
      if (servers[target].logFile !== undefined) log(logTail(servers[target].logFile))
      delete servers[target]
    }
  }
  return { servers, skipped, unavailable, extras }
}

const KINDS = [
  { kind: "json", mode: "closed", stream: false },
  { kind: "sse", mode: "closed", stream: true },
  { kind: "latency", mode: "open", stream: false },
]

/**
 * Unmeasured traffic to every server before the first measured run: its JSON
 * request for `primeS` seconds, then its stream for half as long. The JIT of a
 * fresh process needs more than one run's warm-up to reach steady state, and
 * more for Tollgate's code than for the plain proxy's (measured with
 * bench/ab.mjs: CPU per response of a fresh Tollgate +45–75 % in its first 6 s,
 * the plain proxy's +10–30 %), so without it the first kind measured (JSON)
 * would compare a cold Tollgate with a nearly warm proxy.
 */
const prime = async (servers, targets) => {
  if (options.primeS <= 0) return
  for (const target of targets) {
    const server = servers[target]
    if (server === undefined) continue
    for (const { kind, stream } of KINDS) {
      if (kind === "latency" || !kindsOf(target).includes(kind)) continue
      const durationS = kind === "json" ? options.primeS : options.primeS / 2
      const req = requestFor({ api: options.api, target, stream, ...options })
      const spec = { origin: server.url, ...req, mode: "closed", ...options, warmupS: 0, durationS }
      // A failure here shows again in the measured runs, which report it; priming only warms up.
      await runLoad({
        script: join(here, "load.mjs"),
        spec,
        cpuOf: () => null,
        timeoutMs: durationS * 1000 + 60_000,
      }).catch((error) => log(`priming ${LABELS[target]} (${kind}) failed: ${error.message}`))
    }
    log(`primed ${LABELS[target]}`)
  }
}

const measure = async (servers) => {
  const runs = []
  let turn = 0
  for (let round = 0; round < options.rounds; round++) {
    for (const { kind, mode, stream } of KINDS) {
      const live = enabled.filter((target) => servers[target] !== undefined && kindsOf(target).includes(kind))
      const order = live.map((_, i) => live[(i + turn) % live.length])
      turn++
      for (const target of order) {
        const server = servers[target]
        const req = requestFor({ api: options.api, target, stream, ...options })
        const spec = { origin: server.url, ...req, mode, ...options }
        const result = await runLoad({
          script: join(here, "load.mjs"),
          spec,
          cpuOf: () => cpuTimeMs(server.pid),
          ...(server.extraPid === undefined ? {} : { extraCpuOf: () => cpuTimeMs(server.extraPid) }),
          timeoutMs: (options.warmupS + options.durationS) * 1000 + 60_000,
        })
        runs.push({ round, target, kind, result })
        const rate =
          kind === "latency"
            ? `p50 ${result.p50Ms?.toFixed(2)} ms  p99 ${result.p99Ms?.toFixed(2)} ms`
            : `${result.rate.toFixed(0)}/s`
        const errors = result.errorCount > 0 ? `  ERRORS ${JSON.stringify(result.errors)}` : ""
        log(`round ${round + 1}  ${kind.padEnd(7)} ${LABELS[target].padEnd(labelWidth)}  ${rate}${errors}`)
      }
    }
  }
  return runs
}

/** The rows of PAIRED_ROWS this run pairs with the plain proxy (both must have started). */
const pairedRows = (servers) =>
  servers.plain_proxy === undefined ? [] : PAIRED_ROWS.filter((target) => servers[target] !== undefined)

/**
 * The headline figures, each row of PAIRED_ROWS (`tollgate`, and the Redis row when it runs) against the
 * plain proxy, from runs next to each other in time: for JSON, then SSE, then latency (open loop at
 * BENCH_RPS), `pairs` rounds of one run of each server (`pairS` seconds each, `latencyPairS` for latency,
 * after the usual warm-up), the plain proxy in the middle and the order reversed from round to round
 * (tollgate, proxy, redis; redis, proxy, tollgate; …; with one row: tollgate, proxy; proxy, tollgate; …):
 * each row's run is next to a proxy run, each row runs first in half of its pairs, and every server's mean
 * position is the same, so a machine that speeds up or slows down during the phase favours none. The
 * table's rows are seconds to a minute apart; on a machine whose speed moves by more than the gap being
 * measured (this one's moves by up to 1.5× within minutes), only runs this close compare the servers.
 */
const measurePairs = async (servers) => {
  const runs = []
  const rows = pairedRows(servers)
  if (options.pairs === 0 || rows.length === 0) return runs
  const order = [rows[0], "plain_proxy", ...rows.slice(1)]
  for (const { kind, mode, stream } of KINDS) {
    const durationS = kind === "latency" ? options.latencyPairS : options.pairS
    for (let index = 0; index < options.pairs; index++) {
      for (const target of index % 2 === 0 ? order : [...order].reverse()) {
        const server = servers[target]
        const req = requestFor({ api: options.api, target, stream, ...options })
        const spec = { origin: server.url, ...req, mode, ...options, durationS }
        // A load generator that fails is one failed run (the rows measured before it still count).
        const result = await runLoad({
          script: join(here, "load.mjs"),
          spec,
          cpuOf: () => cpuTimeMs(server.pid),
          ...(server.extraPid === undefined ? {} : { extraCpuOf: () => cpuTimeMs(server.extraPid) }),
          timeoutMs: (options.warmupS + durationS) * 1000 + 60_000,
        }).catch((error) => {
          log(`pair ${index + 1} ${kind} ${LABELS[target]}: ${error.message.split("\n")[0]}`)
          return { completed: 0, rate: 0, cpuMs: null, errors: { "load-generator-failed": 1 }, errorCount: 1 }
        })
        runs.push({ pair: index, target, kind, result })
        const errors = result.errorCount > 0 ? `  ERRORS ${JSON.stringify(result.errors)}` : ""
        const figure =
          kind === "latency"
            ? `p50 ${result.p50Ms?.toFixed(2)} ms  p99 ${result.p99Ms?.toFixed(2)} ms`
            : `${result.rate.toFixed(0)}/s`
        log(`pair ${index + 1}  ${kind.padEnd(7)} ${LABELS[target].padEnd(labelWidth)}  ${figure}${errors}`)
      }
    }
  }
  return runs
}

/**
 * The API-path phase: for JSON, then SSE, `pathRounds` rounds in which each group of PATH_GROUPS runs its
 * rows one right after the other (`pairS` seconds each, after the usual warm-up), in table order in even
 * rounds and reversed in odd ones (P T, T P; P C X, X C P), so every row's mean position is the same and a
 * machine that speeds up or slows down favours none. The Tollgate rows are primed first (their processes
 * have served nothing yet; the plain proxy has served the whole bench) and their idle RSS sampled into
 * `rssAfterWarmup`. Every response's whole body is checked (bench/lib/validate.mjs).
 */
const measurePaths = async (servers, rssAfterWarmup) => {
  const runs = []
  const live = pathGroups.map((rows) => rows.filter((target) => servers[target] !== undefined))
  if (live.every((rows) => rows.length === 0)) return runs
  const tollgates = live.flat().filter((target) => !PROXY_ALIASES.has(target))
  await prime(servers, tollgates)
  await sleep(1000)
  for (const target of tollgates) rssAfterWarmup[target] = memoryMb(servers[target].pid)
  for (const { kind, mode, stream } of KINDS) {
    if (kind === "latency") continue
    for (let round = 0; round < options.pathRounds; round++) {
      for (const rows of live) {
        for (const target of round % 2 === 0 ? rows : [...rows].reverse()) {
          const server = servers[target]
          const req = requestFor({ api: options.api, target, stream, ...options })
          const spec = { origin: server.url, ...req, mode, ...options, durationS: options.pairS }
          const result = await runLoad({
            script: join(here, "load.mjs"),
            spec,
            cpuOf: () => cpuTimeMs(server.pid),
            timeoutMs: (options.warmupS + options.pairS) * 1000 + 60_000,
          }).catch((error) => {
            log(`path round ${round + 1} ${kind} ${LABELS[target]}: ${error.message.split("\n")[0]}`)
            return {
              completed: 0,
              rate: 0,
              cpuMs: null,
              errors: { "load-generator-failed": 1 },
              errorCount: 1,
            }
          })
          runs.push({ pair: round, target, kind, result })
          const errors = result.errorCount > 0 ? `  ERRORS ${JSON.stringify(result.errors)}` : ""
          log(
            `path ${round + 1}  ${kind.padEnd(7)} ${LABELS[target].padEnd(labelWidth)}  ${result.rate.toFixed(0)}/s${errors}`,
          )
        }
      }
    }
  }
  return runs
}

/** The fake's scenario for the open-streams phase: a few tokens (so every stream commits), then it waits. */
const HOLD_SCENARIO = "max-tokens,hang-after:5-tokens"
/** Seconds each open-streams client may take to open all its streams. */
const OPEN_TIMEOUT_S = 30
/** How long the streams stay open after the first RSS sample, for the second one. */
const HOLD_SAMPLE_MS = 1000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every server's resident memory now (the Tollgate and plain-proxy processes; not the fake's). */
const sampleIdle = (servers) =>
  Object.fromEntries(
    enabled
      .filter((target) => target !== "direct" && servers[target] !== undefined)
      .map((target) => [target, memoryMb(servers[target].pid)]),
  )

/**
 * The order of the open-streams phase: `tollgate`, the plain proxy, the Redis row (so each row of
 * PAIRED_ROWS is measured right next to the proxy, which its RSS is compared with), then the other rows
 * in table order.
 */
const openStreamsOrder = () => {
  const first = [PAIRED_ROWS[0], "plain_proxy", ...PAIRED_ROWS.slice(1)].filter((target) =>
    enabled.includes(target),
  )
  return [...first, ...enabled.filter((target) => !first.includes(target))]
}

/**
 * The open-streams phase: for each row that streams (not direct, not the fallback row, whose 529 fake
 * the scenario header would override), in openStreamsOrder, `streams` SSE streams opened at once by one
 * client process (bench/hold.mjs); once every stream has delivered its first bytes, the server's RSS is
 * sampled, again HOLD_SAMPLE_MS later, and the streams are closed. The fake upstream holds each stream
 * open (`x-fake-scenario: max-tokens,hang-after:5-tokens`, passed on by both Tollgate and the plain
 * proxy). Each result has its `position` in the phase (0 first).
 */
const measureOpenStreams = async (servers) => {
  const results = {}
  if (options.streams === 0) return results
  let position = 0
  for (const target of openStreamsOrder()) {
    const server = servers[target]
    if (server === undefined || !holdsStreams(target)) continue
    await sleep(500)
    const idle = memoryMb(server.pid)
    const req = requestFor({ api: options.api, target, stream: true, ...options })
    const spec = {
      origin: server.url,
      path: req.path,
      headers: { ...req.headers, "x-fake-scenario": HOLD_SCENARIO },
      body: req.body,
      streams: options.streams,
      openTimeoutS: OPEN_TIMEOUT_S,
      holdS: OPEN_TIMEOUT_S,
    }
    const result = await runHold({
      script: join(here, "hold.mjs"),
      spec,
      onOpen: async () => {
        const atOpen = memoryMb(server.pid)
        await sleep(HOLD_SAMPLE_MS)
        return { atOpen, afterHold: memoryMb(server.pid) }
      },
      timeoutMs: (2 * OPEN_TIMEOUT_S + 30) * 1000,
    }).catch((error) => {
      log(`open streams ${LABELS[target]}: ${error.message.split("\n")[0]}`)
      return {
        requested: options.streams,
        open: 0,
        errors: { "open-streams-client-failed": 1 },
        errorCount: 1,
      }
    })
    const missing = result.requested - result.open - result.errorCount
    const errors = { ...result.errors, ...(missing > 0 ? { "not-open-in-time": missing } : {}) }
    results[target] = {
      position: position++,
      streams: result.requested,
      open: result.open,
      openMs: result.openMs ?? null,
      idleRssMb: idle?.rss ?? null,
      rssAtOpenMb: result.sample?.atOpen?.rss ?? null,
      rssAfterHoldMb: result.sample?.afterHold?.rss ?? null,
      hwmMb: result.sample?.afterHold?.hwm ?? null,
      errors,
    }
    const errorText = Object.keys(errors).length > 0 ? `  ERRORS ${JSON.stringify(errors)}` : ""
    const rss = (mb) => (typeof mb === "number" ? `${mb.toFixed(0)} MB` : "—")
    log(
      `open streams    ${LABELS[target].padEnd(labelWidth)}  ${result.open}/${result.requested} open in ${result.openMs ?? "—"} ms, ` +
        `RSS ${rss(results[target].idleRssMb)} idle → ${rss(results[target].rssAtOpenMb)}, ${rss(results[target].rssAfterHoldMb)} 1 s later${errorText}`,
    )
  }
  return results
}

let tempDir

/**
 * After the servers have stopped (each flushes its last spans at shutdown): what the OTLP sink received,
 * in all and per tracing row, on stderr; then closes it.
 */
const logCollector = async () => {
  if (collector === undefined) return
  const started = await collector.catch(() => undefined)
  if (started === undefined) return
  const { posts, bytes, byPath } = started.stats
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`
  log(`otlp collector received ${posts} posts, ${kb(bytes)}`)
  for (const [path, got] of Object.entries(byPath)) {
    const row = path.split("/")[1]
    log(`  ${(LABELS[row] ?? path).padEnd(24)} ${got.posts} posts, ${kb(got.bytes)}  (${path})`)
  }
  await started.close()
}

const main = async () => {
  const pairedLabels = PAIRED_ROWS.filter((target) => enabled.includes(target))
    .map((target) => LABELS[target])
    .join(" and ")
  const dir = await mkdtemp(join(tmpdir(), "tollgate-bench-"))
  tempDir = dir
  try {
    log(
      `bench: ${options.api} API, ${options.primeS} s priming per server, ` +
        `${options.warmupS} s warm-up + ${options.durationS} s per run, ` +
        `concurrency ${options.concurrency}, latency at ${options.rps} req/s, ${options.rounds} round(s), ` +
        `${options.pairs} paired round(s) of the plain proxy with ${pairedLabels}, ` +
        `${options.pairS} s (latency ${options.latencyPairS} s), ` +
        `rows: ${enabled.map((target) => LABELS[target]).join(", ")}` +
        (pathRows.length === 0
          ? ""
          : `; API paths: ${pathRows.map((target) => LABELS[target]).join(", ")}, ${options.pathRounds} round(s) of ${options.pairS} s`),
    )
    const machine = { cpus: availableParallelism(), loadAverageAtStart: Number(loadavg()[0].toFixed(2)) }
    log(`machine: ${machine.cpus} CPUs, load average ${machine.loadAverageAtStart}`)
    if (machine.loadAverageAtStart > 1) {
      log("warning: the machine is busy; absolute numbers will be low and noisy, compare ratios only")
    }
    const { servers, skipped, unavailable } = await startAll(dir)
    await prime(servers, enabled)
    // Idle RSS after warm-up: a moment after the priming traffic stopped.
    await sleep(1000)
    const rssAfterWarmup = sampleIdle(servers)
    const runs = await measure(servers)
    const pairRuns = await measurePairs(servers)
    const pathRuns = await measurePaths(servers, rssAfterWarmup)
    const openStreams = await measureOpenStreams(servers)
    machine.loadAverageAtEnd = Number(loadavg()[0].toFixed(2))
    const summary = summarise(runs, {
      enabled,
      skipped,
      unavailable,
      pairRuns,
      pairedRows: pairedRows(servers),
      rps: options.rps,
      latencyPairS: options.latencyPairS,
      rssAfterWarmup,
      openStreams,
      pathRows,
      pathRuns,
      pathRounds: options.pathRounds,
    })
    const load = `load average (1 min): ${machine.loadAverageAtStart} at start, ${machine.loadAverageAtEnd} at end, ${machine.cpus} CPUs`
    process.stdout.write(`\n${[...formatSummary(summary, options), load].join("\n")}\n`)
    // The sink's counts so far: the servers are still running until stopAll below (the stderr line then
    // has the final counts, with the spans each server flushes at shutdown).
    const otlpCollector = await collectorStats()
    const spans = otlpCollector === undefined ? {} : { otlpCollector }
    process.stdout.write(
      `${JSON.stringify({ options, machine, ...summary, ...spans, runs, pairRuns, pathRuns })}\n`,
    )
  } finally {
    await stopAll()
    await logCollector()
    await rm(dir, { recursive: true, force: true })
  }
}

process.on("exit", () => {
  killAllNow()
  if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true })
})
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    killAllNow()
    process.exit(130)
  })
}
const runsPerRound = enabled.reduce((sum, target) => sum + kindsOf(target).length, 0)
// The paired phase: per round, one run of the plain proxy and of each paired row, for JSON, SSE and latency.
const pairedServers = 1 + PAIRED_ROWS.filter((target) => enabled.includes(target)).length
const expectedMs =
  options.rounds * runsPerRound * (options.warmupS + options.durationS) * 1000 +
  options.pairs *
    pairedServers *
    (2 * (options.warmupS + options.pairS) + options.warmupS + options.latencyPairS) *
    1000 +
  options.pathRounds * 2 * pathRows.length * (options.warmupS + options.pairS) * 1000 +
  (enabled.length + pathRows.length) * options.primeS * 1500 +
  (options.streams === 0 ? 0 : enabled.filter(holdsStreams).length * 5000)
setTimeout(
  () => {
    log(`bench: still running after ${Math.round((expectedMs * 2 + 120_000) / 1000)} s, giving up`)
    process.exit(2)
  },
  expectedMs * 2 + 120_000,
).unref()

main().then(
  () => process.exit(0),
  (error) => {
    log(`bench failed: ${error.message}`)
    process.exit(1)
  },
)
