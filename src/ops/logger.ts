import * as fs from "node:fs"
import { Cause, Context, Duration, Effect, Inspectable, Layer, Logger, LogLevel, References } from "effect"
import type { TargetOutcome } from "../domain/errors.js"
import type { UsageRecord } from "../meter/record.js"
import { isoTime, jsonNullable, jsonNumber, jsonString } from "./jsonText.js"
import { PartialWrite, writeAllSync } from "./writeAll.js"

/**
 * Structured logs on stderr: one JSON object per line —
 * `{"ts":"…","level":"info","message":"…", …annotations}` — or, for a
 * terminal, one readable line (`--log-format pretty`: time, level, message,
 * key=value). Lines written in one event-loop turn leave in one write on the
 * next turn, so logging never costs a synchronous write per line on the
 * request path.
 */

/** How log lines read: `json` (one JSON object per line) or `pretty` (time, level, message, key=value). */
export type LogFormat = "json" | "pretty"

/** The formats, as `--log-format` spells them. */
export const LOG_FORMATS: ReadonlyArray<LogFormat> = ["json", "pretty"]

/**
 * The log format of the fibers that see it (`--log-format`); unset, the
 * log's own default: `pretty` when stderr is a terminal, else `json`.
 */
export const CurrentLogFormat = Context.Reference<LogFormat | undefined>(
  "tollgate/ops/logger/CurrentLogFormat",
  {
    defaultValue: () => undefined,
  },
)

/** Where the lines go. */
export interface LineTarget {
  /** Writes `chunk`; `done` runs once it was handed to the OS (or failed). */
  readonly write: (chunk: string, done: () => void) => void
  /** Bytes accepted but not yet handed to the OS. */
  readonly backlog: () => number
  readonly close: () => void
  /** The lines reach a terminal: the default format is `pretty`, with colors unless `NO_COLOR` is set. */
  readonly isTTY?: boolean
}

/** Largest backlog before new lines are dropped (a stderr nobody reads must not grow memory without end), bytes. */
export const MAX_BACKLOG_BYTES = 8 * 1024 * 1024

/** Longest wait for queued lines at shutdown. */
export const CLOSE_WAIT = Duration.seconds(2)

const ignore = () => {}

/**
 * Writes all of `chunk` to `fd`; a write error drops what is left (there is
 * nowhere left to report it) and returns true when a line was torn, so the
 * next chunk starts on a new line.
 */
const writeLinesSync = (fd: number, chunk: string): boolean => {
  try {
    writeAllSync(fd, chunk)
    return false
  } catch (cause) {
    // stderr is gone or full: the lines are lost, the process goes on
    return cause instanceof PartialWrite && cause.written > 0
  }
}

/** stderr as a `LineTarget`. */
export const stderrTarget = (): LineTarget => {
  let isFile = false
  try {
    isFile = fs.fstatSync(2).isFile()
  } catch {
    // no stderr to inspect: use process.stderr
  }
  if (isFile) {
    // A file: one write(2) per event-loop turn, straight from the loop (~2 µs in the page cache). A
    // thread-pool write would cost a hand-off, a wake-up and a callback each turn (ADR 0030).
    let torn = false
    return {
      write: (chunk, done) => {
        torn = writeLinesSync(2, torn ? "\n" + chunk : chunk)
        done()
      },
      backlog: () => 0,
      close: ignore,
    }
  }
  // A pipe, socket or terminal: Node makes a pipe non-blocking once process.stderr exists, so fs writes
  // would fail with EAGAIN when it is full; process.stderr writes what the pipe takes and queues the rest.
  const stderr = process.stderr
  stderr.on("error", ignore)
  return {
    write: (chunk, done) => void stderr.write(chunk, () => done()),
    backlog: () => stderr.writableLength,
    close: () => stderr.off("error", ignore),
    isTTY: stderr.isTTY === true,
  }
}

