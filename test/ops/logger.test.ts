/**
 * The levels of the request lines, the least level they obey, and the
 * pretty format (issue #17 "Diagnostics").
 */
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Logger, References } from "effect"
import type { LogLevel } from "effect"
import { Command } from "effect/cli"
import { describe, expect, it } from "vitest"
import { cliConfigLayer, logLevelFlag, withLogLevel } from "../../src/cli/options.js"
import type { TargetOutcome } from "../../src/domain/errors.js"
import type { UsageRecord } from "../../src/meter/record.js"
import { captureLog } from "../support/logTarget.js"
import {
  CurrentLogFormat,
  formatPretty,
  layerTo,
  logRequestLine,
  requestLevel,
  useColor,
  type LogFormat,
} from "../../src/ops/logger.js"
import { sampleRecord } from "../meter/fixtures.js"

const MS = Date.parse("2026-12-02T10:04:05.935Z")

const REFUSED: ReadonlyArray<TargetOutcome> = [
  {
    provider: "anthropic",
    model: "claude-sonnet-5-5",
    outcome: "failed",
    reason: "connection_failed",
    cause: "connect ECONNREFUSED 127.0.0.1:9",
  },
]

const bad502 = sampleRecord({
  status: 502,
  error: "no_upstream_response",
  provider: "anthropic",
  cost_micro_usd: 0,
})

interface Run {
  readonly isTTY?: boolean
  readonly env?: Readonly<Record<string, string | undefined>>
  readonly minimum?: LogLevel.LogLevel
  readonly format?: LogFormat
}

/** What `effect` writes to a log layer on a captured target (the layer flushes when it closes). */
const written = async (effect: Effect.Effect<void>, run: Run = {}): Promise<string> => {
  const { target, text } = captureLog(run.isTTY ?? false)
  let program = effect.pipe(Effect.provideService(References.MinimumLogLevel, run.minimum ?? "Info"))
  if (run.format !== undefined) program = program.pipe(Effect.provideService(CurrentLogFormat, run.format))
  await Effect.runPromise(program.pipe(Effect.provide(layerTo(() => target, run.env ?? {}))))
  return text()
}

const jsonLines = (text: string) =>
  text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>)

describe("the level of a request line", () => {
  const cases: Array<[string, Partial<UsageRecord>, LogLevel.Severity]> = [
    ["a 2xx", { status: 200 }, "Info"],
    ["a 2xx served after a retry", { status: 200, attempts: 3 }, "Info"],
    ["Tollgate's 400", { status: 400, error: "invalid_request", attempts: 0 }, "Info"],
    ["Tollgate's 401", { status: 401, error: "unauthenticated", attempts: 0 }, "Info"],
    ["Tollgate's 404", { status: 404, error: "route_not_found", attempts: 0 }, "Info"],
    ["Tollgate's 429", { status: 429, error: "rate_limited", attempts: 0 }, "Info"],
    ["Tollgate's 402", { status: 402, error: "budget_exceeded", attempts: 0 }, "Info"],
    ["a client that left", { status: 499, error: "client_disconnected" }, "Info"],
    ["an upstream 400 relayed (the client's request)", { status: 400, error: "upstream_status_400" }, "Info"],
    [
      "an upstream 401 relayed (Tollgate's credentials)",
      { status: 401, error: "upstream_status_401" },
      "Warn",
    ],
    ["an upstream 429 relayed", { status: 429, error: "upstream_status_429" }, "Warn"],
    ["a 502 of Tollgate's own", { status: 502, error: "no_upstream_response" }, "Warn"],
    ["all targets blocked", { status: 502, error: "all_targets_blocked", attempts: 0 }, "Warn"],
    ["an upstream 503 relayed", { status: 503, error: "upstream_status_503" }, "Warn"],
    ["an upstream 500 relayed", { status: 500, error: "upstream_status_500" }, "Warn"],
    ["a 503 refusal (the drain)", { status: 503, error: "draining", attempts: 0 }, "Warn"],
    ["a stream the upstream cut", { status: 200, incomplete: true, error: "idle_timeout" }, "Warn"],
    ["a stream the client stalled", { status: 200, incomplete: true, error: "client_stalled" }, "Info"],
    ["a stream the budget cut", { status: 200, incomplete: true, error: "budget_exceeded" }, "Info"],
    ["a failure inside Tollgate", { status: 500, error: "internal_error", attempts: 0 }, "Error"],
    [
      "a failure inside Tollgate mid-stream",
      { status: 200, incomplete: true, error: "internal_error" },
      "Error",
    ],
  ]
  it.each(cases)("%s", (_name, over, level) => {
    expect(requestLevel(sampleRecord(over))).toBe(level)
  })
})

