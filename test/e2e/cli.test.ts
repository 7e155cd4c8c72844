import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { stringify } from "yaml"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { FAKEPROVIDER, runBinary, startBinary, TOLLGATE, type Running } from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * The `tollgate` command line as an operator meets it (#17): help that reads well in a pipe, `--listen`,
 * one clear line on a busy port, the startup summary and the `stopped` line, a demo that cleans up.
 * Everything runs the built binary.
 */

const ESC = "\x1b["
/** Colors neither forced nor refused, whatever the test runner's own environment says. */
const plainEnv = { NO_COLOR: "", FORCE_COLOR: "", TERM: "xterm-256color" }

/** The JSON log lines of a process's output. */
const logLines = (output: string): Array<Record<string, unknown>> =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>)

/** The lines of `text` that are not JSON log lines. */
const plainLines = (text: string): Array<string> =>
  text.split("\n").filter((line) => line !== "" && !line.startsWith("{"))

/** A port something else listens on, for as long as the test holds it. */
const holdPort = (): Promise<{ server: Server; port: number }> =>
  new Promise((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve({ server, port: typeof address === "object" && address !== null ? address.port : 0 })
    })
  })

const UPSTREAM_KEY_ENV = "TG_CLI_UPSTREAM_KEY"

/** A config for one fake Anthropic provider at `upstream`; returns its path. */
const writeConfig = (dir: string, upstream: string, listen: string, keyHash: string): string => {
  writeFileSync(
    join(dir, "pricing.yaml"),
    stringify({
      prices: [{ model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 }],
    }),
  )
  const path = join(dir, "tollgate.yaml")
  writeFileSync(
    path,
    stringify({
      server: { listen, shutdown_grace: "10s" },
      usage: { file: "usage.jsonl" },
      pricing: { file: "pricing.yaml" },
      providers: { fake: { kind: "anthropic", base_url: upstream, api_key_env: UPSTREAM_KEY_ENV } },
      routes: {
        // `budget_ratio` on a route is ignored, with a warning: a decode warning to see at start.
        claude: {
          api: "anthropic",
          retry: { budget_ratio: 0.5 },
          targets: [{ provider: "fake", model: "claude-sonnet-5-5" }],
        },
      },
      tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
    }),
  )
  return path
}

describe("tollgate --help", () => {
  const help = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
    const result = await runBinary(TOLLGATE, [...args, "--help"], { ...plainEnv, ...env })
    expect(result.code).toBe(0)
    return result.stdout
  }

  it("prints no ANSI codes into a pipe", async () => {
    for (const command of [[], ["serve"], ["config", "validate"], ["keys", "create"], ["demo"]]) {
      expect(await help(command)).not.toContain(ESC)
    }
  })

  it("NO_COLOR wins over FORCE_COLOR (which alone colors even a pipe)", async () => {
    expect(await help(["serve"], { FORCE_COLOR: "1" })).toContain(ESC)
    expect(await help(["serve"], { FORCE_COLOR: "1", NO_COLOR: "1" })).not.toContain(ESC)
  })

  it("usage lines name the full command and its flags, with HOST:PORT for --listen", async () => {
    // Other flags may follow (--log-format): the line starts with the command and names these.
    expect(await help(["config", "validate"])).toMatch(
      /\nUSAGE\n {2}tollgate config validate \[--config FILE\]/,
    )
    expect(await help(["serve"])).toMatch(
      /\nUSAGE\n {2}tollgate serve \[--config FILE\] \[--listen HOST:PORT\]/,
    )
    const demo = await help(["demo"])
    expect(demo).toMatch(/\nUSAGE\n {2}tollgate demo \[--listen HOST:PORT\]/)
    expect(demo).toMatch(/--listen HOST:PORT +.*Default: 127\.0\.0\.1:8080/)
    for (const command of [["serve"], ["config", "validate"], ["demo"]]) {
      const text = await help(command)
      expect(text).not.toMatch(/\$ \w|--listen (text|string)/)
    }
  })

  it("each command has one example and lists the environment variables it reads", async () => {
    const expected: Array<[ReadonlyArray<string>, ReadonlyArray<string>]> = [
      [["serve"], ["TOLLGATE_CONFIG", "providers.*.api_key_env", "TOLLGATE_ADMIN_TOKEN", "NO_COLOR"]],
      [
        ["config", "validate"],
        ["TOLLGATE_CONFIG", "providers.*.api_key_env", "NO_COLOR"],
      ],
      [["demo"], ["TOLLGATE_ADMIN_TOKEN", "NO_COLOR"]],
    ]
    for (const [command, vars] of expected) {
      const text = await help(command)
      const examples = /\nEXAMPLES\n([\s\S]*?)\n\n/.exec(text)?.[1] ?? ""
      expect(
        examples.split("\n").filter((line) => line.startsWith(`  tollgate ${command.join(" ")}`)),
      ).toHaveLength(1)
      const environment = text.slice(text.indexOf("\nENVIRONMENT\n"))
      for (const name of vars)
        expect(environment).toMatch(new RegExp(`\\n  ${name.replace(/[.*]/g, "\\$&")} +\\S`))
    }
  })
})

