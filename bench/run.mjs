// `npm run bench`: Tollgate against the fake upstream directly and against a plain Node proxy, in one run.
// Starts the fake upstream, the plain proxy and Tollgate (each its own process), then runs three
// measurements per target, each in a fresh load-generator process, rotating the target order between
// measurements. Prints a table, then the same results as one JSON line (the last line of stdout).
// Options (env): BENCH_DURATION_S (5), BENCH_WARMUP_S (1), BENCH_CONCURRENCY (64), BENCH_RPS (500),
// BENCH_ROUNDS (1), BENCH_API (anthropic | openai), BENCH_UPSTREAM (fake | stub), BENCH_TOLLGATE and
// BENCH_FAKEPROVIDER (binary paths; default bin/tollgate, bin/fakeprovider). See bench/README.md.
import { existsSync, rmSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { request } from "undici"
import { cpuTimeMs, killAllNow, logTail, runLoad, startServer, stopAll } from "./lib/procs.mjs"
import { formatSummary, LABELS, summarise, TARGETS } from "./lib/report.mjs"
import { requestFor, UPSTREAM_KEY, UPSTREAM_KEY_ENV, writeTollgateConfig } from "./lib/setup.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, "..")

const number = (name, fallback) => {
  const raw = process.env[name]
  const value = raw === undefined || raw === "" ? fallback : Number(raw)
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`${name} must be a positive number, got "${raw}"`)
  return value
}

const oneOf = (name, allowed) => {
  const value = process.env[name] || allowed[0]
  if (!allowed.includes(value))
    throw new Error(`${name} must be one of ${allowed.join(", ")}, got "${value}"`)
  return value
}

