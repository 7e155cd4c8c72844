/**
 * `bench/soak.mjs` (#21) as a test of the script, not as a benchmark: a 3-minute run at a modest rate against
 * the built binaries and a real redis-server (restarted halfway), then its summary and plots are read back.
 * The RSS slope is not asserted: over 3 minutes it means nothing, and the script itself only judges it over
 * minutes 20–60 of a run of about an hour (bench/lib/soakRule.mjs, held to its figures by soakRule.test.ts).
 */
import { spawn } from "node:child_process"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { afterAll, describe, expect, inject, it } from "vitest"
import { ROOT } from "../support/processes.js"
import { SOAK_MINUTES, SOAK_RATE, soakArgs, type BackgroundSoak } from "../support/soakBackground.js"
import { tempDir } from "../support/tempDirs.js"

const MINUTES = SOAK_MINUTES
const RATE = SOAK_RATE

interface Check {
  readonly pass: boolean | null
  readonly [key: string]: unknown
}

interface Summary {
  readonly minutes: number
  readonly requests: number
  readonly records: number
  readonly answered: number
  readonly spend_equal: boolean
  readonly rss_slope_mb_per_10min: number | null
  readonly rss_peak_mb: number
  readonly fds_start: number
  readonly fds_end: number
  readonly upstream_sockets_end: number
  readonly pass: boolean
  readonly failed: ReadonlyArray<string>
  readonly checks: Record<string, Check>
  readonly store_restart: { readonly atS: number } | null
  readonly client: { readonly connect_failures: number; readonly by_kind: Record<string, number> }
  readonly files: {
    readonly samples_csv: string
    readonly samples_jsonl: string
    readonly plots: ReadonlyArray<string>
  }
}

