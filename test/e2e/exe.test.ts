import { execFileSync } from "node:child_process"
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { isBuiltin } from "node:module"
import { delimiter, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { stringify } from "yaml"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { eventually } from "../support/harness.js"
import {
  GATEWAY_UPSTREAM_KEY_ENV,
  ROOT,
  runCommand,
  startCommand,
  writeGatewayConfig,
  type Running,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * Issue #22, the single executable (ADR 0053): `dist/tollgate`, copied alone into an empty folder and run
 * with an environment whose PATH has no `node` (nor anything else), from a working directory with no
 * node_modules, runs every command.
 */

const EXE = join(ROOT, "dist/tollgate")
const BUNDLE = join(ROOT, "dist/exe/tollgate.cjs")

/** Packages the bundle may `require` at run time although they are not in it: each sits in a try/catch
 * and has a pure-JS fallback (ws's native helpers, debug's colours). A SEA's `require` loads built-ins only. */
const OPTIONAL = new Set(["bufferutil", "utf-8-validate", "supports-color"])

const messages = (url: string, key: string, body: Record<string, unknown>, scenario?: string) =>
  fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: {
      "x-api-key": key,
      "content-type": "application/json",
      ...(scenario === undefined ? {} : { "x-fake-scenario": scenario }),
    },
    body: JSON.stringify({
      model: "claude",
      max_tokens: 8,
      messages: [{ role: "user", content: "hi" }],
      ...body,
    }),
  })

/** Reads a streaming body to its end; `firstChunk` is called when the first bytes arrive. */
const readAll = async (response: Response, firstChunk: () => void = () => {}) => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return text
    if (text === "") firstChunk()
    text += decoder.decode(value, { stream: true })
  }
}

