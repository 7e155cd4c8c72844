// Effect operations per request: how many steps the request fiber's run loop takes for one proxied request.
// Each operation costs CPU and ~50–100 bytes of garbage, so this count is a steady measure of the Effect
// part of the hot path (throughput on a shared machine is not). It copies bin/tollgate with a counter in
// the run loop, starts it with bin/fakeprovider, sends WARMUP then COUNT requests one at a time, and prints
// operations per request, by operation code. The layer's deadline sweeper (a few operations every 25 ms)
// is included, so one-at-a-time requests see about one or two more operations than a loaded server.
// Usage: node bench/effect-ops.mjs [json|sse] [COUNT]   (after `npm run build`)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { startServer, stopAll } from "./lib/procs.mjs"
import { requestFor, UPSTREAM_KEY, UPSTREAM_KEY_ENV, writeTollgateConfig } from "./lib/setup.mjs"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const kind = process.argv[2] ?? "json"
const count = Number(process.argv[3] ?? 500)
const dir = mkdtempSync(join(tmpdir(), "tollgate-effect-ops-"))

// The counter goes where the run loop evaluates one operation; the snapshot file is written on SIGUSR2.
const LOOP = "      try {\n        cur = this.currentTracer.context(() => {"
const source = readFileSync(join(root, "bin", "tollgate"), "utf8")
if (!source.includes(LOOP))
  throw new Error("the run loop of this effect version is not the one this script knows")
const counted = source
  .replace(LOOP, "      globalThis.__ops.set(cur._op, (globalThis.__ops.get(cur._op) ?? 0) + 1);\n" + LOOP)
  .replace(
    /\n/,
    `\nglobalThis.__ops = new Map(); process.on("SIGUSR2", async () => (await import("node:fs")).writeFileSync(${JSON.stringify(join(dir, "ops.json"))}, JSON.stringify([...globalThis.__ops])));\n`,
  )
const script = join(dir, "tollgate-counted.mjs")
writeFileSync(script, counted)

try {
  const fake = await startServer({
    name: "fake upstream",
    script: join(root, "bin", "fakeprovider"),
    args: ["--listen", "127.0.0.1:0", "--scenario", "max-tokens"],
    logFile: join(dir, "fake.log"),
  })
  const config = await writeTollgateConfig(dir, "tollgate", { upstreamUrl: fake.url })
  const tollgate = await startServer({
    name: "tollgate",
    script,
    args: ["serve", "--config", config],
    env: { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY },
    logFile: join(dir, "tollgate.log"),
  })
  const req = requestFor({
    api: "anthropic",
    target: "tollgate",
    stream: kind === "sse",
    jsonTokens: 16,
    streamTokens: 50,
  })
  const send = async () => {
    const response = await fetch(`${tollgate.url}${req.path}`, {
      method: "POST",
      headers: req.headers,
      body: req.body,
    })
    await response.text()
    if (response.status !== 200) throw new Error(`status ${response.status}`)
  }
  const snapshot = async () => {
    rmSync(join(dir, "ops.json"), { force: true })
    tollgate.child.kill("SIGUSR2")
    for (;;) {
      await new Promise((r) => setTimeout(r, 20))
      try {
        return new Map(JSON.parse(readFileSync(join(dir, "ops.json"), "utf8")))
      } catch {
        // not written yet
      }
    }
  }
  for (let i = 0; i < 50; i++) await send()
  const before = await snapshot()
  for (let i = 0; i < count; i++) await send()
  const after = await snapshot()
  const perRequest = [...after]
    .map(([op, n]) => [op, (n - (before.get(op) ?? 0)) / count])
    .filter(([, n]) => n > 0)
  const total = perRequest.reduce((sum, [, n]) => sum + n, 0)
  console.log(`${kind}: ${total.toFixed(1)} Effect operations per request (${count} requests, one at a time)`)
  console.log(perRequest.map(([op, n]) => `${op} ${n.toFixed(1)}`).join("  "))
} finally {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}
