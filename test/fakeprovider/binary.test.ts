import { spawn } from "node:child_process"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { build } from "esbuild"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let dir: string
let bundle: string

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fakeprovider-"))
  bundle = join(dir, "fakeprovider.mjs")
  await build({
    entryPoints: ["fakeprovider/main.ts"],
    outfile: bundle,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    logLevel: "warning",
  })
})
afterAll(() => rm(dir, { recursive: true, force: true }))

const run = (args: ReadonlyArray<string>): ChildProcessWithoutNullStreams =>
  spawn(process.execPath, [bundle, ...args], { stdio: "pipe" })

/** Collects output until the process exits. */
const finish = (
  child: ChildProcessWithoutNullStreams,
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

/** Resolves with the first stdout line. */
const firstLine = (child: ChildProcessWithoutNullStreams): Promise<string> =>
  new Promise((resolve, reject) => {
    let buffered = ""
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString()
      const end = buffered.indexOf("\n")
      if (end >= 0) {
        child.stdout.off("data", onData)
        resolve(buffered.slice(0, end))
      }
    }
    child.stdout.on("data", onData)
    child.once("exit", (code) => reject(new Error(`exited with ${code} before printing a line`)))
  })

describe("the fakeprovider binary", () => {
  it("prints its listening line with the real port, answers, and exits 0 on SIGTERM", async () => {
    const child = run(["-listen", "127.0.0.1:0", "-scenario", "status:429:7", "--name", "bin"])
    const line = await firstLine(child)
    const match = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(line)
    expect(match).not.toBeNull()
    expect(Number(match?.[2])).toBeGreaterThan(0)
    const response = await fetch(`${match?.[1]}/v1/messages`, { method: "POST", body: "{}" })
    expect(response.status).toBe(429)
    expect(response.headers.get("retry-after")).toBe("7")
    expect(response.headers.get("x-fake-name")).toBe("bin")
    await response.text()
    const exited = finish(child)
    child.kill("SIGTERM")
    expect((await exited).code).toBe(0)
  })

  it("exits 0 on SIGINT while a request hangs", async () => {
    const child = run(["--listen=127.0.0.1:0", "--scenario=hang-before-headers"])
    const url = (await firstLine(child)).replace("listening on ", "")
    const pending = fetch(`${url}/v1/messages`, { method: "POST", body: "{}" }).catch(
      (error: unknown) => error,
    )
    const exited = finish(child)
    for (let count = 0; count === 0;) {
      count = ((await (await fetch(`${url}/_fake/requests`)).json()) as { count: number }).count
    }
    child.kill("SIGINT")
    expect((await exited).code).toBe(0)
    expect(await pending).toBeInstanceOf(Error)
  })

  it("prints usage for --help and exits 0", async () => {
    const result = await finish(run(["--help"]))
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("usage: fakeprovider --listen HOST:PORT")
  })

  it("exits 1 on bad usage: an unknown flag, a bad address, or a scenario that does not parse", async () => {
    for (const args of [
      ["--bogus"],
      ["--listen", "nowhere"],
      ["--listen", "127.0.0.1:0", "--scenario", "explode"],
    ]) {
      const result = await finish(run(args))
      expect(result.code, args.join(" ")).toBe(1)
      expect(result.stderr).toContain("fakeprovider:")
    }
  })
})