const usageRecords = (dir: string): Array<Record<string, unknown>> =>
  readFileSync(join(dir, "usage.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>)

describe("dist/tollgate, the single executable, on a PATH with no node", () => {
  let home: string
  let exe: string
  let env: NodeJS.ProcessEnv
  let fake: FakeProviderHandle
  const started: Array<Running> = []
  const key = generateKey()

  const run = (args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
    runCommand(exe, args, { env: { ...env, ...extra }, cwd: home })
  const start = (args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
    startCommand(exe, args, { env: { ...env, ...extra }, cwd: home }).then((p) => {
      started.push(p)
      return p
    })

  beforeAll(async () => {
    // `npm test` has built it (`npm run build:exe`); when run alone, this builds it if its inputs changed
    // (a no-op otherwise), so a stale executable is never tested.
    execFileSync(process.execPath, [join(ROOT, "scripts/build-exe.mjs")], { cwd: ROOT, stdio: "ignore" })
    home = tempDir("tollgate-exe-")
    // Installed by copying one file.
    mkdirSync(join(home, "opt"))
    exe = join(home, "opt", "tollgate")
    copyFileSync(EXE, exe)
    execFileSync("chmod", ["755", exe])
    // A PATH of one empty folder: the executable needs no tool (nor Node) from it.
    const emptyBin = join(home, "bin")
    mkdirSync(emptyBin)
    env = { PATH: emptyBin, HOME: home, LANG: "C.UTF-8" }
    fake = await startFakeProvider({ name: "exe" })
  }, 120_000)

  afterAll(async () => {
    for (const p of started) await p.stop("SIGKILL")
    await fake?.close()
    if (home !== undefined) rmSync(home, { recursive: true, force: true })
  })

  it("the environment it runs in cannot find node", () => {
    const dirs = env.PATH!.split(delimiter)
    expect(dirs.some((d) => existsSync(join(d, "node")))).toBe(false)
    expect(Object.keys(env).filter((k) => k.startsWith("NODE") || k.startsWith("npm_"))).toEqual([])
  })

  it("the bundle requires no file outside it: only Node built-ins and optional packages with a fallback", () => {
    // AWS's SigV4a signer (bundled with the credential chain, never used: Bedrock signs SigV4) names a package
    // in its error message, `[require("@aws-sdk/signature-v4-crt");]`: text, not a load.
    const source = readFileSync(BUNDLE, "utf8").replaceAll('[require("@aws-sdk/signature-v4-crt");]', "[…]")
    const required = new Set([...source.matchAll(/\brequire\d*\("([^"]+)"\)/g)].map((m) => m[1]!))
    expect([...required].filter((name) => !isBuiltin(name) && !OPTIONAL.has(name))).toEqual([])
    // No require of a computed name, no require.resolve, no path into node_modules. (A method named
    // `require` — a call `x.require(n)` or its definition `require(n) {` — is not a module load.)
    expect(source).not.toMatch(/(?<![.\w$])require\d*\((?!["'])[^)]*\)(?!\s*\{)/)
    expect(source).not.toMatch(/require\.resolve\(/)
  })

  it("carries the gateway's V8 options in its SEA config (ADR 0032, 0044, 0067)", () => {
    const config = JSON.parse(readFileSync(join(ROOT, "dist/exe/sea-config.json"), "utf8")) as Record<
      string,
      unknown
    >
    expect(config).toMatchObject({
      useCodeCache: true,
      disableExperimentalSEAWarning: true,
      execArgv: ["--max-semi-space-size=16", "--v8-pool-size=2", "--no-allocation-site-pretenuring"],
    })
  })

  it("--help: every command, exit 0, nothing on stderr (no SEA warning, the code cache accepted)", async () => {
    for (const args of [[], ["serve"], ["config", "validate"], ["keys", "create"], ["demo"]]) {
      const result = await run([...args, "--help"])
      expect(result.code, args.join(" ")).toBe(0)
      expect(result.stdout).toContain("tollgate")
      // A code cache made under other V8 flags is rejected with a warning at every start; none means the
      // flags of its execArgv are in force.
      expect(result.stderr, args.join(" ")).toBe("")
    }
  })

  it("config validate: ok for a good config, exit 1 with the problem for a bad one", async () => {
    const dir = mkdtempSync(join(home, "validate-"))
    const config = writeGatewayConfig({ dir, upstreamUrl: fake.url, keyHash: hashKey(key) })
    const good = await run(["config", "validate", "--config", config], { [GATEWAY_UPSTREAM_KEY_ENV]: "x" })
    expect(good.code, good.stderr).toBe(0)
    expect(good.stdout.split("\n")[0]).toBe("ok")

    const bad = join(dir, "bad.yaml")
    writeFileSync(
      bad,
      stringify({
        providers: { a: { kind: "anthropic", base_url: "http://127.0.0.1:1", api_key_env: "X_KEY" } },
        routes: { claude: { api: "anthropic", targets: [{ provider: "foo", model: "m" }] } },
        tenants: {},
      }),
    )
    const refused = await run(["config", "validate", "--config", bad], { X_KEY: "x" })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('routes.claude.targets[0].provider: unknown provider "foo"')
  })

  it("keys create prints a key and its YAML entry", async () => {
    const created = await run(["keys", "create", "--tenant", "acme", "--id", "laptop"])
    expect(created.code).toBe(0)
    const secret = /tg_[0-9A-Za-z]{32}/.exec(created.stdout)?.[0]
    expect(secret).toBeDefined()
    expect(created.stdout).toContain("- id: laptop")
    expect(created.stdout).toContain(`sha256: ${hashKey(secret!)}`)
  })

  it("serve: a request, a stream, their usage records; SIGHUP reloads; SIGTERM drains an open stream, exit 0", async () => {
    const dir = mkdtempSync(join(home, "serve-"))
    const config = writeGatewayConfig({
      dir,
      upstreamUrl: fake.url,
      keyHash: hashKey(key),
      server: { shutdown_grace: "10s" },
    })
    const gateway = await start(["serve", "--config", config], { [GATEWAY_UPSTREAM_KEY_ENV]: "sk-exe" })

    const json = await messages(gateway.url, key, {
      max_tokens: 4,
      messages: [{ role: "user", content: "one two three" }],
    })
    expect(json.status).toBe(200)
    expect(await json.json()).toMatchObject({ usage: { input_tokens: 3, output_tokens: 4 } })
    expect(fake.requests().recent.at(-1)!.headers["x-api-key"]).toBe("sk-exe")

    const sse = await messages(gateway.url, key, { stream: true })
    expect(sse.headers.get("content-type")).toContain("text/event-stream")
    expect(await readAll(sse)).toContain("event: message_stop")

    await eventually(() => existsSync(join(dir, "usage.jsonl")) && usageRecords(dir).length === 2)
    const [first, second] = usageRecords(dir)
    expect(first).toMatchObject({
      tenant: "acme",
      provider: "fake",
      input_tokens: 3,
      output_tokens: 4,
      cost_micro_usd: 49, // ceil((3 × 3 + 4 × 10) USD/M)
      stream: false,
    })
    expect(second).toMatchObject({ tenant: "acme", provider: "fake", stream: true })

    // SIGHUP reloads the config; the process lives on and serves.
    const before = gateway.output().length
    gateway.child.kill("SIGHUP")
    await eventually(() => gateway.output().slice(before).includes("config reloaded"), 10_000)
    expect(gateway.child.exitCode).toBeNull()
    expect((await messages(gateway.url, key, {})).status).toBe(200)

    // SIGTERM with a stream open (~0.6 s): the stream finishes, then the process exits 0.
    let streaming!: () => void
    const firstChunk = new Promise<void>((r) => (streaming = r))
    const open = messages(gateway.url, key, { stream: true, max_tokens: 500 }, "tokens:12,delay:50").then(
      (r) => readAll(r, streaming),
    )
    await firstChunk
    gateway.child.kill("SIGTERM")
    expect(await open).toContain("event: message_stop")
    expect(await gateway.exited).toBe(0)
    expect(usageRecords(dir)).toHaveLength(4)
    expect(usageRecords(dir).at(-1)).toMatchObject({ stream: true, status: 200 })
    expect(usageRecords(dir).at(-1)!["incomplete"]).not.toBe(true)
  })

  it("demo answers its own curl line, serves the web console it prints, and stops on SIGTERM", async () => {
    const demo = await start(["demo", "--listen", "127.0.0.1:0"])
    await eventually(() => /Client key \(shown once\): (tg_\w+)/.test(demo.output()))
    const demoKey = /Client key \(shown once\): (tg_\w+)/.exec(demo.output())![1]!
    const response = await messages(demo.url, demoKey, { model: "claude-demo", max_tokens: 16 })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ type: "message" })
    // The console is inside the executable (ADR 0059): its page and code, with the token the demo printed.
    const consoleUrl = /Web console: (http:\/\/\S+\/admin\/ui)/.exec(demo.output())?.[1]
    expect(consoleUrl).toBe(`${demo.url}/admin/ui`)
    const page = await fetch(consoleUrl!)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('<script type="module" src="/admin/ui/app.js"></script>')
    const script = await fetch(`${demo.url}/admin/ui/app.js`)
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
    expect((await script.text()).length).toBeGreaterThan(10_000)
    expect(await demo.stop("SIGTERM")).toBe(0)
  })
})
