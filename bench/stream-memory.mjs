// `npm run bench:stream-memory`: what one open event stream holds in a server, Tollgate and the plain Node
// proxy side by side (bench/README.md, "Memory per open stream").
//
// For each server (its own process, fresh, behind one fake upstream):
//   1. primes it with 200 SSE requests and reads its RSS (idle, fresh);
//   2. opens 2 × STREAMS streams at once (bench/hold.mjs, the open-streams client of `npm run bench`: the
//      fake sends five deltas and then holds the stream open) and reads its RSS (`rssMb` of a fresh
//      process with that many streams open), then closes them; a second such round warms the same code
//      (its compiled code and its heap's sizes are then those of a server that has held streams before);
//   3. takes a heap snapshot (Node's `--heapsnapshot-signal`, which collects garbage first), opens STREAMS
//      streams, takes one, opens STREAMS more, takes one, and closes them all.
// Memory per open stream is what the snapshots grew by per stream opened: every object the heap holds
// (JavaScript objects, strings, closures, compiled code) plus the buffers' memory outside the heap that the
// snapshot lists (`JSArrayBufferData`), divided by the streams. The first and second halves are reported
// too (they should agree), and the largest kinds of object by bytes per stream, which say what a stream
// holds. The kernel's socket buffers and native memory the snapshot does not list are not in it (they are
// in the RSS figures).
//
// Options (flags or env): --streams N (STREAM_MEMORY_STREAMS, 500), --api anthropic|openai
// (STREAM_MEMORY_API, anthropic), --servers tollgate,plain_proxy (STREAM_MEMORY_SERVERS), --top N (15).
// Prints a table and, as its last line, `stream memory: FILE` (JSON in bench/results/).
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { mkdtemp } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { memoryMb, runHold, shebangNodeArgs, startServer, stopAll } from "./lib/procs.mjs"
import { requestFor, UPSTREAM_KEY, UPSTREAM_KEY_ENV, writeTollgateConfig } from "./lib/setup.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "..")
const { values } = parseArgs({
  options: {
    streams: { type: "string", default: process.env.STREAM_MEMORY_STREAMS ?? "500" },
    api: { type: "string", default: process.env.STREAM_MEMORY_API ?? "anthropic" },
    servers: { type: "string", default: process.env.STREAM_MEMORY_SERVERS ?? "tollgate,plain_proxy" },
    top: { type: "string", default: "15" },
  },
})
const STREAMS = Number(values.streams)
const TOP = Number(values.top)
const SERVERS = values.servers.split(",").filter((s) => s.length > 0)
if (!Number.isInteger(STREAMS) || STREAMS < 1) throw new Error(`--streams must be a positive integer`)
for (const s of SERVERS) if (s !== "tollgate" && s !== "plain_proxy") throw new Error(`unknown server ${s}`)
const HOLD_SCENARIO = "max-tokens,hang-after:5-tokens"
const SNAPSHOT_SIGNAL = "SIGTTIN"

