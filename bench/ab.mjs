// A/B of two servers under load at the same time: CPU per response of B ÷ A.
//
// This machine's speed changes by up to 2× within minutes, so two builds measured one after the other
// (as `npm run bench` measures its rows) can differ by more than the change being judged. Here one fake
// upstream serves both servers, and two load generators (bench/load.mjs) drive them in the same window:
// whatever the machine does then, it does to both. Each round reports each server's CPU time per
// completed response (from /proc, user + system) and the ratio, its throughput, and its resident memory
// (VmRSS from /proc/PID/status) at the end of the measured window, still under load; the first round is a
// warm-up (JIT) and is not counted; the summary is the median ratio, then each server's median
// throughput, median RSS under load, and RSS now (idle) and highest RSS (VmHWM) after the last round.
//
// Usage: node bench/ab.mjs json|sse NAME=SERVER NAME=SERVER [--seconds 4] [--rounds 6] [--concurrency 32]
//                          [--variant NAME=VARIANT]...
//   SERVER is the path of a `tollgate` bundle (e.g. a copy of bin/tollgate built from another commit), or
//   `proxy` for bench/plain-proxy.mjs, optionally after Node options for that server's process, the whole
//   in one argument (e.g. 'semi16=--max-semi-space-size=16 bin/tollgate'; a bundle's own
//   `#!/usr/bin/env -S node OPTIONS` line is honoured too, before these). Example, the current build
//   against the plain proxy:
//   node bench/ab.mjs json proxy=proxy tollgate=bin/tollgate
//   --variant NAME=VARIANT (repeatable) configures Tollgate server NAME with that variant of
//   bench/lib/setup.mjs instead of `tollgate` (e.g. tollgate_limits_memory, or tollgate_traced /
//   tollgate_traced_sampled: tracing at sample ratio 1.0 / 0.1, its spans posted to an OTLP/HTTP sink in
//   this process, bench/lib/collector.mjs, started when a variant needs it; what it received is printed
//   at the end). Requests are the variant's own (`requestFor`). Tracing off against on, same build:
//   node bench/ab.mjs json off=bin/tollgate on=bin/tollgate --variant on=tollgate_traced
//   The Redis variants (tollgate_limits_redis, and tollgate_limits_redis_shared: plus `breaker.shared`)
//   start one redis-server (BENCH_REDIS_SERVER, or redis-server on PATH) that both servers use; its CPU
//   is not in the ratio. Shared breakers against not, same build:
//   node bench/ab.mjs json redis=bin/tollgate shared=bin/tollgate --variant redis=tollgate_limits_redis \
//     --variant shared=tollgate_limits_redis_shared
//   tollgate_usage_db writes every record to a PostgreSQL too (usage.database; bench/lib/postgres.mjs
//   starts one, each server gets its own database, migrated first); its CPU is not in the ratio. The
//   database against the file alone, same build:
//   node bench/ab.mjs json file=bin/tollgate db=bin/tollgate --variant db=tollgate_usage_db
import { existsSync, mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { startCollector } from "./lib/collector.mjs"
import { cpuTimeMs, memoryMb, runLoad, shebangNodeArgs, startServer, stopAll, which } from "./lib/procs.mjs"
import { startPostgres } from "./lib/postgres.mjs"
import { startRedis } from "./lib/redis.mjs"
import { LABELS } from "./lib/report.mjs"
import {
  REDIS_VARIANTS,
  requestFor,
  TRACED_VARIANTS,
  UPSTREAM_KEY,
  UPSTREAM_KEY_ENV,
  USAGE_DB_URL_ENV,
  USAGE_DB_VARIANT,
  writeTollgateConfig,
} from "./lib/setup.mjs"
import { execFileSync } from "node:child_process"

const here = dirname(fileURLToPath(import.meta.url))
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: "string", default: "4" },
    rounds: { type: "string", default: "6" },
    concurrency: { type: "string", default: "32" },
    variant: { type: "string", multiple: true, default: [] },
  },
})
const [kind, ...specs] = positionals
const usage = () => {
  console.error(
    "usage: node bench/ab.mjs json|sse NAME=SERVER NAME=SERVER [--seconds S] [--rounds N] [--concurrency C]" +
      " [--variant NAME=VARIANT]...",
  )
  process.exit(2)
}
if ((kind !== "json" && kind !== "sse") || specs.length !== 2 || specs.some((s) => !s.includes("="))) usage()
const names = specs.map((spec) => spec.slice(0, spec.indexOf("=")))
/** The setup.mjs variant of each server named by --variant (the others: `tollgate`). */
const variants = {}
/**
 * The variants --variant takes: every Tollgate row of the bench but the fallback row, which needs a second
 * fake (answering 529) that this script does not start.
 */
