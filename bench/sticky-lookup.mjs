// The sticky lookup's own CPU per request (ADR 0073, 0074), measured in one process where the bench's paired
// rounds (group `sticky` of `npm run bench`) cannot see below their noise of a few per cent. It bundles the
// gateway's routing (src/gateway/routing.ts) over the real limits and store (memory, and Redis on a
// `redis-server` of its own) with esbuild, then runs the same request's routing step COUNT times per round: a
// weighted route that is not sticky (one random pick, no lookup) against the same target with `sticky: true`
// (the session's lookup, and the remember step that finds nothing to write), rounds interleaved, and prints
// CPU ns per request of each and their difference. The session is warm, as in the bench: every request of one
// session, so on Redis it is answered from what the copy read in the last second.
// Usage: node bench/sticky-lookup.mjs [COUNT] [ROUNDS]   (COUNT 200000, ROUNDS 4)
import { build } from "esbuild"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { stop, which } from "./lib/procs.mjs"
import { startRedis } from "./lib/redis.mjs"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const count = Number(process.argv[2] ?? 200_000)
const rounds = Number(process.argv[3] ?? 4)
const dir = mkdtempSync(join(tmpdir(), "tollgate-sticky-lookup-"))

const entry = `
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { makeRouting } from "./src/gateway/routing.ts"
import { make as makeLimits } from "./src/limits/Limits.ts"
import { makeMemoryStore } from "./src/limits/memoryStore.ts"
import { layerRedis } from "./src/limits/redisStore.ts"
import { Store } from "./src/limits/Store.ts"
import { noopTelemetry } from "./src/ops/Telemetry.ts"

const target = { provider: "anthropic", model: "claude-sonnet-4-5", weight: 1, alias: undefined }
const sticky = { name: "bench-sticky", targets: [target], strategy: "ordered", sticky: true }
const unsticky = { name: "bench-claude", targets: [target], strategy: "weighted", sticky: false }

export const measure = async (storeKind, url, count, rounds) => {
  const scope = Effect.runSync(Scope.make())
  const store =
    storeKind === "memory"
      ? makeMemoryStore()
      : Context.get(await Effect.runPromise(Layer.buildWithScope(layerRedis(url), scope)), Store)
  const limits = makeLimits(store, () => Date.now(), noopTelemetry)
  const routing = makeRouting({ limits, telemetry: noopTelemetry, random: { nextDoubleUnsafe: Math.random } })
  const info = {}
  const loop = (route) =>
    Effect.gen(function* () {
      for (let i = 0; i < count; i++) {
        const progress = { tally: { firstReason: undefined }, sticky: undefined, route }
        const order = yield* routing.order(route, "acme", "session-1", progress)
        if (progress.sticky !== undefined) yield* routing.served(route, order[0], info, progress)
      }
    })
  // The session's first request remembers its target; then one warm-up loop of each.
  await Effect.runPromise(loop(sticky))
  await Effect.runPromise(loop(unsticky))
  const ns = { sticky: [], unsticky: [] }
  for (let round = 0; round < rounds; round++) {
    for (const route of round % 2 === 0 ? [unsticky, sticky] : [sticky, unsticky]) {
      const start = process.cpuUsage()
      await Effect.runPromise(loop(route))
      const used = process.cpuUsage(start)
      ns[route.sticky ? "sticky" : "unsticky"].push(((used.user + used.system) * 1000) / count)
    }
  }
  await Effect.runPromise(Scope.close(scope, Exit.void))
  return ns
}
`

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

let redis
try {
  const outfile = join(dir, "sticky-lookup.mjs")
  await build({
    stdin: { contents: entry, resolveDir: root, loader: "ts", sourcefile: "sticky-lookup-entry.ts" },
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    logLevel: "warning",
    banner: {
      js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
  })
  const { measure } = await import(pathToFileURL(outfile).href)
  const rows = [["memory", undefined]]
  const bin = which("redis-server")
  if (bin === undefined) console.log("redis-server not found: the memory store only")
  else {
    redis = await startRedis({ bin, dir, logFile: join(dir, "redis.log") })
    rows.push(["redis", redis.url])
  }
  console.log(`${count} requests per round, ${rounds} rounds (CPU ns per request, median)`)
  for (const [kind, url] of rows) {
    const ns = await measure(kind, url, count, rounds)
    const s = median(ns.sticky)
    const u = median(ns.unsticky)
    console.log(
      `${kind.padEnd(7)} not sticky ${u.toFixed(0).padStart(6)}   sticky ${s.toFixed(0).padStart(6)}   ` +
        `lookup ${(s - u).toFixed(0).padStart(5)} ns`,
    )
  }
} finally {
  if (redis !== undefined) await stop(redis.child)
  rmSync(dir, { recursive: true, force: true })
}