const log = (line) =>
  process.stderr.write(`[stream-memory ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Bytes and count per kind of object in a heap snapshot (`type:name`; strings and code by type only). */
const aggregate = (file) => {
  const snapshot = JSON.parse(readFileSync(file, "utf8"))
  const meta = snapshot.snapshot.meta
  const types = meta.node_types[0]
  const width = meta.node_fields.length
  const typeAt = meta.node_fields.indexOf("type")
  const nameAt = meta.node_fields.indexOf("name")
  const sizeAt = meta.node_fields.indexOf("self_size")
  const kinds = new Map()
  let total = 0
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]]
    const name =
      type.includes("string") || type === "code" || type === "number"
        ? ""
        : snapshot.strings[snapshot.nodes[i + nameAt]]
    const kind = `${type}:${name.length > 60 ? name.slice(0, 60) : name}`
    const size = snapshot.nodes[i + sizeAt]
    const entry = kinds.get(kind) ?? { count: 0, bytes: 0 }
    entry.count++
    entry.bytes += size
    kinds.set(kind, entry)
    total += size
  }
  return { total, kinds }
}

/** Per stream between two aggregates: total bytes, compiled code's share, and the kinds that grew most. */
const perStream = (a, b, streams) => {
  const rows = []
  for (const [kind, after] of b.kinds) {
    const before = a.kinds.get(kind) ?? { count: 0, bytes: 0 }
    rows.push({
      kind,
      bytes: (after.bytes - before.bytes) / streams,
      count: (after.count - before.count) / streams,
    })
  }
  rows.sort((x, y) => y.bytes - x.bytes)
  const code = rows.find((r) => r.kind === "code:")?.bytes ?? 0
  return { kb: (b.total - a.total) / streams / 1024, codeKb: code / 1024, top: rows.slice(0, TOP) }
}

const dir = await mkdtemp(join(tmpdir(), "tollgate-stream-memory-"))
const cleanup = () => rmSync(dir, { recursive: true, force: true })
process.on("exit", cleanup)

const fakeScript = resolve(process.env.BENCH_FAKEPROVIDER || join(root, "bin", "fakeprovider"))
const tollgateBin = resolve(process.env.BENCH_TOLLGATE || join(root, "bin", "tollgate"))
for (const path of [fakeScript, tollgateBin]) {
  if (!existsSync(path)) throw new Error(`${path} not found: run \`npm run build\` first`)
}
const fake = await startServer({
  name: "fake upstream",
  script: fakeScript,
  args: ["--listen", "127.0.0.1:0", "--scenario", "max-tokens", "--name", "fake"],
  logFile: join(dir, "fake.log"),
})

const startTarget = async (target) => {
  const snapshots = join(dir, target)
  mkdirSync(snapshots)
  const diagnostics = [`--heapsnapshot-signal=${SNAPSHOT_SIGNAL}`, `--diagnostic-dir=${snapshots}`]
  if (target === "plain_proxy") {
    const server = await startServer({
      name: "plain proxy",
      script: join(here, "plain-proxy.mjs"),
      nodeArgs: diagnostics,
      args: ["--listen", "127.0.0.1:0", "--upstream", fake.url],
      logFile: join(dir, "plain-proxy.log"),
      pipeStdin: true,
    })
    return { server, snapshots }
  }
  const config = await writeTollgateConfig(dir, "tollgate", { upstreamUrl: fake.url })
  const server = await startServer({
    name: "tollgate",
    script: tollgateBin,
    nodeArgs: [...shebangNodeArgs(tollgateBin), ...diagnostics],
    args: ["serve", "--config", config],
    env: { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY },
    logFile: join(dir, "tollgate.log"),
  })
  return { server, snapshots }
}

/** Whether `file` ends with `tail` (reads only its last bytes). */
const endsWith = (file, tail) => {
  const fd = openSync(file, "r")
  try {
    const size = fstatSync(fd).size
    if (size < tail.length) return false
    const buf = Buffer.alloc(tail.length)
    readSync(fd, buf, 0, tail.length, size - tail.length)
    return buf.toString("latin1") === tail
  } finally {
    closeSync(fd)
  }
}

/** Signals the server to write a heap snapshot and waits until the file is complete; returns its path. */
const snapshot = async (pid, snapshots) => {
  const before = new Set(readdirSync(snapshots))
  process.kill(pid, SNAPSHOT_SIGNAL)
  for (let waited = 0; waited < 120_000; waited += 250) {
    await sleep(250)
    const added = readdirSync(snapshots).filter((f) => !before.has(f) && f.endsWith(".heapsnapshot"))
    if (added.length === 0) continue
    const file = join(snapshots, added[0])
    // Complete once it ends the way V8 ends one (the strings array, then the object: `"]}`).
    if (endsWith(file, '"]}')) return file
  }
  throw new Error(`no heap snapshot from ${pid} within 120 s`)
}

