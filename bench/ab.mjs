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
//   SERVER is the path of a `tollgate` bundle (e.g. a copy of bin/tollgate built from another commit), or
//   `proxy` for bench/plain-proxy.mjs, optionally after Node options for that server's process, the whole
//   in one argument (e.g. 'semi16=--max-semi-space-size=16 bin/tollgate'; a bundle's own
//   `#!/usr/bin/env -S node OPTIONS` line is honoured too, before these). Example, the current build
//   against the plain proxy:
//   node bench/ab.mjs json proxy=proxy tollgate=bin/tollgate
import { mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { cpuTimeMs, memoryMb, runLoad, shebangNodeArgs, startServer, stopAll } from "./lib/procs.mjs"
import { requestFor, UPSTREAM_KEY, UPSTREAM_KEY_ENV, writeTollgateConfig } from "./lib/setup.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: "string", default: "4" },
    rounds: { type: "string", default: "6" },
    concurrency: { type: "string", default: "32" },
  },
})
const [kind, ...specs] = positionals
if ((kind !== "json" && kind !== "sse") || specs.length !== 2 || specs.some((s) => !s.includes("="))) {
  console.error("usage: node bench/ab.mjs json|sse NAME=SERVER NAME=SERVER [--seconds S] [--rounds N]")
  process.exit(2)
}
const seconds = Number(values.seconds)
const rounds = Number(values.rounds)
const dir = mkdtempSync(join(tmpdir(), "tollgate-ab-"))

try {
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
      const config = await writeTollgateConfig(own, "tollgate", { upstreamUrl: fake.url })
      started = await startServer({
        name,
        script: resolve(server),
        args: ["serve", "--config", config],
        nodeArgs: [...shebangNodeArgs(resolve(server)), ...nodeArgs],
        env: { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY },
        logFile: join(dir, `${name}.log`),
      })
    }
    servers.push({ name, url: started.url, pid: started.child.pid, proxy })
  }

  const cpu = servers.map(() => [])
  const rate = servers.map(() => [])
  const rss = servers.map(() => [])
  for (let round = 0; round <= rounds; round++) {
    const results = await Promise.all(
      servers.map((s) => {
        const req = requestFor({
          api: "anthropic",
          target: s.proxy ? "plain_proxy" : "tollgate",
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
}
