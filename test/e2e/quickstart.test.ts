import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { delimiter, dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FAKEPROVIDER, ROOT, TOLLGATE } from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * Steps 2 to 8 of docs/quick-start.md, the path on the fake provider, run as the page writes them: every
 * command of their `sh` blocks runs through `sh` in a fresh folder holding what a clone has (`bin/` as
 * `npm run build` makes it, `config/` without a local `tollgate.yaml`), with no network and no provider
 * account. What the test does in place of the reader:
 * - it skips `npm ci && npm run build` (the suite runs on the built binaries; `npm ci` needs the registry);
 * - it makes the edit the page asks for (the `sha256` that `keys create` printed replaces the placeholder);
 * - it runs the commands the page starts "in a terminal of its own" in the background;
 * - ports are made free: the fake provider and the gateway listen on port 0 and every later `127.0.0.1:8090`
 *   and `127.0.0.1:8080` names the port they got;
 * - the page's example secret is the one `keys create` printed.
 * When `curl` is not installed, a stand-in of the few flags the page uses takes its place.
 */

const DOC = join(ROOT, "docs/quick-start.md")
const EXAMPLE = join(ROOT, "config/fake.example.yaml")
const PLACEHOLDER = "PASTE_THE_SHA256_FROM_KEYS_CREATE"
const GATEWAY_ADDRESS = "127.0.0.1:8080"
const FAKE_ADDRESS = "127.0.0.1:8090"

const must = <T>(value: T | null | undefined, what: string): T => {
  if (value === null || value === undefined) throw new Error(`docs/quick-start.md steps 2-8: no ${what}`)
  return value
}

/** The section of steps 2 to 8 (up to the step that leaves the fake provider). */
const pathSection = (): string => {
  const text = readFileSync(DOC, "utf8")
  const start = must(/^## 2\. .*$/m.exec(text)?.index, "step 2")
  const end = must(/^## 9\. .*$/m.exec(text)?.index, "step 9")
  return text.slice(start, end)
}

/** The commands of the section's `sh` blocks, in order: one per line, `\` continuations joined. */
const pathCommands = (section: string): Array<string> =>
  [...section.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) =>
    block[1]!
      .replace(/\\\n\s*/g, "")
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line !== "" && !line.startsWith("#")),
  )

/** A stand-in for `curl [-s] [-i] [-H "k: v"]... [-d BODY] URL`, the flags the page uses. */
const CURL_STANDIN = `#!/usr/bin/env node
const args = process.argv.slice(2)
const headers = {}
let body, url, include = false
for (let i = 0; i < args.length; i++) {
  const a = args[i]
  if (a === "-H") { const h = args[++i]; const at = h.indexOf(":"); headers[h.slice(0, at).trim()] = h.slice(at + 1).trim() }
  else if (a === "-d") body = args[++i]
  else if (/^-[si]+$/.test(a)) include ||= a.includes("i")
  else url = a
}
const response = await fetch(url, { method: body === undefined ? "GET" : "POST", headers, body })
let head = ""
if (include) {
  head = "HTTP/1.1 " + response.status + " " + response.statusText + "\\r\\n"
  for (const [name, value] of response.headers) head += name + ": " + value + "\\r\\n"
  head += "\\r\\n"
}
process.stdout.write(head + (await response.text()))
`

interface Background {
  readonly child: ChildProcess
  readonly url: string
  output: string
}

const hasCurl = spawnSync("sh", ["-c", "command -v curl"]).status === 0

