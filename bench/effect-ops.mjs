// Effect operations per request: how many steps Effect's fiber run loop takes for one proxied request.
// Each operation costs CPU and garbage, so this count is a steady measure of the Effect part of the hot path
// (throughput on a shared machine is not). It copies bin/tollgate (never the product itself) with a counter
// at the two places where Effect 4's fiber counts an operation (FiberImpl#runLoop, one per primitive it
// evaluates; FiberImpl#succeedWith, one per success handed straight to the next continuation), starts the
// copy with bin/fakeprovider, sends 50 then COUNT requests one at a time, and prints operations per request,
// by the primitive's op name (`~effect/Effect/identifier`: "Success", "OnSuccess", "Callback", ...; the
// inline hand-overs as "(succeedWith)"). Every fiber of the process is counted, so background fibers
// (timers, sweepers) that run while the requests do are included: one-at-a-time requests may see an
// operation or two more than a loaded server would.
// Usage: node bench/effect-ops.mjs [json|sse] [COUNT]   (after `npm run build`; BENCH_TOLLGATE=path counts another build)
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

// Effect 4.1's FiberImpl (effect/src/internal/effect.ts, as esbuild bundles it): the run loop's count of
// one evaluated primitive (right after the deferred-interrupt check, which names the loop's `current`
// variable), and succeedWith's count of one inline step. Whitespace and esbuild's renaming of locals may
// differ; anything else means another Effect, and the script stops.
const RUN_LOOP = /([\w$]+)\s*=\s*[\w$]+\(this\._interruptedCause\);?\s*\}(\s*)this\.currentOpCount\+\+;/g
const SUCCEED_WITH =
  /(succeedWith\([\w$]+\)\s*\{\s*)(if\s*\(\(\+\+this\.currentOpCount\s*&\s*[\w$]+\s*-\s*1\)\s*===\s*0\))/g
const OP = JSON.stringify("~effect/Effect/identifier")
// BENCH_TOLLGATE: another build to count (as for bench/run.mjs); bin/tollgate by default.
const tollgateBin = resolve(process.env.BENCH_TOLLGATE || join(root, "bin", "tollgate"))
const source = readFileSync(tollgateBin, "utf8")
for (const [name, pattern] of [
  ["FiberImpl#runLoop", RUN_LOOP],
  ["FiberImpl#succeedWith", SUCCEED_WITH],
]) {
  const found = source.match(pattern)?.length ?? 0
  if (found !== 1)
    throw new Error(
      `${name}: the operation count of Effect 4.1 found ${found} times in ${tollgateBin}, not once`,
    )
}
// The counter (a Map by op name) and the SIGUSR2 handler that writes it to a file go in after the shebang.
const counted = source
  .replace(RUN_LOOP, `$&$2globalThis.__tgOp($1?.[${OP}]);`)
  .replace(SUCCEED_WITH, `$1globalThis.__tgOp("(succeedWith)");$2`)
  .replace(
    /\n/,
    `\nglobalThis.__ops = new Map(); globalThis.__tgOp = (op) => globalThis.__ops.set(String(op), (globalThis.__ops.get(String(op)) ?? 0) + 1); process.on("SIGUSR2", async () => (await import("node:fs")).writeFileSync(${JSON.stringify(join(dir, "ops.json"))}, JSON.stringify([...globalThis.__ops])));\n`,
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
