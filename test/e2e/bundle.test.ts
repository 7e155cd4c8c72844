import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync, rmSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import {
  FAKEPROVIDER,
  GATEWAY_UPSTREAM_KEY_ENV,
  startBinary,
  startCommand,
  TOLLGATE,
  writeGatewayConfig,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

describe("bin/tollgate bundle", () => {
  it("turns off V8's allocation-site pretenuring in its first statement, before any module runs (ADR 0032)", () => {
    const lines = readFileSync(TOLLGATE, "utf8").split("\n")
    // The young generation's size and the V8 worker threads must be given at the process's start (ADR 0044,
    // 0067): the shebang carries them.
    expect(lines[0]).toBe("#!/usr/bin/env -S node --max-semi-space-size=16 --v8-pool-size=2")
    // The banner is the first code in the one-module bundle (after the Node version check): nothing of the
    // program has run before it.
    expect(lines[2]).toMatch(
      /^import \{ setFlagsFromString as (\w+) \} from 'node:v8'; \1\("--no-allocation-site-pretenuring"\);$/,
    )
  })

  /** Runs the bundle's first statement (the version check) as if on Node `version`: what it printed and its exit code. */
  const runCheck = (bin: string, version: string) => {
    const check = readFileSync(bin, "utf8").split("\n")[1]!
    let printed = ""
    let code: number | undefined
    const fakeProcess = {
      versions: { node: version },
      stderr: { write: (text: string) => (printed += text) },
      exit: (c: number) => {
        code = c
        throw new Error("exit")
      },
    }
    try {
      new Function("process", check)(fakeProcess)
    } catch (error) {
      if ((error as Error).message !== "exit") throw error
    }
    return { printed, code }
  }

  it.each([
    ["tollgate", TOLLGATE],
    ["fakeprovider", FAKEPROVIDER],
  ])("%s on a Node older than 22.19 prints one line naming the version needed and exits 2", (name, bin) => {
    for (const old of ["20.20.2", "22.18.0", "18.0.0"]) {
      const { printed, code } = runCheck(bin, old)
      expect(code).toBe(2)
      expect(printed).toBe(
        `${name} needs Node.js 22.19 or newer (24 LTS recommended); this is Node.js ${old}\n`,
      )
    }
    for (const ok of ["22.19.0", "23.0.0", "24.21.0", "26.1.0"])
      expect(runCheck(bin, ok)).toEqual({ printed: "", code: undefined })
  })

  it("the npm scripts run on the project's own Node 24", () => {
    expect(process.versions.node.split(".")[0]).toBe("24")
  })

  it("runs as an executable through its `env -S` shebang (ADR 0044); the fake provider keeps the plain one", () => {
    // The npm scripts' PATH has the project's Node 24 first, as `env` finds it.
    const help = execFileSync(TOLLGATE, ["--help"], { encoding: "utf8" })
    expect(help).toContain("serve")
    expect(readFileSync(FAKEPROVIDER, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node")
  })

  it("started through its shebang, the gateway runs two V8 worker threads, not Node's four (ADR 0067)", async () => {
    const dir = tempDir("tollgate-bundle-")
    const fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
    const config = writeGatewayConfig({ dir, upstreamUrl: fake.url, keyHash: hashKey(generateKey()) })
    const gateway = await startCommand(TOLLGATE, ["serve", "--config", config], {
      env: { ...process.env, [GATEWAY_UPSTREAM_KEY_ENV]: "sk-bundle" },
    })
    try {
      // `env -S` execs node in the same process: its threads are the gateway's.
      const pid = gateway.child.pid!
      const names = readdirSync(`/proc/${pid}/task`).map((task) =>
        readFileSync(`/proc/${pid}/task/${task}/comm`, "utf8").trim(),
      )
      expect(names.filter((name) => name === "V8Worker")).toHaveLength(2)
      expect(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")).toContain("--v8-pool-size=2")
    } finally {
      await gateway.stop()
      await fake.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