describe("the request line", () => {
  it("is written at its level, with the targets and causes of a 502", async () => {
    const text = await written(
      Effect.andThen(logRequestLine(sampleRecord(), MS), logRequestLine(bad502, MS, REFUSED)),
    )
    const lines = jsonLines(text)
    expect(lines.map((line) => line.level)).toEqual(["info", "warn"])
    expect(lines[0]).not.toHaveProperty("targets")
    expect(lines[1]).toEqual({
      ts: "2026-12-02T10:04:05.935Z",
      level: "warn",
      message: "request",
      request_id: "req_1",
      trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
      tenant: "acme",
      key_id: "ci",
      route: "claude-sonnet",
      provider: "anthropic",
      model: "claude-sonnet-5-5",
      attempts: 2,
      status: 502,
      duration_ms: 812,
      cost_micro_usd: 0,
      error: "no_upstream_response",
      targets: REFUSED,
    })
  })

  it("obeys the least level: warn hides the info lines, error hides the warn ones", async () => {
    const all = Effect.andThen(
      Effect.andThen(logRequestLine(sampleRecord(), MS), logRequestLine(bad502, MS, REFUSED)),
      logRequestLine(sampleRecord({ status: 500, error: "internal_error" }), MS),
    )
    expect(jsonLines(await written(all, { minimum: "Warn" })).map((l) => l.level)).toEqual(["warn", "error"])
    expect(jsonLines(await written(all, { minimum: "Error" })).map((l) => l.level)).toEqual(["error"])
    expect(await written(all, { minimum: "None" })).toBe("")
  })

  it("without the log layer, goes through Effect's logger at the same level, with the same fields", async () => {
    const seen: Array<{ level: string; message: unknown }> = []
    const logger = Logger.make<unknown, void>(
      ({ logLevel, message }) => void seen.push({ level: logLevel, message }),
    )
    await Effect.runPromise(
      Effect.andThen(logRequestLine(sampleRecord(), MS), logRequestLine(bad502, MS, REFUSED)).pipe(
        Effect.provideService(References.MinimumLogLevel, "Warn"),
        Effect.provide(Logger.layer([logger])),
      ),
    )
    expect(seen).toEqual([
      {
        level: "Warn",
        message: ["request", expect.objectContaining({ status: 502, targets: REFUSED })],
      },
    ])
  })
})