const measure = async (target) => {
  const { server, snapshots } = await startTarget(target)
  const pid = server.child.pid
  const req = requestFor({ api: values.api, target, stream: true, jsonTokens: 100, streamTokens: 50 })
  for (let i = 0; i < 200; i++) {
    const response = await fetch(server.url + req.path, {
      method: "POST",
      headers: req.headers,
      body: req.body,
    })
    await response.text()
    if (response.status !== 200) throw new Error(`${target}: priming request answered ${response.status}`)
  }
  await sleep(1500)
  const idleMb = memoryMb(pid).rss
  const spec = (streams) => ({
    origin: server.url,
    path: req.path,
    headers: { ...req.headers, "x-fake-scenario": HOLD_SCENARIO },
    body: req.body,
    streams,
    openTimeoutS: 60,
    holdS: 600,
  })
  const hold = (streams, onOpen) =>
    runHold({ script: join(here, "hold.mjs"), spec: spec(streams), onOpen, timeoutMs: 900_000 }).then(
      (result) => {
        if (result.open !== streams || result.errorCount > 0)
          throw new Error(
            `${target}: ${result.open}/${streams} streams open, errors ${JSON.stringify(result.errors)}`,
          )
        return result
      },
    )
  let freshMb = 0
  await hold(2 * STREAMS, async () => {
    freshMb = memoryMb(pid).rss
    await sleep(1000)
    freshMb = Math.max(freshMb, memoryMb(pid).rss)
  })
  await hold(2 * STREAMS, async () => {})
  await sleep(1500)
  const files = [await snapshot(pid, snapshots)]
  await hold(STREAMS, async () => {
    await sleep(1000)
    files.push(await snapshot(pid, snapshots))
    await hold(STREAMS, async () => {
      await sleep(1000)
      files.push(await snapshot(pid, snapshots))
    })
  })
  await stopServer(server)
  const [s0, s1, s2] = files.map((file) => {
    const aggregated = aggregate(file)
    rmSync(file)
    return aggregated
  })
  const whole = perStream(s0, s2, 2 * STREAMS)
  return {
    target,
    streams: 2 * STREAMS,
    kbPerStream: whole.kb,
    firstHalfKb: perStream(s0, s1, STREAMS).kb,
    secondHalfKb: perStream(s1, s2, STREAMS).kb,
    codeKbPerStream: whole.codeKb,
    heapMb: [s0, s1, s2].map((s) => s.total / 1048576),
    rssFreshIdleMb: idleMb,
    rssFreshOpenMb: freshMb,
    top: whole.top,
  }
}

const stopServer = async (server) => {
  server.child.kill("SIGTERM")
  await new Promise((r) => (server.child.exitCode !== null ? r() : server.child.once("exit", r)))
}

const results = []
try {
  for (const target of SERVERS) {
    log(
      `${target}: measuring (${values.api} SSE, ${STREAMS} + ${STREAMS} streams after two rounds of ${2 * STREAMS})`,
    )
    results.push(await measure(target))
  }
} finally {
  await stopAll()
}

const fmt = (n, d = 1) => n.toFixed(d)
for (const r of results) {
  process.stdout.write(
    `\n${r.target} (${values.api} SSE): ${fmt(r.kbPerStream, 2)} KB per open stream ` +
      `(first ${STREAMS}: ${fmt(r.firstHalfKb, 2)}, next ${STREAMS}: ${fmt(r.secondHalfKb, 2)}; compiled code ${fmt(r.codeKbPerStream, 2)}); ` +
      `heap ${r.heapMb.map((m) => fmt(m)).join(" → ")} MB; ` +
      `RSS of a fresh process ${fmt(r.rssFreshIdleMb, 0)} MB idle, ${fmt(r.rssFreshOpenMb, 0)} MB with ${r.streams} streams open\n`,
  )
  for (const row of r.top) {
    process.stdout.write(
      `  ${fmt(row.bytes, 0).padStart(6)} B ${fmt(row.count, 2).padStart(6)} × ${row.kind}\n`,
    )
  }
}
const out = join(root, "bench", "results")
mkdirSync(out, { recursive: true })
const file = join(out, `stream-memory-${new Date().toISOString().replace(/[-:]/g, "").slice(0, 15)}.json`)
writeFileSync(
  file,
  `${JSON.stringify({ api: values.api, streamsPerStep: STREAMS, node: process.version, results }, null, 2)}\n`,
)
process.stdout.write(`stream memory: ${file}\n`)