/** Collects lines and writes them once per event-loop turn. */
export const makeLineWriter = (target: LineTarget) => {
  let buffer = ""
  let lines = 0
  let dropped = 0
  let scheduled = false
  let closed = false
  let inFlight = 0
  let idle: Array<() => void> = []

  const written = () => {
    inFlight--
    if (inFlight > 0 || buffer !== "") return
    const waiting = idle
    idle = []
    for (const resume of waiting) resume()
  }

  const flush = () => {
    scheduled = false
    if (buffer === "") return
    const chunk = buffer
    buffer = ""
    if (target.backlog() > MAX_BACKLOG_BYTES) {
      dropped += lines
      lines = 0
      return
    }
    lines = 0
    inFlight++
    target.write(chunk, written)
  }

  return {
    /** Queues one line (ending in "\n"); after `close`, writes it at once. */
    write: (line: string): void => {
      if (closed) return target.write(line, ignore)
      buffer += line
      lines++
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    /** Lines dropped since the last call because stderr was not being read. */
    takeDropped: (): number => {
      const n = dropped
      dropped = 0
      return n
    },
    /**
     * Writes what is queued and waits until every write was handed to the OS,
     * at most `CLOSE_WAIT` (a stderr nobody reads must not hold up the exit);
     * later lines go out unbuffered.
     */
    close: Effect.callback<void>((resume) => {
      closed = true
      flush()
      if (inFlight === 0) return resume(Effect.void)
      const done = () => resume(Effect.void)
      idle.push(done)
      return Effect.sync(() => {
        idle = idle.filter((f) => f !== done)
      })
    }).pipe(Effect.timeout(CLOSE_WAIT), Effect.ignore, Effect.ensuring(Effect.sync(target.close))),
  }
}

export type LineWriter = ReturnType<typeof makeLineWriter>

const RESERVED = new Set(["ts", "level", "message"])

const isPlainObject = (u: unknown): u is Record<string, unknown> => {
  if (typeof u !== "object" || u === null) return false
  const proto: unknown = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

const fieldValue = (value: unknown): unknown => {
  switch (typeof value) {
    case "string":
    case "number":
    case "boolean":
    case "undefined":
      return value
    case "bigint":
    case "symbol":
    case "function":
      return String(value)
    default:
      return value === null ? null : Inspectable.toJson(value)
  }
}

const setField = (line: Record<string, unknown>, key: string, value: unknown): void => {
  line[RESERVED.has(key) ? `${key}_` : key] = fieldValue(value)
}

const textOf = (part: unknown): string => {
  if (typeof part === "string") return part
  if (part instanceof Error) return `${part.name}: ${part.message}`
  return Inspectable.toStringUnknown(fieldValue(part), 0)
}

const stringify = (line: Record<string, unknown>): string => {
  try {
    return JSON.stringify(line)
  } catch {
    return JSON.stringify({ ts: line.ts, level: line.level, message: line.message, fields: "unserializable" })
  }
}

/**
 * One log entry as an object: `ts`, `level`, `message`, then the fields —
 * the annotations, and the keys of any plain object among the message parts
 * (`Effect.logInfo("request", { status: 200 })`: fields without the cost of
 * `annotateLogs`, which scopes a new context). Fields never replace
 * ts/level/message (they get a trailing `_`). A cause adds `cause`, log spans
 * `spans`. Annotations and spans are the logging fiber's
 * (`References.CurrentLogAnnotations`, `References.CurrentLogSpans`).
 */
const entryOf = (options: Logger.Options<unknown>): Record<string, unknown> => {
  const line: Record<string, unknown> = {
    ts: isoTime(options.date.getTime()),
    level: options.logLevel.toLowerCase(),
    message: "",
  }
  const { message } = options
  let text = ""
  for (const part of Array.isArray(message) ? message : [message]) {
    if (isPlainObject(part)) {
      for (const key in part) setField(line, key, part[key])
    } else {
      text = text === "" ? textOf(part) : `${text} ${textOf(part)}`
    }
  }
  line.message = text
  const annotations = options.fiber.getRef(References.CurrentLogAnnotations)
  for (const key in annotations) setField(line, key, annotations[key])
  if (options.cause.reasons.length > 0) line.cause = Cause.pretty(options.cause)
  const logSpans = options.fiber.getRef(References.CurrentLogSpans)
  if (logSpans.length > 0) {
    const spans: Record<string, number> = {}
    const now = options.date.getTime()
    for (const [label, startTime] of logSpans) spans[label] = now - startTime
    line.spans = spans
  }
  return line
}

/** One log entry as a JSON line (see `entryOf` for its fields). */
export const formatLine = (options: Logger.Options<unknown>): string => stringify(entryOf(options)) + "\n"

const ESC = "\u001b["

/** The SGR color of each level in the pretty format. */
const LEVEL_COLORS: Readonly<Record<string, string>> = {
  trace: "90",
  debug: "90",
  info: "32",
  warn: "33",
  error: "31",
  fatal: "1;31",
}

const paint = (color: boolean, sgr: string, text: string): string =>
  color ? `${ESC}${sgr}m${text}${ESC}0m` : text

/** Control characters but newline and tab (C0, DEL, C1): escaped in the pretty format, so no text drives the terminal. */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g

const safeText = (text: string): string =>
  text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** A value written bare: one word without quotes, `=`, backslashes or control characters. */
const BARE = /^[^\s"=\\\u0000-\u001f\u007f-\u009f]+$/

const prettyValue = (value: unknown): string => {
  if (typeof value === "string") return BARE.test(value) ? value : safeText(JSON.stringify(value))
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  try {
    return safeText(JSON.stringify(value) ?? String(value))
  } catch {
    return "unserializable"
  }
}

/**
 * A log entry (from `entryOf`) as one line for a terminal:
 * `2026-12-02T10:04:05.935Z WARN  request request_id=0b7c… status=502 …`,
 * then a cause, if any, on the lines below, indented. Null fields are left
 * out; a string with spaces or quotes and any list or object is written as
 * JSON. ANSI colors (dim time and keys, colored level) only with `color`.
 */
export const formatPretty = (entry: Readonly<Record<string, unknown>>, color: boolean): string => {
  const level = String(entry.level)
  let line =
    `${paint(color, "2", String(entry.ts))} ${paint(color, LEVEL_COLORS[level] ?? "0", level.toUpperCase().padEnd(5))}` +
    ` ${safeText(String(entry.message))}`
  let cause = ""
  for (const key in entry) {
    if (RESERVED.has(key)) continue
    const value = entry[key]
    if (value === null || value === undefined) continue
    if (key === "cause" && typeof value === "string") {
      cause = value
      continue
    }
    line += ` ${paint(color, "2", `${key}=`)}${prettyValue(value)}`
  }
  if (cause !== "") line += "\n" + safeText(cause).replace(/^/gm, "  ")
  return line + "\n"
}

/**
 * Colors in the pretty format: only on a terminal, and not when `NO_COLOR`
 * is set to anything non-empty (no-color.org) or `TERM` is `dumb`.
 */
export const useColor = (isTTY: boolean, env: Readonly<Record<string, string | undefined>>): boolean =>
  isTTY && (env["NO_COLOR"] === undefined || env["NO_COLOR"] === "") && env["TERM"] !== "dumb"

/** Where a log writes and how it reads by default. */
export interface LogSink {
  readonly writer: Pick<LineWriter, "write" | "takeDropped">
  /** The format of fibers that set no `CurrentLogFormat`. */
  readonly defaultFormat: LogFormat
  /** ANSI colors in the pretty format. */
  readonly color: boolean
}

const render = (sink: LogSink, format: LogFormat, entry: Readonly<Record<string, unknown>>): string =>
  format === "json" ? stringify(entry as Record<string, unknown>) + "\n" : formatPretty(entry, sink.color)

/** Queues `line`, after a note of the lines dropped while stderr was not being read, if any. */
const emit = (sink: LogSink, format: LogFormat, ms: number, line: string): void => {
  const dropped = sink.writer.takeDropped()
  if (dropped > 0) {
    sink.writer.write(
      render(sink, format, {
        ts: isoTime(ms),
        level: "warn",
        message: "log lines dropped: stderr was not being read",
        dropped,
      }),
    )
  }
  sink.writer.write(line)
}

/**
 * A logger that writes to `sink`, in the logging fiber's `CurrentLogFormat`
 * (else the sink's default), noting lines dropped while stderr was not read.
 */
export const makeLogger = (sink: LogSink) =>
  Logger.make<unknown, void>((options) => {
    const format = options.fiber.getRef(CurrentLogFormat) ?? sink.defaultFormat
    emit(sink, format, options.date.getTime(), render(sink, format, entryOf(options)))
  })

/** A logger that writes JSON lines to `writer` (unless the fiber asks for another format). */
export const makeJsonLogger = (writer: LogSink["writer"]) =>
  makeLogger({ writer, defaultFormat: "json", color: false })

/** The sink of the log while its layer is open: request lines are written to it directly. */
let requestSink: LogSink | undefined

/**
 * Replaces the default logger with lines on `target` (the tracer logger,
 * which adds log lines to the current span, stays); closing the layer
 * flushes them. The default format is `pretty` when the target is a
 * terminal, else `json`; `env` decides colors (`useColor`).
 */
export const layerTo = (
  target: () => LineTarget,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Layer.Layer<never> =>
  Layer.unwrap(
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => {
          const lines = target()
          const isTTY = lines.isTTY === true
          const writer = makeLineWriter(lines)
          const sink: LogSink = {
            writer,
            defaultFormat: isTTY ? "pretty" : "json",
            color: useColor(isTTY, env),
          }
          requestSink = sink
          return { sink, writer }
        }),
        ({ sink, writer }) =>
          Effect.andThen(
            Effect.sync(() => {
              if (requestSink === sink) requestSink = undefined
            }),
            writer.close,
          ),
      ),
      ({ sink }) => Logger.layer([makeLogger(sink), Logger.tracerLogger]),
    ),
  )

/** The log on stderr (`layerTo(stderrTarget)`): the process's log. */
export const layer: Layer.Layer<never> = layerTo(stderrTarget)

/**
 * Errors of a response cut short after its first byte that are nobody's
 * failure upstream: the client left or stopped reading, the budget ran out,
 * the drain ended it.
 */
const NOT_UPSTREAM_CUTS = new Set(["client_disconnected", "client_stalled", "budget_exceeded", "shutdown"])

/**
 * Upstream error answers, relayed, that are the operator's concern rather
 * than the client's request: the provider refused Tollgate's credentials,
 * does not know the configured model, or is out of capacity.
 */
const UPSTREAM_CONCERNS = new Set([
  "upstream_status_401",
  "upstream_status_403",
  "upstream_status_404",
  "upstream_status_429",
])

/**
 * The level of a request's line: `error` for a failure inside Tollgate
 * (`internal_error`); `warn` for any 5xx (a 502 of its own, an upstream 5xx
 * relayed, a 503 refusal), an upstream 401/403/404/429 relayed, and a
 * response the upstream cut short after its first byte; `info` for the rest
 * — 2xx, the 4xx Tollgate answers itself (refusals, bad requests), an
 * upstream's other 4xx (about the client's request), a client that left.
 */
export const requestLevel = (record: UsageRecord): LogLevel.Severity => {
  const error = record.error
  if (error === "internal_error") return "Error"
  if (record.status >= 500) return "Warn"
  if (error === null) return "Info"
  if (UPSTREAM_CONCERNS.has(error)) return "Warn"
  if (record.incomplete && !NOT_UPSTREAM_CUTS.has(error)) return "Warn"
  return "Info"
}

/** The fields of the request line, from its usage record: never a key, a token or a prompt. */
const requestFields = (record: UsageRecord, targets?: ReadonlyArray<TargetOutcome>) => ({
  request_id: record.request_id,
  ...(record.trace_id === null ? {} : { trace_id: record.trace_id }),
  tenant: record.tenant,
  key_id: record.key_id,
  route: record.route,
  provider: record.provider,
  model: record.model,
  attempts: record.attempts,
  status: record.status,
  duration_ms: record.duration_ms,
  cost_micro_usd: record.cost_micro_usd,
  error: record.error,
  ...(targets === undefined ? {} : { targets }),
})

/**
 * The one line per request, through Effect's logger, at `requestLevel`:
 * ids, route, target, attempts, status, duration and cost, and for a 502
 * Tollgate made itself the `targets` of its body (with each `cause`). The
 * fields ride in the message (see `entryOf`), not in `annotateLogs`.
 */
export const logRequest = (
  record: UsageRecord,
  targets?: ReadonlyArray<TargetOutcome>,
): Effect.Effect<void> => Effect.logWithLevel(requestLevel(record))("request", requestFields(record, targets))

/**
 * The request line (`logRequest`), written straight to the log when its
 * layer is open — once per request, so it skips Effect's logger and its
 * per-line work — else through Effect's logger. Like any log line it obeys
 * the fiber's `References.MinimumLogLevel` (`--log-level warn` hides the
 * `info` lines) and `CurrentLogFormat`. `ms`: the time of the line, epoch
 * ms. The log is the process's: while its layer is open, every gateway in
 * the process writes its request lines there, whatever logger its own
 * runtime has (only tests run a gateway under another logger, and they do
 * not open this layer).
 */
export const logRequestLine = (
  record: UsageRecord,
  ms: number,
  targets?: ReadonlyArray<TargetOutcome>,
): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    const level = requestLevel(record)
    if (LogLevel.isGreaterThan(fiber.getRef(References.MinimumLogLevel), level)) return Effect.void
    const sink = requestSink
    if (sink === undefined) return logRequest(record, targets)
    const format = fiber.getRef(CurrentLogFormat) ?? sink.defaultFormat
    const ts = isoTime(ms)
    const name = level.toLowerCase()
    emit(
      sink,
      format,
      ms,
      format === "json"
        ? requestLine(record, ts, name, targets)
        : formatPretty(
            { ts, level: name, message: "request", ...requestFields(record, targets) },
            sink.color,
          ),
    )
    return Effect.void
  })

/**
 * The JSON request line of `r` at `ts`: `JSON.stringify({ ts, level, message: "request", ...fields })` and a
 * newline, `targets` last when given.
 */
export const requestLine = (
  r: UsageRecord,
  ts: string,
  level = "info",
  targets?: ReadonlyArray<TargetOutcome>,
): string =>
  `{"ts":${jsonString(ts)},"level":${jsonString(level)},"message":"request","request_id":${jsonString(r.request_id)}` +
  `${r.trace_id === null ? "" : `,"trace_id":${jsonString(r.trace_id)}`}` +
  `,"tenant":${jsonString(r.tenant)},"key_id":${jsonString(r.key_id)},"route":${jsonString(r.route)}` +
  `,"provider":${jsonNullable(r.provider)},"model":${jsonNullable(r.model)},"attempts":${jsonNumber(r.attempts)}` +
  `,"status":${jsonNumber(r.status)},"duration_ms":${jsonNumber(r.duration_ms)}` +
  `,"cost_micro_usd":${jsonNumber(r.cost_micro_usd)},"error":${jsonNullable(r.error)}` +
  `${targets === undefined ? "" : `,"targets":${JSON.stringify(targets)}`}}\n`
