// `npm run build:exe`: dist/tollgate, one executable file holding Node 24 and the gateway (Node's single
// executable applications, ADR 0053). Steps: a CommonJS bundle of src/bin/tollgate.ts with every package in
// it; a SEA blob of it made by the project's own Node 24 (`--experimental-sea-config`, code cache on, the
// gateway's V8 options as `execArgv`); a copy of that same Node binary with the blob injected by `postject`
// (pinned devDependency) and its sentinel fuse flipped. Prints the file's size, SHA-256 and start-up time.
// When the bundle, the Node binary and the injector are those of the last build and dist/tollgate is the
// file that build wrote, nothing is rebuilt (`--force` rebuilds anyway): `npm test` runs this every time.
import { build } from "esbuild"
import { buildConsole, consoleDefine } from "./console.mjs"
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { createReadStream, existsSync, readFileSync } from "node:fs"
import { chmod, copyFile, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"
import { TOLLGATE_NODE_OPTIONS, TOLLGATE_V8_FLAGS } from "./gateway-flags.mjs"

const root = resolve(import.meta.dirname, "..")
const require = createRequire(import.meta.url)
const work = join(root, "dist/exe")
const output = join(root, "dist/tollgate")
const bundle = join(work, "tollgate.cjs")
const seaConfig = join(work, "sea-config.json")
const blob = join(work, "tollgate.blob")
const stamp = join(work, "inputs.json")

/** The name of the blob's resource and the fuse in Node's binary that says "a SEA blob is present". */
const RESOURCE = "NODE_SEA_BLOB"
const FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2"

/** The project's Node 24 (the pinned `node` package), the binary the blob is made by and injected into. */
const nodeBinary = join(dirname(require.resolve("node/package.json")), "bin/node")
const postjectCli = join(dirname(require.resolve("postject/package.json")), "dist/cli.js")
const postjectVersion = JSON.parse(readFileSync(require.resolve("postject/package.json"), "utf8")).version

const sha256File = (path) =>
  new Promise((done, fail) => {
    const hash = createHash("sha256")
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("end", () => done(hash.digest("hex")))
      .on("error", fail)
  })
const sha256 = (data) => createHash("sha256").update(data).digest("hex")

const started = performance.now()
await mkdir(work, { recursive: true })

// 1. The bundle: CommonJS (a SEA's main script is run as CommonJS), every package inside, Node built-ins
//    left as `require("node:…")`. Deterministic, so its hash decides whether the rest must run.
//    The web console is built and embedded as in bin/tollgate (ADR 0059); no comments or indentation, as there.
const built = await build({
  entryPoints: [join(root, "src/bin/tollgate.ts")],
  outfile: bundle,
  bundle: true,
  platform: "node",
  target: "node24",
  format: "cjs",
  logLevel: "warning",
  legalComments: "none",
  minifyWhitespace: true,
  define: consoleDefine(await buildConsole()),
  metafile: true,
})
await writeFile(join(work, "meta.json"), JSON.stringify(built.metafile))

// 2. The SEA config. The gateway's V8 options go in `execArgv`: Node applies them as if given on the command
//    line, before V8 creates the heap (the semi-space size cannot be set later; ADR 0044).
const config = {
  main: bundle,
  output: blob,
  disableExperimentalSEAWarning: true,
  useCodeCache: true,
  useSnapshot: false,
  execArgv: [...TOLLGATE_NODE_OPTIONS.split(" "), ...TOLLGATE_V8_FLAGS.split(" ")],
}
await writeFile(seaConfig, `${JSON.stringify(config, null, 2)}\n`)

const nodeVersion = execFileSync(nodeBinary, ["--version"], { encoding: "utf8" }).trim()
const inputs = {
  script: sha256(
    (await readFile(import.meta.filename, "utf8")) +
      (await readFile(join(import.meta.dirname, "gateway-flags.mjs"), "utf8")),
  ),
  bundle: sha256(await readFile(bundle)),
  seaConfig: sha256(await readFile(seaConfig)),
  node: `${nodeVersion} ${await sha256File(nodeBinary)}`,
  postject: postjectVersion,
}
const previous = existsSync(stamp) ? JSON.parse(await readFile(stamp, "utf8")) : undefined
const upToDate =
  !process.argv.includes("--force") &&
  previous !== undefined &&
  JSON.stringify(previous.inputs) === JSON.stringify(inputs) &&
  existsSync(output) &&
  (await sha256File(output)) === previous.sha256

if (upToDate) {
  console.log(`dist/tollgate is up to date (${previous.size} bytes, sha256 ${previous.sha256})`)
  process.exit(0)
}

// 3. The blob, made by the same Node binary it goes into and with the same V8 options: the code cache is
//    tied to that V8 and to a hash of its flags (`--no-allocation-site-pretenuring` is one of them), and a
//    cache made without them is rejected at every start ("Warning: Code cache data rejected").
execFileSync(nodeBinary, [...config.execArgv, "--experimental-sea-config", seaConfig], {
  stdio: ["ignore", "ignore", "inherit"],
})

// 4. A copy of Node with the blob injected; renamed into place only when complete.
const partial = `${output}.partial`
await rm(output, { force: true })
await copyFile(nodeBinary, partial)
await chmod(partial, 0o755)
// postject (LIEF) warns "Can't find string offset for section name '.note…'" for Node's ELF notes; harmless
// (the binary runs, and the tests run it). Anything else it prints is shown.
const injected = spawnSync(nodeBinary, [postjectCli, partial, RESOURCE, blob, "--sentinel-fuse", FUSE], {
  encoding: "utf8",
})
const noise = /^warning: Can't find string offset for section name '\.note[^']*'$/
const said = `${injected.stdout}${injected.stderr}`
  .replace(/\x1b\[[0-9;]*m/g, "")
  .split("\n")
  .filter((l) => l !== "" && !noise.test(l))
if (injected.status !== 0) throw new Error(`postject failed (${injected.status}):\n${said.join("\n")}`)
for (const line of said) if (!/^(Start injection|Injection done|💉)/u.test(line)) console.error(line)
await rename(partial, output)
const size = (await stat(output)).size
const digest = await sha256File(output)
const buildMs = Math.round(performance.now() - started)

/** Time from spawn to the `listening on` line of `dist/tollgate demo` (two fake providers and the gateway). */
const startUpMs = () =>
  new Promise((done, fail) => {
    const t0 = performance.now()
    const child = spawn(output, ["demo", "--listen", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] })
    let text = ""
    let ms
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000)
    const onData = (chunk) => {
      text += chunk.toString("utf8")
      if (ms === undefined && /listening on http:\/\//.test(text)) {
        ms = performance.now() - t0
        // SIGTERM, and wait for the exit: the demo removes its temporary folder on the way out.
        child.kill("SIGTERM")
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      if (ms !== undefined && code === 0) done(ms)
      else
        fail(
          new Error(
            `dist/tollgate demo exited (${code ?? signal}) ${ms === undefined ? "before listening" : "badly after SIGTERM"}:\n${text}`,
          ),
        )
    })
  })
const runs = []
for (let i = 0; i < 3; i++) runs.push(await startUpMs())
runs.sort((a, b) => a - b)
// Recorded only once the file has started: a build whose executable does not start is never "up to date".
await writeFile(stamp, `${JSON.stringify({ inputs, size, sha256: digest }, null, 2)}\n`)

console.log(`dist/tollgate  built in ${buildMs} ms (Node ${nodeVersion}, postject ${postjectVersion})`)
console.log(`  size     ${size} bytes (${(size / 1024 / 1024).toFixed(1)} MiB)`)
console.log(`  sha256   ${digest}`)
console.log(
  `  start-up ${Math.round(runs[1])} ms to "listening on" for \`dist/tollgate demo\` (median of 3: ${runs.map(Math.round).join(", ")} ms)`,
)