const VARIANTS = Object.keys(LABELS).filter(
  (row) => row.startsWith("tollgate") && row !== "tollgate_fallback",
)
for (const option of values.variant) {
  const at = option.indexOf("=")
  const name = option.slice(0, at)
  const variant = option.slice(at + 1)
  const spec = specs[names.indexOf(name)]
  const proxy =
    spec
      ?.slice(spec.indexOf("=") + 1)
      .trim()
      .split(/\s+/)
      .at(-1) === "proxy"
  if (at <= 0 || !names.includes(name) || proxy || !VARIANTS.includes(variant)) {
    console.error(
      `--variant ${option}: want NAME=VARIANT, NAME a Tollgate server of ${names.join(", ")}, VARIANT one of` +
        ` ${VARIANTS.join(", ")}`,
    )
    usage()
  }
  variants[name] = variant
}
const seconds = Number(values.seconds)
const rounds = Number(values.rounds)
const dir = mkdtempSync(join(tmpdir(), "tollgate-ab-"))
let collector
let redis
let postgres

try {
  if (Object.values(variants).some((variant) => REDIS_VARIANTS.includes(variant))) {
    const bin = process.env.BENCH_REDIS_SERVER || which("redis-server")
    if (bin === undefined || !existsSync(bin)) {
      throw new Error(`${bin ?? "redis-server"} not found (install it, or set BENCH_REDIS_SERVER)`)
    }
    redis = await startRedis({ bin, dir, logFile: join(dir, "redis.log") })
    console.log(`redis-server ${redis.url} (${bin})`)
  }
  if (Object.values(variants).some((variant) => TRACED_VARIANTS[variant] !== undefined)) {
    collector = await startCollector()
    console.log(`otlp collector ${collector.url} (in this process)`)
  }
  if (Object.values(variants).includes(USAGE_DB_VARIANT)) {
    postgres = await startPostgres(dir)
    console.log(`postgres ${postgres.url.replace(/:[^:@]*@/, ":***@")}`)
  }
  const fake = await startServer({
    name: "fake",
    script: join(here, "..", "bin", "fakeprovider"),
    args: ["--listen", "127.0.0.1:0", "--scenario", "max-tokens"],
    logFile: join(dir, "fake.log"),
  })
  const servers = []
  for (const spec of specs) {
    const at = spec.indexOf("=")
    const name = spec.slice(0, at)
    const words = spec
      .slice(at + 1)
      .trim()
      .split(/\s+/)
    const server = words.at(-1)
    const nodeArgs = words.slice(0, -1)
    const proxy = server === "proxy"
    const variant = proxy ? "plain_proxy" : (variants[name] ?? "tollgate")
    let started
    if (proxy) {
      started = await startServer({
        name,
        script: join(here, "plain-proxy.mjs"),
        args: ["--listen", "127.0.0.1:0", "--upstream", fake.url],
        nodeArgs,
        logFile: join(dir, `${name}.log`),
        pipeStdin: true,
        env: {},
      })
    } else {
      const own = join(dir, name)
      mkdirSync(own)
      const config = await writeTollgateConfig(own, variant, {
        upstreamUrl: fake.url,
        ...(collector === undefined ? {} : { collectorUrl: `${collector.url}/${name}` }),
        ...(redis === undefined ? {} : { redisUrl: redis.url }),
      })
      const env = { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY }
      if (variant === USAGE_DB_VARIANT) {
        // Each server its own database, migrated as an operator would.
        postgres.psql(`CREATE DATABASE ${name.replace(/\W/g, "_")}`)
        env[USAGE_DB_URL_ENV] = postgres.urlOf(name.replace(/\W/g, "_"))
        execFileSync(process.execPath, [resolve(server), "usage", "migrate", "--config", config], {
          env: { ...process.env, ...env },
        })
      }
      started = await startServer({
        name,
        script: resolve(server),
        args: ["serve", "--config", config],
        nodeArgs: [...shebangNodeArgs(resolve(server)), ...nodeArgs],
        env,
        logFile: join(dir, `${name}.log`),
      })
    }
    servers.push({ name, url: started.url, pid: started.child.pid, proxy, variant })
    if (values.variant.length > 0) console.log(`${name}: ${variant} ${started.url}`)
  }

  const cpu = servers.map(() => [])
  const rate = servers.map(() => [])
  const rss = servers.map(() => [])
  for (let round = 0; round <= rounds; round++) {
    const results = await Promise.all(
      servers.map((s) => {
        const req = requestFor({
          api: "anthropic",
          target: s.variant,
          stream: kind === "sse",
          jsonTokens: 16,
          streamTokens: 50,
        })
        const spec = {
          origin: s.url,
          path: req.path,
          headers: req.headers,
          body: req.body,
          stream: req.stream,
          expect: req.expect,
          expectHeaders: req.expectHeaders,
          mode: "closed",
          warmupS: 1,
          durationS: seconds,
          concurrency: Number(values.concurrency),
          rps: 500,
        }
        return runLoad({
          script: join(here, "load.mjs"),
          spec,
          // Sampled at the window's start and end; the end's RSS (still under load) is the one kept.
          cpuOf: () => {
            s.rss = memoryMb(s.pid)?.rss ?? NaN
            return cpuTimeMs(s.pid)
          },
          timeoutMs: 120_000,
        })
      }),
    )
    const line = results.map((r, i) => {
      const perResponse = (r.cpuMs * 1000) / r.completed
      if (round > 0) {
        cpu[i].push(perResponse)
        rate[i].push(r.rate)
        rss[i].push(servers[i].rss)
      }
      const errors = r.errorCount > 0 ? ` errors ${JSON.stringify(r.errors)}` : ""
      return `${servers[i].name} ${Math.round(r.rate)}/s ${perResponse.toFixed(1)} µs ${servers[i].rss.toFixed(0)} MB${errors}`
    })
    const ratio = round > 0 ? `  ratio ${(cpu[1].at(-1) / cpu[0].at(-1)).toFixed(3)}` : "  (warm-up)"
    console.log(`round ${round}  ${line.join("  |  ")}${ratio}`)
  }
  const ratios = cpu[1].map((b, i) => b / cpu[0][i]).sort((x, y) => x - y)
  const median = ratios[Math.floor(ratios.length / 2)]
  console.log(
    `${kind}: CPU per response ${servers[1].name} ÷ ${servers[0].name}: median ${median.toFixed(3)}` +
      ` (${ratios[0].toFixed(3)}–${ratios.at(-1).toFixed(3)}, ${ratios.length} rounds)`,
  )
  const mid = (values) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]
  await new Promise((r) => setTimeout(r, 1000))
  for (const [i, s] of servers.entries()) {
    const now = memoryMb(s.pid)
    console.log(
      `${s.name}: median ${Math.round(mid(rate[i]))}/s, ${mid(cpu[i]).toFixed(1)} µs per response; RSS under load median ` +
        `${mid(rss[i]).toFixed(0)} MB (${Math.min(...rss[i]).toFixed(0)}–${Math.max(...rss[i]).toFixed(0)}), ` +
        `idle 1 s after ${now?.rss.toFixed(0)} MB, highest ${now?.hwm?.toFixed(0)} MB`,
    )
  }
} finally {
  await stopAll()
  postgres?.stop()
  if (collector !== undefined) {
    // After the servers have stopped: each flushes its last spans at shutdown.
    const { posts, bytes, byPath } = collector.stats
    const paths = Object.entries(byPath).map(
      ([path, got]) => `${path} ${got.posts} posts, ${got.bytes} bytes`,
    )
    console.log(`otlp collector received ${posts} posts, ${bytes} bytes (${paths.join("; ")})`)
    await collector.close()
  }
}
