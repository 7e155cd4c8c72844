import * as fs from "node:fs"
import { Cause, Duration, Effect, Inspectable, Layer, Logger, References } from "effect"
import type { UsageRecord } from "../meter/record.js"
import { isoTime, jsonNullable, jsonNumber, jsonString } from "./jsonText.js"
import { PartialWrite, writeAllSync } from "./writeAll.js"

/**
 * Structured logs: one JSON object per line on stderr —
 * `{"ts":"…","level":"info","message":"…", …annotations}`. Lines written in
 * one event-loop turn leave in one write on the next turn, so logging never
 * costs a synchronous write per line on the request path.
 */

/** Where the lines go. */
export interface LineTarget {
  /** Writes `chunk`; `done` runs once it was handed to the OS (or failed). */
  readonly write: (chunk: string, done: () => void) => void
  /** Bytes accepted but not yet handed to the OS. */
  readonly backlog: () => number
  readonly close: () => void
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
 * One log entry as a JSON line: `ts`, `level`, `message`, then the fields —
 * the annotations, and the keys of any plain object among the message parts
 * (`Effect.logInfo("request", { status: 200 })`: fields without the cost of
 * `annotateLogs`, which scopes a new context). Fields never replace
 * ts/level/message (they get a trailing `_`). A cause adds `cause`, log spans
 * `spans`. Annotations and spans are the logging fiber's
 * (`References.CurrentLogAnnotations`, `References.CurrentLogSpans`).
 */
export const formatLine = (options: Logger.Options<unknown>): string => {
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
  return stringify(line) + "\n"
}

type JsonLogWriter = Pick<LineWriter, "write" | "takeDropped">

/** Queues `line`, after a note of the lines dropped while stderr was not being read, if any. */
const emit = (writer: JsonLogWriter, ms: number, line: string): void => {
  const dropped = writer.takeDropped()
  if (dropped > 0) {
    writer.write(
      stringify({
        ts: isoTime(ms),
        level: "warn",
        message: "log lines dropped: stderr was not being read",
        dropped,
      }) + "\n",
    )
  }
  writer.write(line)
}

/** A logger that writes JSON lines to `writer`, noting lines dropped while stderr was not read. */
export const makeJsonLogger = (writer: JsonLogWriter) =>
  Logger.make<unknown, void>((options) => emit(writer, options.date.getTime(), formatLine(options)))

/** The writer of the JSON logger while its layer is open: `writeRequestLine` writes to it directly. */
let requestLineWriter: JsonLogWriter | undefined

/**
 * Replaces the default logger with JSON lines on stderr (the tracer logger,
 * which adds log lines to the current span, stays); closing the layer
 * flushes them.
 */
export const layer: Layer.Layer<never> = Layer.unwrap(
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const writer = makeLineWriter(stderrTarget())
        requestLineWriter = writer
        return writer
      }),
      (writer) =>
        Effect.andThen(
          Effect.sync(() => {
            if (requestLineWriter === writer) requestLineWriter = undefined
          }),
          writer.close,
        ),
    ),
    (writer) => Logger.layer([makeJsonLogger(writer), Logger.tracerLogger]),
  ),
)

/** The fields of the request line, from its usage record: never a key, a token or a prompt. */
const requestFields = (record: UsageRecord) => ({
  request_id: record.request_id,
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
})

/**
 * The one info line per request, through Effect's logger: ids, route,
 * target, attempts, status, duration and cost. The fields ride in the
 * message (see `formatLine`), not in `annotateLogs`.
 */
export const logRequest = (record: UsageRecord): Effect.Effect<void> =>
  Effect.logInfo("request", requestFields(record))

/**
 * Writes the request line straight to the JSON log when its layer is open,
 * the same line `logRequest` would (request fibers carry no annotations or
 * spans), and returns true; returns false when another logger is in place
 * (the caller then uses `logRequest`). Once per request, so it skips
 * Effect's logger and its per-line work.
 * `ms`: the time of the line, epoch ms. The JSON log is the process's:
 * while its layer is open, every gateway in the process writes its request
 * lines there, whatever logger its own runtime has (only tests run a
 * gateway under another logger, and they do not open this layer).
 */
export const writeRequestLine = (record: UsageRecord, ms: number): boolean => {
  const writer = requestLineWriter
  if (writer === undefined) return false
  emit(writer, ms, requestLine(record, isoTime(ms)))
  return true
}

/** The request line of `r` at `ts`: `JSON.stringify({ ts, level: "info", message: "request", ...fields })` and a newline. */
export const requestLine = (r: UsageRecord, ts: string): string =>
  `{"ts":${jsonString(ts)},"level":"info","message":"request","request_id":${jsonString(r.request_id)}` +
  `,"tenant":${jsonString(r.tenant)},"key_id":${jsonString(r.key_id)},"route":${jsonString(r.route)}` +
  `,"provider":${jsonNullable(r.provider)},"model":${jsonNullable(r.model)},"attempts":${jsonNumber(r.attempts)}` +
  `,"status":${jsonNumber(r.status)},"duration_ms":${jsonNumber(r.duration_ms)}` +
  `,"cost_micro_usd":${jsonNumber(r.cost_micro_usd)},"error":${jsonNullable(r.error)}}\n`
