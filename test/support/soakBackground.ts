import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"
import { ROOT } from "./processes.js"

/** The CI soak's length and rate (test/e2e/soak.test.ts asserts against them). */
export const SOAK_MINUTES = 3
export const SOAK_RATE = 50

/** Where a soak started by this setup writes; the soak test waits for `exitFile`. */
export interface BackgroundSoak {
  readonly out: string
  readonly stdoutFile: string
  readonly stderrFile: string
  readonly exitFile: string
}

declare module "vitest" {
  export interface ProvidedContext {
    soakBackground: BackgroundSoak | null
  }
}

/** The command line of the CI soak, writing into `out`. */
export const soakArgs = (out: string): Array<string> => [
  join(ROOT, "bench/soak.mjs"),
  "--minutes",
  String(SOAK_MINUTES),
  "--rate",
  String(SOAK_RATE),
  "--sample-s",
  "5",
  "--out",
  out,
]

/** True when this vitest run includes test/e2e/soak.test.ts (no file filter, or one that names it). */
const runsSoak = (argv: ReadonlyArray<string>): boolean => {
  const filters = argv.slice(argv.indexOf("run") + 1).filter((arg) => !arg.startsWith("-"))
  return filters.length === 0 || filters.some((filter) => "test/e2e/soak.test.ts".includes(filter))
}

/**
 * Global setup: the 3-minute soak is a test of the script that mostly waits, so it starts here, beside the
 * whole suite (vitest runs test files one at a time on two cores), instead of adding its minutes at the end;
 * test/e2e/soak.test.ts, run last, reads its result.
 */
export default function setup(project: TestProject): () => Promise<void> {
  if (!process.argv.includes("run") || !runsSoak(process.argv)) {
    project.provide("soakBackground", null)
    return async () => {}
  }
  const out = mkdtempSync(join(tmpdir(), "tollgate-soak-ci-"))
  const soak: BackgroundSoak = {
    out,
    stdoutFile: join(out, "stdout.txt"),
    stderrFile: join(out, "stderr.txt"),
    exitFile: join(out, "exit.json"),
  }
  const child = spawn(process.execPath, soakArgs(join(out, "results")), {
    cwd: ROOT,
    stdio: ["ignore", openSync(soak.stdoutFile, "w"), openSync(soak.stderrFile, "w")],
  })
  const exited = new Promise<void>((resolve) =>
    child.on("exit", (code, signal) => {
      writeFileSync(soak.exitFile, JSON.stringify({ code, signal }))
      resolve()
    }),
  )
  project.provide("soakBackground", soak)
  // Teardown: stop a soak still running, then remove its output when it passed (a failed one is kept to read).
  return async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    await exited
    const exit = existsSync(soak.exitFile)
      ? (JSON.parse(readFileSync(soak.exitFile, "utf8")) as { code: number | null })
      : { code: null }
    if (exit.code === 0) rmSync(out, { recursive: true, force: true })
    else process.stderr.write(`the background soak exited ${exit.code}; its output stays in ${out}\n`)
  }
}
