// Where a request's CPU goes, stage by stage (issue #35): Tollgate under a fixed load with `--cpu-prof`, one
// process per case (Anthropic Messages, Chat Completions and Responses; JSON and SSE), and its profile's
// samples in the measured window summed by the source file of the function that was running, mapped to a
// stage (parse, auth, admission, store, route, upstream, relay, meter, record, metrics, log, the pipeline's
// other code, Effect's runtime, Node's HTTP and streams, GC); a builtin of the engine (`writev`,
// `indexOfString`) counts for the file that called it. Printed as µs of CPU per request, with the
// same figure for the plain proxy's whole process (bench/plain-proxy.mjs, measured by /proc, no profile), and
// the plain proxy profiled the same way, to set Node's files (http, net, streams, fs), GC and the engine of
// both side by side: what Tollgate makes Node do beyond what forwarding alone costs.
//
// A profile's sampling costs CPU too, so the totals are above `npm run bench`'s; the split is what to read.
// The bundle is built with a source map (`npm run bench:profile` builds it: TOLLGATE_SOURCEMAP=1), which is
// how a sample's position in bin/tollgate finds its file under src/ or node_modules/.
//
// Each case: one warm-up load (3 s), 1.5 s idle, the measured load (`--seconds`, closed loop of
// `--concurrency` requests), 1.5 s idle, then SIGTERM (the profile is written as the process exits). The
// window is found in the profile as the samples between its two long idle runs.
//
// Usage: npm run bench:profile [-- --seconds 8] [--concurrency 32] [--cases anthropic-json,chat-sse,...]
//        [--json FILE] (the table as JSON too) [--bin PATH] (another build, e.g. of an earlier commit)
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { parseArgs } from "node:util"
import { cpuTimeMs, runLoad, shebangNodeArgs, startServer, stop, stopAll } from "./lib/procs.mjs"
import { requestFor, UPSTREAM_KEY, UPSTREAM_KEY_ENV, writeTollgateConfig } from "./lib/setup.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "..")
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "8" },
    concurrency: { type: "string", default: "32" },
    cases: { type: "string", default: "" },
    json: { type: "string" },
    bin: { type: "string" },
  },
})
const seconds = Number(values.seconds)
const concurrency = Number(values.concurrency)

/** The cases: name, the bench's variant (bench/lib/setup.mjs), stream or not, and the plain proxy's twin. */
const CASES = [
  { name: "anthropic-json", variant: "tollgate", stream: false, proxy: "plain_proxy" },
  { name: "anthropic-sse", variant: "tollgate", stream: true, proxy: "plain_proxy" },
  { name: "chat-json", variant: "tollgate_chat", stream: false, proxy: "plain_proxy_chat" },
  { name: "chat-sse", variant: "tollgate_chat", stream: true, proxy: "plain_proxy_chat" },
  { name: "responses-json", variant: "tollgate_responses", stream: false, proxy: "plain_proxy_responses" },
  { name: "responses-sse", variant: "tollgate_responses", stream: true, proxy: "plain_proxy_responses" },
]
const chosen = values.cases === "" ? CASES : CASES.filter((c) => values.cases.split(",").includes(c.name))
if (chosen.length === 0)
  throw new Error(`--cases: none of ${values.cases}; the cases: ${CASES.map((c) => c.name)}`)