describe("docs/quick-start.md: steps 2 to 8 on the fake provider", () => {
  const section = pathSection()
  const commands = pathCommands(section)
  const dir = tempDir("tollgate-quickstart-")
  const toolDir = tempDir("tollgate-quickstart-tools-")
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    // The binaries' `#!/usr/bin/env node` finds the Node.js that runs the tests (and the curl stand-in, if any).
    PATH: [toolDir, dirname(process.execPath), process.env.PATH ?? ""].join(delimiter),
  }
  for (const name of ["TOLLGATE_CONFIG", "TOLLGATE_KEY", "FAKE_UPSTREAM_KEY", "TOLLGATE_ADMIN_TOKEN"])
    delete env[name]
  const background: Array<Background> = []
  /** What each command that ran to its end printed, by command as the page writes it. */
  const printed = new Map<string, { code: number | null; stdout: string; stderr: string }>()
  let secret = ""
  let sha256 = ""
  let fakeAddress = ""
  let gatewayAddress = ""

  /** The command with the ports and the secret of this run in place of the page's. */
  const localize = (command: string): string => {
    let local = command.replace(/tg_[0-9A-Za-z]{32}/g, secret)
    if (fakeAddress !== "") local = local.replaceAll(FAKE_ADDRESS, fakeAddress)
    if (gatewayAddress !== "") local = local.replaceAll(GATEWAY_ADDRESS, gatewayAddress)
    return local
  }

  /** The reader's edit of config/tollgate.yaml, and the free ports. */
  const editConfig = () => {
    const file = join(dir, "config/tollgate.yaml")
    if (!existsSync(file)) return
    let text = readFileSync(file, "utf8").replace(PLACEHOLDER, sha256)
    text = text.replace(`listen: ${GATEWAY_ADDRESS}`, "listen: 127.0.0.1:0")
    if (fakeAddress !== "") text = text.replaceAll(`http://${FAKE_ADDRESS}`, `http://${fakeAddress}`)
    writeFileSync(file, text)
  }

  const run = (command: string) => {
    const result = spawnSync("sh", ["-c", localize(command)], {
      cwd: dir,
      env,
      encoding: "utf8",
      timeout: 20_000,
    })
    return { code: result.status, stdout: result.stdout, stderr: result.stderr }
  }

  /** Starts a long-running command (its own process group) and waits for its `listening on` line. */
  const start = (command: string, address: string): Promise<Background> =>
    new Promise((resolve, reject) => {
      const child = spawn("sh", ["-c", localize(command).replace(address, "127.0.0.1:0")], {
        cwd: dir,
        env,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      })
      const started: Background = { child, url: "", output: "" }
      background.push(started)
      const timer = setTimeout(
        () => reject(new Error(`${command}: no "listening on" line:\n${started.output}`)),
        15_000,
      )
      const onData = (chunk: Buffer) => {
        started.output += chunk.toString("utf8")
        const url = /listening on (http:\/\/\S+)/.exec(started.output)?.[1]
        if (url !== undefined && started.url === "") {
          clearTimeout(timer)
          Object.assign(started, { url })
          resolve(started)
        }
      }
      child.stdout!.on("data", onData)
      child.stderr!.on("data", onData)
      child.on("exit", (code) => {
        clearTimeout(timer)
        reject(new Error(`${command} exited with ${code}:\n${started.output}`))
      })
    })

  beforeAll(async () => {
    // A clone as `npm ci && npm run build` leaves it, as far as these steps look.
    for (const binary of [TOLLGATE, FAKEPROVIDER]) expect(existsSync(binary)).toBe(true)
    mkdirSync(join(dir, "bin"))
    cpSync(TOLLGATE, join(dir, "bin/tollgate"))
    cpSync(FAKEPROVIDER, join(dir, "bin/fakeprovider"))
    for (const binary of ["bin/tollgate", "bin/fakeprovider"]) chmodSync(join(dir, binary), 0o755)
    cpSync(join(ROOT, "config"), join(dir, "config"), {
      recursive: true,
      filter: (source) => !source.endsWith("/config/tollgate.yaml"),
    })
    if (!hasCurl) {
      writeFileSync(join(toolDir, "curl"), CURL_STANDIN)
      chmodSync(join(toolDir, "curl"), 0o755)
    }

    for (const command of commands) {
      editConfig()
      if (/^npm ci\b/.test(command)) continue
      const exported = /^export (\w+)=(\S+)/.exec(command)
      if (exported !== null) {
        env[exported[1]!] = localize(exported[2]!)
        continue
      }
      if (/^\.\/bin\/fakeprovider /.test(command)) {
        fakeAddress = new URL((await start(command, FAKE_ADDRESS)).url).host
        continue
      }
      if (/(^|\s)\.\/bin\/tollgate serve\b/.test(command)) {
        gatewayAddress = new URL((await start(command, GATEWAY_ADDRESS)).url).host
        continue
      }
      const result = run(command)
      printed.set(command, result)
      if (/\.\/bin\/tollgate keys create\b/.test(command)) {
        secret = must(/tg_[0-9A-Za-z]{32}/.exec(result.stdout)?.[0], "secret printed by keys create")
        sha256 = must(/sha256: ([0-9a-f]{64})/.exec(result.stdout)?.[1], "sha256 printed by keys create")
      }
    }
  })

  afterAll(async () => {
    await Promise.all(
      background.map(
        ({ child }) =>
          new Promise<void>((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done()
            child.on("exit", () => done())
            process.kill(-child.pid!, "SIGTERM")
          }),
      ),
    )
    for (const folder of [dir, toolDir]) rmSync(folder, { recursive: true, force: true })
  })

  /** The output of the one command that matches `pattern`. */
  const outputOf = (pattern: RegExp) => {
    const matching = [...printed].filter(([command]) => pattern.test(command))
    expect(matching.map(([command]) => command)).toHaveLength(1)
    const [, result] = matching[0]!
    expect(result.code, result.stderr).toBe(0)
    return result.stdout
  }

  it("the page has the steps: build, key, config, fake provider, validate, serve, request, usage, metrics", () => {
    const kinds = [
      /^npm ci && npm run build$/,
      /^\.\/bin\/tollgate keys create /,
      /^cp config\/fake\.example\.yaml config\/tollgate\.yaml$/,
      /^\.\/bin\/fakeprovider --listen 127\.0\.0\.1:8090$/,
      /\.\/bin\/tollgate config validate$/,
      /\.\/bin\/tollgate serve$/,
      /^curl .*\/v1\/messages /,
      /^tail -n 1 data\/usage\.jsonl$/,
      /^curl .*\/metrics /,
    ]
    let at = 0
    for (const kind of kinds) {
      const found = commands.findIndex((command, i) => i >= at && kind.test(command))
      expect(found, `${kind} after command ${at} of:\n${commands.join("\n")}`).toBeGreaterThanOrEqual(0)
      at = found + 1
    }
  })

  it("the config the page shows is config/fake.example.yaml", () => {
    const shown = must(/```yaml\n([\s\S]*?)```/.exec(section)?.[1], "yaml block")
    expect(shown).toBe(readFileSync(EXAMPLE, "utf8"))
  })

  it("config validate says ok", () => {
    expect(outputOf(/\.\/bin\/tollgate config validate$/).split("\n")[0]).toBe("ok")
  })

  it("the request gets a 200 answer from the fake provider through Tollgate", () => {
    const answer = outputOf(/^curl .*\/v1\/messages /)
    expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer).toMatch(/\r\nx-tollgate-provider: fake\r\n/i)
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as Record<string, unknown>
    expect(body).toMatchObject({ type: "message", model: "claude-sonnet-5-5" })
  })

  it("tail shows its usage record", () => {
    const record = JSON.parse(outputOf(/^tail -n 1 data\/usage\.jsonl$/)) as Record<string, unknown>
    expect(record).toMatchObject({
      tenant: "acme",
      key_id: "laptop",
      route: "claude-sonnet",
      provider: "fake",
      model: "claude-sonnet-5-5",
      status: 200,
      input_tokens: 4,
      output_tokens: 16,
      cost_micro_usd: 172,
    })
  })

  it("the metrics line counts it", () => {
    const lines = outputOf(/^curl .*\/metrics /)
      .trim()
      .split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^tollgate_requests_total\{.*route="claude-sonnet".*status="200".*\} 1$/)
    expect(lines[0]).toContain('tenant="acme"')
  })
})