const ANSI = /\u001b\[/

describe("the pretty format", () => {
  it("is time, level, message and key=value, without nulls, quoting what is not one word", () => {
    const line = formatPretty(
      {
        ts: "2026-12-02T10:04:05.935Z",
        level: "warn",
        message: "request",
        status: 502,
        error: null,
        route: "claude sonnet",
        stream: true,
        targets: [{ cause: "connect ECONNREFUSED 127.0.0.1:9" }],
      },
      false,
    )
    expect(line).toBe(
      '2026-12-02T10:04:05.935Z WARN  request status=502 route="claude sonnet" stream=true' +
        ' targets=[{"cause":"connect ECONNREFUSED 127.0.0.1:9"}]\n',
    )
  })

  it("puts a cause on the lines below, indented, and escapes control characters", () => {
    const line = formatPretty(
      { ts: "t", level: "error", message: "boom \u001b[2J", cause: "Error: x\n    at y", v: "a\u0007b" },
      false,
    )
    expect(line).toBe('t ERROR boom \\u001b[2J v="a\\u0007b"\n  Error: x\n      at y\n')
    expect(line).not.toMatch(ANSI)
  })

  it("colors a terminal's lines unless NO_COLOR is set or TERM is dumb", () => {
    expect(useColor(true, {})).toBe(true)
    expect(useColor(true, { NO_COLOR: "1" })).toBe(false)
    expect(useColor(true, { NO_COLOR: "" })).toBe(true)
    expect(useColor(true, { TERM: "dumb" })).toBe(false)
    expect(useColor(false, {})).toBe(false)
  })

  it("is the default on a terminal (colored, or plain under NO_COLOR); JSON is the default elsewhere", async () => {
    const effect = Effect.andThen(
      Effect.logWarning("store slow", { ms: 12 }),
      logRequestLine(bad502, MS, REFUSED),
    )
    const tty = await written(effect, { isTTY: true })
    expect(tty).toMatch(ANSI)
    expect(tty.replace(/\u001b\[[0-9;]*m/g, "")).toMatch(
      /^\S+Z WARN {2}store slow ms=12\n\S+Z WARN {2}request /,
    )

    const noColor = await written(effect, { isTTY: true, env: { NO_COLOR: "1" } })
    expect(noColor).not.toMatch(ANSI)
    const [first, second] = noColor.split("\n")
    expect(first).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN {2}store slow ms=12$/)
    expect(second).toBe(
      "2026-12-02T10:04:05.935Z WARN  request request_id=req_1 trace_id=4bf92f3577b34da6a3ce929d0e0e4736" +
        " tenant=acme key_id=ci route=claude-sonnet" +
        " provider=anthropic model=claude-sonnet-5-5 attempts=2 status=502 duration_ms=812 cost_micro_usd=0" +
        ` error=no_upstream_response targets=${JSON.stringify(REFUSED)}`,
    )

    expect(jsonLines(await written(effect)).map((l) => l.message)).toEqual(["store slow", "request"])
  })

  it("is chosen by CurrentLogFormat (--log-format) over the default, without colors off a terminal", async () => {
    const effect = Effect.andThen(Effect.logInfo("hello"), logRequestLine(sampleRecord(), MS))
    const pretty = await written(effect, { format: "pretty" })
    expect(pretty).not.toMatch(ANSI)
    expect(pretty).toMatch(/^\S+Z INFO {2}hello\n\S+Z INFO {2}request request_id=req_1 /)
    expect(jsonLines(await written(effect, { isTTY: true, format: "json" })).map((l) => l.level)).toEqual([
      "info",
      "info",
    ])
  })
})

describe("--log-level", () => {
  /** The least log level a subcommand of a `withLogLevel` root sees, run with `args` under `cliConfigLayer`. */
  const leastLevelWith = (args: ReadonlyArray<string>) => {
    let seen: LogLevel.LogLevel | undefined
    const probe = Command.make("probe", {}, () =>
      Effect.withFiber((fiber) => Effect.sync(() => void (seen = fiber.getRef(References.MinimumLogLevel)))),
    )
    const root = Command.make("tg").pipe(Command.withSubcommands([probe]), withLogLevel)
    return Effect.runPromise(
      Command.runWith(root, { version: "test" })(args).pipe(
        Effect.provide(Layer.mergeAll(NodeServices.layer, cliConfigLayer)),
      ),
    ).then(() => seen)
  }

  it("takes the levels as the log spells them, and warning for warn", async () => {
    expect(await leastLevelWith(["probe"])).toBe("Info")
    expect(await leastLevelWith(["probe", "--log-level", "warn"])).toBe("Warn")
    expect(await leastLevelWith(["probe", "--log-level", "warning"])).toBe("Warn")
    expect(await leastLevelWith(["--log-level", "error", "probe"])).toBe("Error")
    expect(await leastLevelWith(["probe", "--log-level", "none"])).toBe("None")
  })

  it("names each level once in help: warn, not warning", () => {
    const doc = logLevelFlag.flag
    const description = JSON.stringify(doc)
    expect(description).toContain("info, warn, error")
    expect(description).not.toContain("warning")
  })
})