/** Stages by the source file of the running function (the first that matches), in the table's order. */
const STAGES = [
  ["parse", /\/src\/gateway\/parse\.ts$|\/src\/http\//],
  ["auth", /\/src\/gateway\/auth\.ts$|\/src\/keys\//],
  ["admission", /\/src\/gateway\/admission\.ts$/],
  ["store", /\/src\/limits\//],
  ["route", /\/src\/gateway\/routing\.ts$|\/src\/reliability\//],
  ["upstream", /\/src\/gateway\/attempts?\.ts$|\/src\/providers\/|\/node_modules\/undici\//],
  ["relay", /\/src\/gateway\/(relay|respond|usageChunk)\.ts$/],
  ["record", /\/src\/meter\/(record|UsageLog|usageFile|cost)\.ts$|\/src\/usagedb\//],
  ["meter", /\/src\/meter\//],
  [
    "metrics",
    /\/src\/ops\/(Metrics|instruments|cells|Telemetry)\.ts$|\/node_modules\/effect\/.*\/(Metric|metric)/,
  ],
  ["log", /\/src\/ops\/logger\.ts$/],
  ["translate", /\/src\/translate\//],
  // Packages before the catch-all for src/: effect ships its sources as node_modules/effect/src/.
  ["effect runtime", /(^|\/)node_modules\/effect\//],
  ["other packages", /(^|\/)node_modules\//],
  ["pipeline (other src)", /(^|\/)src\//],
  ["node (http, net, streams)", /^node:/],
  ["gc", /^\(garbage collector\)$/],
  ["native / program", /^\((program|root)\)$|^$/],
]
const STAGE_NAMES = [...STAGES.map(([name]) => name), "other"]

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Where a profile node's function lives: its original source (through the map) or its URL. */
const makeLocate = (bundleUrl, map) => {
  const cache = new Map()
  return (frame) => {
    if (frame.url !== bundleUrl || map === undefined) {
      if (frame.url === "") return `(${frame.functionName.replace(/^\(|\)$/g, "")})`
      return frame.url
    }
    const key = `${frame.lineNumber}:${frame.columnNumber}`
    let source = cache.get(key)
    if (source === undefined) {
      const entry = map.findEntry(frame.lineNumber, frame.columnNumber)
      source =
        entry?.originalSource === undefined
          ? "(bundle)"
          : resolve(dirname(fileURLToPath(bundleUrl)), entry.originalSource)
      cache.set(key, source)
    }
    return source
  }
}

const stageOf = (source) => {
  for (const [name, pattern] of STAGES) if (pattern.test(source)) return name
  return "other"
}

/**
 * The samples of the measured window: between the two longest runs of idle samples (the pauses before
 * and after the measured load), by the time each sample stands for. Returns µs by stage and the window.
 */
const analyse = (profile, locate) => {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const parents = new Map()
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id)
  /**
   * A sample's source: its function's, or for a builtin of the engine (`writev`, `indexOfString`: no URL)
   * its nearest caller's with one, so that time goes to the stage that called it.
   */
  const sourceOf = new Map()
  const sampleSource = (id) => {
    let source = sourceOf.get(id)
    if (source !== undefined) return source
    const frame = nodes.get(id).callFrame
    source = locate(frame)
    if (frame.url === "" && !frame.functionName.startsWith("(")) {
      let up = parents.get(id)
      while (up !== undefined && nodes.get(up).callFrame.url === "") up = parents.get(up)
      source = up === undefined ? source : locate(nodes.get(up).callFrame)
    }
    sourceOf.set(id, source)
    return source
  }
  /** The nearest frame (itself or a caller) in Tollgate's own code or a package: who made Node or the engine work. */
  const ownerOf = new Map()
  const sampleOwner = (id) => {
    let owner = ownerOf.get(id)
    if (owner !== undefined) return owner
    let up = id
    while (up !== undefined) {
      const frame = nodes.get(up).callFrame
      const source = frame.url === "" ? "" : locate(frame)
      if (/\/src\/|\/node_modules\//.test(source)) {
        owner = `${source.replace(`${root}/`, "")} ${frame.functionName || "(anonymous)"}`
        break
      }
      up = parents.get(up)
    }
    owner ??= "(no caller in src or node_modules)"
    ownerOf.set(id, owner)
    return owner
  }
  const byOwner = new Map()
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id))
  // The time of each sample, and its duration: the delta to the next.
  const times = []
  let t = profile.startTime
  for (const delta of profile.timeDeltas) times.push((t += delta))
  // The pauses: runs of 1 s or more of 100 ms bins with under 5 busy samples (an idle process is sampled
  // as "(idle)" or not at all, and its timers wake it now and then).
  const BIN = 100_000
  const start = times[0] ?? profile.startTime
  const bins = new Array(Math.ceil(((times.at(-1) ?? start) - start) / BIN) + 1).fill(0)
  for (let i = 0; i < profile.samples.length; i++)
    if (!idle.has(profile.samples[i])) bins[Math.floor((times[i] - start) / BIN)]++
  const long = []
  for (let k = 0, run = -1; k <= bins.length; k++) {
    const quiet = k < bins.length && bins[k] < 5
    if (quiet && run < 0) run = k
    if (!quiet && run >= 0) {
      if ((k - run) * BIN >= 1_000_000) long.push({ from: start + run * BIN, to: start + k * BIN })
      run = -1
    }
  }
  if (long.length < 2) throw new Error(`the profile has ${long.length} pauses of 1 s or more, not 2`)
  // The first pause follows the warm-up; the next one follows the measured load.
  const first = long[0]
  const second = long[1]
  // A sample stands for the time to the next one, at most 5 sampling intervals (not a pause).
  const deltas = profile.timeDeltas.slice(1).sort((x, y) => x - y)
  const most = 5 * (deltas[deltas.length >> 1] ?? 1000)
  const byStage = Object.fromEntries(STAGE_NAMES.map((name) => [name, 0]))
  const bySource = new Map()
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]
    if (idle.has(id) || times[i] < first.to || times[i] >= second.from) continue
    const us = Math.min(most, (times[i + 1] ?? times[i]) - times[i])
    const source = sampleSource(id)
    const stage = stageOf(source)
    byStage[stage] += us
    bySource.set(source, (bySource.get(source) ?? 0) + us)
    if (stage === "node (http, net, streams)") {
      const owner = sampleOwner(id)
      byOwner.set(owner, (byOwner.get(owner) ?? 0) + us)
    }
  }
  return { byStage, bySource, byOwner, windowUs: second.from - first.to }
}

const dir = mkdtempSync(join(tmpdir(), "tollgate-profile-"))
// --bin: another build to profile (its source map beside it, as TOLLGATE_SOURCEMAP=1 leaves it).
const bin = resolve(values.bin ?? join(root, "bin", "tollgate"))
const mapFile = `${bin}.map`
let map
try {
  map = new SourceMap(JSON.parse(readFileSync(mapFile, "utf8")))
} catch {
  console.log(
    `${mapFile} not found: stages by bundle only (build with TOLLGATE_SOURCEMAP=1, as npm run bench:profile does)`,
  )
}
const bundleUrl = pathToFileURL(bin).href

const results = {}
try {
  const fake = await startServer({
    name: "fake",
    script: join(root, "bin", "fakeprovider"),
    args: ["--listen", "127.0.0.1:0", "--scenario", "max-tokens"],
    logFile: join(dir, "fake.log"),
  })
  const proxy = await startServer({
    name: "plain proxy",
    script: join(here, "plain-proxy.mjs"),
    args: ["--listen", "127.0.0.1:0", "--upstream", fake.url],
    logFile: join(dir, "proxy.log"),
    pipeStdin: true,
  })
  const load = async (url, req, durationS) => {
    const spec = { origin: url, ...req, mode: "closed", warmupS: 0, durationS, concurrency, rps: 0 }
    return runLoad({
      script: join(here, "load.mjs"),
      spec,
      cpuOf: () => null,
      timeoutMs: (durationS + 60) * 1000,
    })
  }
  /**
   * One profiled run: starts `server` with `--cpu-prof`, a 3 s warm-up load, 1.5 s idle, the measured load,
   * 1.5 s idle, then stops it (the profile is written as it exits). Returns the profile and the measured load.
   */
  const profiledRun = async (server, req, profDir) => {
    mkdirSync(profDir, { recursive: true })
    const started = await startServer({
      ...server,
      nodeArgs: [...(server.nodeArgs ?? []), "--cpu-prof", `--cpu-prof-dir=${profDir}`],
    })
    await load(started.url, req, 3)
    await sleep(1_500)
    const measured = await load(started.url, req, seconds)
    await sleep(1_500)
    await stop(started.child, 10_000)
    const file = readdirSync(profDir).find((f) => f.endsWith(".cpuprofile"))
    if (file === undefined) throw new Error(`${server.name}: no profile written in ${profDir}`)
    return { profile: JSON.parse(readFileSync(join(profDir, file), "utf8")), measured }
  }
  for (const c of chosen) {
    const own = join(dir, c.name)
    mkdirSync(own, { recursive: true })
    const config = await writeTollgateConfig(own, c.variant, { upstreamUrl: fake.url })
    const req = requestFor({
      api: "anthropic",
      target: c.variant,
      stream: c.stream,
      jsonTokens: 16,
      streamTokens: 50,
    })
    const { profile, measured } = await profiledRun(
      {
        name: c.name,
        script: bin,
        args: ["serve", "--config", config],
        nodeArgs: shebangNodeArgs(bin),
        env: { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY },
        logFile: join(own, "tollgate.log"),
      },
      req,
      join(own, "prof"),
    )
    const { byStage, bySource, byOwner, windowUs } = analyse(profile, makeLocate(bundleUrl, map))
    const completed = measured.completed
    // The plain proxy under the same load, by /proc (its whole process).
    const proxyReq = requestFor({
      api: "anthropic",
      target: c.proxy,
      stream: c.stream,
      jsonTokens: 16,
      streamTokens: 50,
    })
    await load(proxy.url, proxyReq, 2)
    const before = cpuTimeMs(proxy.child.pid)
    const proxied = await load(proxy.url, proxyReq, seconds)
    const proxyUs =
      before === null ? null : ((cpuTimeMs(proxy.child.pid) - before) * 1000) / proxied.completed
    // The plain proxy profiled the same way (its own process, the same pauses): Node's files side by side.
    const proxyRun = await profiledRun(
      {
        name: `plain proxy (${c.name}, profiled)`,
        script: join(here, "plain-proxy.mjs"),
        args: ["--listen", "127.0.0.1:0", "--upstream", fake.url],
        logFile: join(own, "proxy-profiled.log"),
        pipeStdin: true,
      },
      proxyReq,
      join(own, "proxy-prof"),
    )
    const proxyMeasured = proxyRun.measured
    const proxyProfile = analyse(proxyRun.profile, makeLocate("", undefined))
    const proxyBySource = new Map(
      [...proxyProfile.bySource].map(([source, us]) => [source, us / proxyMeasured.completed]),
    )
    const proxyProfiledUs = [...proxyBySource.values()].reduce((a, b) => a + b, 0)
    // Node's own files (and GC, the engine): Tollgate's µs, the proxy's, largest difference first.
    const nodeSources = new Set(
      [...bySource.keys(), ...proxyBySource.keys()].filter((source) => /^node:|^\(/.test(source)),
    )
    const nodeFiles = [...nodeSources]
      .map((source) => [source, (bySource.get(source) ?? 0) / completed, proxyBySource.get(source) ?? 0])
      .sort((a, b) => b[1] - b[2] - (a[1] - a[2]))
      .slice(0, 12)
    const perRequest = Object.fromEntries(Object.entries(byStage).map(([k, us]) => [k, us / completed]))
    const total = Object.values(perRequest).reduce((a, b) => a + b, 0)
    const top = [...bySource.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([source, us]) => [source.replace(`${root}/`, ""), us / completed])
    const nodeCallers = [...byOwner.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([owner, us]) => [owner, us / completed])
    results[c.name] = {
      nodeCallers,
      nodeFiles,
      proxyProfiledUs,
      completed,
      windowS: windowUs / 1e6,
      perRequest,
      total,
      proxyUs,
      top,
      errors: measured.errors,
    }
    console.log(
      `${c.name}: ${completed} responses in ${(windowUs / 1e6).toFixed(1)} s, ${total.toFixed(1)} µs/request`,
    )
  }
} finally {
  await stopAll()
}

const names = Object.keys(results)
const pad = (text, n) => String(text).padStart(n)
const width = Math.max(...STAGE_NAMES.map((s) => s.length), 26)
console.log(`\nCPU µs per request, by stage (--cpu-prof, ${seconds} s at concurrency ${concurrency})\n`)
console.log(`${"stage".padEnd(width)}${names.map((n) => pad(n, 16)).join("")}`)
for (const stage of STAGE_NAMES) {
  if (names.every((n) => results[n].perRequest[stage] < 0.05)) continue
  console.log(
    `${stage.padEnd(width)}${names.map((n) => pad(results[n].perRequest[stage].toFixed(1), 16)).join("")}`,
  )
}
console.log(
  `${"total (profiled)".padEnd(width)}${names.map((n) => pad(results[n].total.toFixed(1), 16)).join("")}`,
)
console.log(
  `${"plain proxy (whole process)".padEnd(width)}${names.map((n) => pad(results[n].proxyUs?.toFixed(1) ?? "-", 16)).join("")}`,
)
console.log(
  `${"plain proxy (profiled)".padEnd(width)}${names.map((n) => pad(results[n].proxyProfiledUs.toFixed(1), 16)).join("")}`,
)
for (const n of names) {
  console.log(`\n${n}: the files with the most CPU (µs/request)`)
  for (const [source, us] of results[n].top) console.log(`  ${us.toFixed(1).padStart(7)}  ${source}`)
  console.log(`${n}: Node's share, by the function in src/ or node_modules/ that called it (µs/request)`)
  for (const [owner, us] of results[n].nodeCallers) console.log(`  ${us.toFixed(1).padStart(7)}  ${owner}`)
  console.log(`${n}: Node's files and the engine, Tollgate vs the plain proxy, both profiled (µs/request)`)
  for (const [source, own, proxied] of results[n].nodeFiles)
    console.log(
      `  ${own.toFixed(1).padStart(7)} ${proxied.toFixed(1).padStart(7)} ${(own - proxied).toFixed(1).padStart(7)}  ${source}`,
    )
}
if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`)