const readOptions = () => ({
  durationS: number("BENCH_DURATION_S", 5),
  warmupS: number("BENCH_WARMUP_S", 1),
  concurrency: Math.round(number("BENCH_CONCURRENCY", 64)),
  rps: number("BENCH_RPS", 500),
  rounds: Math.round(number("BENCH_ROUNDS", 1)),
  api: oneOf("BENCH_API", ["anthropic", "openai"]),
  upstream: oneOf("BENCH_UPSTREAM", ["fake", "stub"]),
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

const log = (line) => process.stderr.write(`${line}\n`)

/** One request through `url` that must answer 2xx with a complete body; returns a reason when it does not. */
const smokeTest = async (url, via) => {
  for (const stream of [false, true]) {
    const req = requestFor({ api: options.api, via, stream, ...options })
    try {
      const res = await request(`${url}${req.path}`, { method: "POST", headers: req.headers, body: req.body })
      const text = await res.body.text()
      if (res.statusCode < 200 || res.statusCode > 299)
        return `${stream ? "SSE" : "JSON"} ${res.statusCode}: ${text.slice(0, 300)}`
      if (!text.includes(req.expect))
        return `${stream ? "SSE" : "JSON"} body without ${req.expect}: ${text.slice(0, 300)}`
    } catch (error) {
      return `${stream ? "SSE" : "JSON"} request failed: ${error.message}`
    }
  }
  return undefined
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
  const fake = await startServer({
    name: "fake upstream",
    script: fakeScript,
    args: ["--listen", "127.0.0.1:0", "--scenario", "max-tokens", "--name", "bench"],
    logFile: join(dir, "fake.log"),
    pipeStdin: options.upstream === "stub",
  })
  log(`fake upstream   ${fake.url}  (${fakeScript})`)
  const servers = { direct: { url: fake.url, pid: fake.child.pid, via: "direct" } }
  const skipped = {}
  const proxy = startServer({
    name: "plain proxy",
    script: join(here, "plain-proxy.mjs"),
    args: ["--listen", "127.0.0.1:0", "--upstream", fake.url],
    logFile: join(dir, "plain-proxy.log"),
    pipeStdin: true,
  })
  const tollgateBin = resolve(process.env.BENCH_TOLLGATE || join(root, "bin", "tollgate"))
  const tollgate = existsSync(tollgateBin)
    ? writeTollgateConfig(dir, fake.url).then((config) =>
        startServer({
          name: "tollgate",
          script: tollgateBin,
          args: ["serve", "--config", config],
          env: { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY },
          logFile: join(dir, "tollgate.log"),
        }),
      )
    : Promise.reject(new Error(`${tollgateBin} not found (run \`npm run build\`)`))
  const [proxyResult, tollgateResult] = await Promise.allSettled([proxy, tollgate])
  for (const [target, result] of [
    ["plain_proxy", proxyResult],
    ["tollgate", tollgateResult],
  ]) {
    if (result.status === "fulfilled") {
      servers[target] = {
        url: result.value.url,
        pid: result.value.child.pid,
        via: target,
        logFile: result.value.logFile,
      }
      log(`${LABELS[target].padEnd(15)} ${result.value.url}`)
    } else {
      skipped[target] = result.reason.message.split("\n")[0]
      log(`${LABELS[target]}: ${result.reason.message}`)
    }
  }
  for (const target of TARGETS) {
    if (servers[target] === undefined) continue
    const problem = await smokeTest(servers[target].url, servers[target].via)
    if (problem !== undefined) {
      skipped[target] = problem.split("\n")[0]
      log(`${LABELS[target]} failed its smoke test: ${problem}`)
      if (servers[target].logFile !== undefined) log(logTail(servers[target].logFile))
      delete servers[target]
    }
  }
  return { servers, skipped }
}

const KINDS = [
  { kind: "json", mode: "closed", stream: false },
  { kind: "sse", mode: "closed", stream: true },
  { kind: "latency", mode: "open", stream: false },
]

const measure = async (servers) => {
  const runs = []
  const live = TARGETS.filter((target) => servers[target] !== undefined)
  let turn = 0
  for (let round = 0; round < options.rounds; round++) {
    for (const { kind, mode, stream } of KINDS) {
      const order = live.map((_, i) => live[(i + turn) % live.length])
      turn++
      for (const target of order) {
        const server = servers[target]
        const req = requestFor({ api: options.api, via: server.via, stream, ...options })
        const spec = { origin: server.url, ...req, mode, ...options }
        const result = await runLoad({
          script: join(here, "load.mjs"),
          spec,
          cpuOf: () => cpuTimeMs(server.pid),
          timeoutMs: (options.warmupS + options.durationS) * 1000 + 60_000,
        })
        runs.push({ round, target, kind, result })
        const rate =
          kind === "latency"
            ? `p50 ${result.p50Ms?.toFixed(2)} ms  p99 ${result.p99Ms?.toFixed(2)} ms`
            : `${result.rate.toFixed(0)}/s`
        const errors = result.errorCount > 0 ? `  ERRORS ${JSON.stringify(result.errors)}` : ""
        log(`round ${round + 1}  ${kind.padEnd(7)} ${LABELS[target].padEnd(11)}  ${rate}${errors}`)
      }
    }
  }
  return runs
}

let tempDir

const main = async () => {
  const dir = await mkdtemp(join(tmpdir(), "tollgate-bench-"))
  tempDir = dir
  try {
    log(
      `bench: ${options.api} API, ${options.warmupS} s warm-up + ${options.durationS} s per run, ` +
        `concurrency ${options.concurrency}, latency at ${options.rps} req/s, ${options.rounds} round(s)`,
    )
    const machine = { cpus: availableParallelism(), loadAverageAtStart: Number(loadavg()[0].toFixed(2)) }
    log(`machine: ${machine.cpus} CPUs, load average ${machine.loadAverageAtStart}`)
    if (machine.loadAverageAtStart > 1) {
      log("warning: the machine is busy; absolute numbers will be low and noisy, compare ratios only")
    }
    const { servers, skipped } = await startAll(dir)
    const runs = await measure(servers)
    const summary = summarise(runs, skipped)
    process.stdout.write(`\n${formatSummary(summary, options).join("\n")}\n`)
    process.stdout.write(`${JSON.stringify({ options, machine, ...summary, runs })}\n`)
  } finally {
    await stopAll()
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
const expectedMs = options.rounds * 9 * (options.warmupS + options.durationS) * 1000
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