const runSoak = (out: string): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((done) => {
    const child = spawn(process.execPath, soakArgs(out), { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("exit", (code) => done({ code, stdout, stderr }))
  })

/** The soak the global setup started beside the suite (test/support/soakBackground.ts), once it has exited. */
const backgroundResult = async (
  soak: BackgroundSoak,
): Promise<{ code: number | null; stdout: string; stderr: string }> => {
  const until = Date.now() + 6 * 60_000
  while (!existsSync(soak.exitFile) && Date.now() < until)
    await new Promise((resolve) => setTimeout(resolve, 1_000))
  const exit = existsSync(soak.exitFile)
    ? (JSON.parse(readFileSync(soak.exitFile, "utf8")) as { code: number | null })
    : { code: null }
  return {
    code: exit.code,
    stdout: readFileSync(soak.stdoutFile, "utf8"),
    stderr: readFileSync(soak.stderrFile, "utf8"),
  }
}

describe(`npm run soak (bench/soak.mjs), ${SOAK_MINUTES} minutes at ${SOAK_RATE} req/s`, () => {
  const out = tempDir("tollgate-soak-test-")
  afterAll(() => rmSync(out, { recursive: true, force: true }))

  it(
    "answers every request with one record, keeps spend exact, leaves no descriptor or socket, and draws its plots",
    async () => {
      const background = inject("soakBackground")
      const run = background === null ? await runSoak(out) : await backgroundResult(background)
      const lines = run.stdout.trim().split("\n")
      const last = lines.at(-1) ?? ""
      const match = /^soak summary: (\/.+\/summary\.json)$/.exec(last)
      expect(match, `last line: ${last}\nstderr:\n${run.stderr.slice(-4000)}`).not.toBeNull()
      const summary = JSON.parse(readFileSync(match![1]!, "utf8")) as Summary

      // The fields, with sane types and values.
      expect(summary.minutes).toBe(MINUTES)
      expect(Number.isInteger(summary.requests)).toBe(true)
      // Open loop at RATE for MINUTES, plus the priming requests: within a few percent of the target.
      expect(summary.requests).toBeGreaterThan(MINUTES * 60 * RATE * 0.95)
      expect(summary.requests).toBeLessThan(MINUTES * 60 * RATE * 1.05)
      expect(typeof summary.rss_slope_mb_per_10min).toBe("number")
      expect(summary.rss_peak_mb).toBeGreaterThan(20)
      expect(summary.rss_peak_mb).toBeLessThan(2000)
      expect(summary.fds_start).toBeGreaterThan(5)

      // Every request that reached the gateway has exactly one usage record.
      expect(summary.client.connect_failures).toBe(0)
      expect(summary.records).toBe(summary.requests)
      expect(summary.records).toBe(summary.answered)
      expect(summary.checks.records_equal_answered).toMatchObject({
        pass: true,
        duplicates: 0,
        seen_without_record: 0,
      })
      // Aborted before the headers: the gateway recorded them (499) though the client never saw an id.
      const aborted = summary.checks.records_equal_answered!["aborted_before_headers"] as number
      expect(aborted).toBeGreaterThan(0)
      expect(summary.checks.records_equal_answered!["unseen_records"]).toBe(aborted)

      // Spend: file = usage index = metrics; client-side prices = records for every complete 2xx.
      expect(summary.spend_equal).toBe(true)
      const spend = summary.checks.spend_equal!
      expect(spend["file_micro_usd"]).toBeGreaterThan(0)
      expect(spend["admin_usage_micro_usd"]).toBe(spend["file_micro_usd"])
      expect(spend["metrics_micro_usd"]).toBe(spend["file_micro_usd"])
      expect(summary.checks.client_cost_equal).toMatchObject({ pass: true, mismatches: 0 })
      expect(summary.checks.client_cost_equal!["complete_2xx"]).toBeGreaterThan(summary.requests / 2)
      // The store was restarted halfway, so its month spend is reported, not judged.
      expect(summary.store_restart).not.toBeNull()
      expect(summary.store_restart!.atS).toBeGreaterThan(60)
      expect(summary.checks.store_spend!.pass).toBeNull()

      // Every failure way and both disconnects were sent.
      for (const kind of [
        "429-retry-after",
        "529-overloaded",
        "503-overloaded",
        "500-error",
        "stream-reset",
        "stream-malformed",
        "stream-idle-timeout",
        "slow-first-token",
        "disconnect-mid-stream",
        "disconnect-before-first-token",
      ])
        expect(summary.client.by_kind[kind], kind).toBeGreaterThan(5)

      // No descriptor or upstream socket left once idle.
      expect(summary.fds_end).toBeLessThanOrEqual(summary.fds_start + 4)
      expect(summary.upstream_sockets_end).toBe(0)
      expect(summary.checks.upstream_sockets!["peak_during_load"]).toBeGreaterThan(0)
      expect(summary.checks.gateway_exit).toMatchObject({ pass: true, code: 0 })

      // The slope is not judged over 3 minutes; everything else held, so the script exits 0.
      expect(summary.checks.rss_slope!.pass).toBeNull()
      expect(summary.failed).toEqual([])
      expect(summary.pass).toBe(true)
      expect(run.code).toBe(0)

      // Samples every 5 s over 3 minutes (plus the drain and idle tail), as CSV and JSON lines.
      const csv = readFileSync(summary.files.samples_csv, "utf8").trim().split("\n")
      expect(csv[0]).toContain("rss_mb")
      expect(csv.length).toBeGreaterThan((MINUTES * 60) / 5 - 2)
      const first = JSON.parse(readFileSync(summary.files.samples_jsonl, "utf8").split("\n")[0]!) as Record<
        string,
        unknown
      >
      for (const key of [
        "rss_mb",
        "heap_used_mb",
        "fds",
        "eventloop_p99_ms",
        "upstream_sockets",
        "open_streams",
      ])
        expect(typeof first[key], key).toBe("number")

      // One SVG per series, each a whole SVG document with a line drawn.
      expect(summary.files.plots.map((file) => file.split("/").at(-1)).sort()).toEqual([
        "eventloop.svg",
        "fds.svg",
        "heap.svg",
        "open-streams.svg",
        "request-rate.svg",
        "rss-parts.svg",
        "rss.svg",
        "upstream-sockets.svg",
      ])
      for (const file of summary.files.plots) {
        expect(existsSync(file), file).toBe(true)
        const svg = readFileSync(file, "utf8").trim()
        expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'), file).toBe(true)
        expect(svg.endsWith("</svg>"), file).toBe(true)
        expect(svg, file).toMatch(/<polyline [^>]*points="[\d.]+,[\d.]+ [\d.]+,[\d.]+/)
        // Balanced elements: as many opening tags as closing or self-closed ones.
        const opened = svg.match(/<[a-z]+\b/g)!.length
        const closed = (svg.match(/<\/[a-z]+>/g) ?? []).length + (svg.match(/\/>/g) ?? []).length
        expect(closed, file).toBe(opened)
      }
    },
    6 * 60_000,
  )
})