describe("tollgate serve", () => {
  const started: Array<Running> = []
  let fake: Running
  let dir: string
  const key = generateKey()

  beforeAll(async () => {
    fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
    started.push(fake)
    dir = tempDir("tollgate-cli-")
  })

  afterAll(async () => {
    await Promise.all(started.map((process) => process.stop("SIGKILL")))
    rmSync(dir, { recursive: true, force: true })
  })

  it("--listen 127.0.0.1:0 overrides server.listen; the startup summary and the warnings follow `listening on`", async () => {
    // Port 1 needs privileges: the gateway starts only because --listen replaces it.
    const config = writeConfig(dir, fake.url, "127.0.0.1:1", hashKey(key))
    const gateway = await startBinary(TOLLGATE, ["serve", "--config", config, "--listen", "127.0.0.1:0"], {
      [UPSTREAM_KEY_ENV]: "sk-cli",
    })
    started.push(gateway)
    expect(gateway.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(gateway.url).not.toBe("http://127.0.0.1:1")
    await expect(fetch(`${gateway.url}/healthz`)).resolves.toHaveProperty("status", 200)
    const until = Date.now() + 5_000
    while (!gateway.output().includes('"message":"ready: ') && Date.now() < until)
      await new Promise((resolve) => setTimeout(resolve, 20))
    const output = gateway.output()
    expect(output.split("\n").find((line) => !line.startsWith("{"))).toBe(`listening on ${gateway.url}`)
    const logs = logLines(output)
    const ready = logs.find((line) => String(line.message).startsWith("ready: "))
    expect(ready).toMatchObject({
      level: "info",
      message: `ready: 1 provider, 1 route, 1 tenant; store memory; prices ${join(dir, "pricing.yaml")}`,
      providers: ["fake"],
      routes: ["claude"],
      tenants: ["acme"],
      store: "memory",
      usage_file: join(dir, "usage.jsonl"),
      prices: join(dir, "pricing.yaml"),
    })
    const warning = logs.find((line) => String(line.message).includes("retry.budget_ratio"))
    expect(warning).toMatchObject({ level: "warn" })
    expect(logs.indexOf(warning!)).toBeGreaterThan(logs.indexOf(ready!))
    await gateway.stop("SIGTERM")
  })

  it("SIGTERM logs `stopped` with the requests it drained", async () => {
    const config = writeConfig(dir, fake.url, "127.0.0.1:0", hashKey(key))
    const gateway = await startBinary(TOLLGATE, ["serve", "--config", config], {
      [UPSTREAM_KEY_ENV]: "sk-cli",
    })
    started.push(gateway)
    // A stream of 20 events 50 ms apart is open when the signal comes; the drain lets it finish.
    const response = await fetch(`${gateway.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": key,
        "content-type": "application/json",
        "x-fake-scenario": "tokens:20,delay:50",
      },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 20,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    })
    expect(response.status).toBe(200)
    const body = response.text()
    const code = gateway.stop("SIGTERM")
    expect(await body).toContain("message_stop")
    expect(await code).toBe(0)
    const stopped = logLines(gateway.output()).filter((line) => line.message === "stopped")
    expect(stopped).toEqual([expect.objectContaining({ level: "info", drained: 1 })])
  })

  it("a busy port gives one line naming --listen and server.listen, and exit 1", async () => {
    const { server, port } = await holdPort()
    try {
      const config = writeConfig(dir, fake.url, `127.0.0.1:${port}`, hashKey(key))
      const fromConfig = await runBinary(TOLLGATE, ["serve", "--config", config], {
        [UPSTREAM_KEY_ENV]: "sk-cli",
      })
      expect(fromConfig.code).toBe(1)
      expect(plainLines(fromConfig.stderr)).toEqual([
        `tollgate: 127.0.0.1:${port} is in use; pass --listen HOST:PORT (or set server.listen)`,
      ])
      expect(fromConfig.stdout).not.toContain("listening on")

      const fromFlag = await runBinary(
        TOLLGATE,
        ["serve", "--config", config, "--listen", `127.0.0.1:${port}`],
        {
          [UPSTREAM_KEY_ENV]: "sk-cli",
        },
      )
      expect(fromFlag.code).toBe(1)
      expect(plainLines(fromFlag.stderr)).toEqual([
        `tollgate: 127.0.0.1:${port} is in use; pass another --listen HOST:PORT`,
      ])
      expect(logLines(fromFlag.stderr).some((line) => line.message === "stopped")).toBe(false)
    } finally {
      server.close()
    }
  })

  it("refuses a --listen that is not HOST:PORT with exit 1", async () => {
    const config = writeConfig(dir, fake.url, "127.0.0.1:0", hashKey(key))
    const result = await runBinary(TOLLGATE, ["serve", "--config", config, "--listen", "8080"], plainEnv)
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("HOST:PORT")
  })
})

describe("tollgate demo", () => {
  const folders: Array<string> = []
  /** A temporary folder of the demo's own (`TMPDIR`), to see what it leaves behind. */
  const demoTmp = () => {
    const folder = tempDir("tollgate-cli-demo-")
    folders.push(folder)
    return folder
  }
  afterAll(() => {
    for (const folder of folders) rmSync(folder, { recursive: true, force: true })
  })

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`leaves no temporary folder after ${signal}`, async () => {
      const tmp = demoTmp()
      const demo = await startBinary(TOLLGATE, ["demo", "--listen", "127.0.0.1:0"], { TMPDIR: tmp })
      try {
        const until = Date.now() + 5_000
        while (!demo.output().includes("Usage records: ") && Date.now() < until)
          await new Promise((resolve) => setTimeout(resolve, 20))
        const usageFile = /Usage records: (\S+)/.exec(demo.output())?.[1]
        expect(usageFile?.startsWith(tmp)).toBe(true)
        expect(readdirSync(tmp)).toHaveLength(1)
        expect(await demo.stop(signal)).toBe(0)
        expect(existsSync(usageFile!)).toBe(false)
        expect(readdirSync(tmp)).toEqual([])
        expect(logLines(demo.output()).filter((line) => line.message === "stopped")).toHaveLength(1)
      } finally {
        await demo.stop("SIGKILL")
      }
    })
  }

  it("on a busy port: one line naming --listen, exit 1, no temporary folder", async () => {
    const tmp = demoTmp()
    const { server, port } = await holdPort()
    try {
      const result = await runBinary(TOLLGATE, ["demo", "--listen", `127.0.0.1:${port}`], { TMPDIR: tmp })
      expect(result.code).toBe(1)
      const lines = plainLines(result.stderr)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(
        new RegExp(`^tollgate: 127\\.0\\.0\\.1:${port} is in use; pass --listen HOST:PORT`),
      )
      expect(readdirSync(tmp)).toEqual([])
    } finally {
      server.close()
    }
  })

  it("the startup summary names the demo's providers, routes and tenant", async () => {
    const demo = await startBinary(TOLLGATE, ["demo", "--listen", "127.0.0.1:0"], { TMPDIR: demoTmp() })
    try {
      const until = Date.now() + 5_000
      while (!demo.output().includes('"message":"ready: ') && Date.now() < until)
        await new Promise((resolve) => setTimeout(resolve, 20))
      expect(
        logLines(demo.output()).find((line) => String(line.message).startsWith("ready: ")),
      ).toMatchObject({
        providers: ["primary", "backup", "openai"],
        routes: ["claude-demo", "gpt-demo"],
        tenants: ["demo"],
        store: "memory",
      })
    } finally {
      await demo.stop("SIGTERM")
    }
  })
})
