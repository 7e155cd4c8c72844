/**
 * The base of the stream meters (stream.ts, responses.ts): a bounded SSE
 * parser over a copy of each chunk, and the state the relay reads after each
 * push. Plain synchronous code.
 */
import { makeSseParser, type SseParser } from "./sse.js"
import { makeUsageAcc, type UsageAcc } from "./usage.js"

/** Why a meter stopped reading the stream. */
export type StreamFailure = "malformed" | "event_too_large"

/** An error the provider sent inside a stream that had already started. */
export interface InbandError {
  readonly type: string
  readonly message: string
}

/** A meter over one response stream. Its state fields are read by the relay after each push. */
export interface StreamMeter {
  /** Feeds a copy of bytes already written to the client. Never throws. */
  push(chunk: Uint8Array): void
  /** The upstream stream ended. */
  end(): void
  /** Usage folded so far (merge rule in usage.ts). */
  readonly usage: UsageAcc
  /** `malformed`: an event whose data is not JSON; `event_too_large`: an event over 4 MiB. Later events are ignored. */
  readonly failure: StreamFailure | undefined
  /** The first in-band error event (Anthropic `event: error`, OpenAI `data: {"error":…}`, Responses `response.failed` or `error`). */
  readonly inbandError: InbandError | undefined
  /** The model started producing content (text, tool call, refusal, or a finish reason). */
  readonly contentStarted: boolean
  /** The stream ended normally: Anthropic `message_stop`, OpenAI `[DONE]`, Responses `response.completed` or `response.incomplete`. */
  readonly finished: boolean
  /** UTF-8 bytes of generated text, thinking and tool-call JSON seen in deltas (≈ 4 per output token). */
  readonly outputChars: number
  /** Responses: the id of the response (from `response.created`), remembered for `previous_response_id`. */
  readonly responseId: string | undefined
}

export type Json = Record<string, unknown>

export const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const byteLengthOf = (value: unknown): number =>
  typeof value === "string" && value.length > 0 ? Buffer.byteLength(value, "utf8") : 0

export const nonEmptyString = (value: unknown): boolean => typeof value === "string" && value.length > 0

export const toInbandError = (error: unknown): InbandError => {
  if (!isObject(error)) return { type: "api_error", message: typeof error === "string" ? error : "" }
  const type = error["type"] ?? error["code"]
  return {
    type: typeof type === "string" ? type : "api_error",
    message: typeof error["message"] === "string" ? error["message"] : "",
  }
}

/** The index just past the first blank line (`\n\n`) at or after `at`, or -1. */
export const blankLineEnd = (chunk: Uint8Array, at: number): number => {
  for (let i = at + 1; i < chunk.length; i++) {
    if (chunk[i] === 0x0a && chunk[i - 1] === 0x0a) return i + 1
  }
  return -1
}

/** The common part of the stream meters: SSE parsing, failure, and the state the relay reads. */
export abstract class EventMeter implements StreamMeter {
  readonly usage: UsageAcc = makeUsageAcc()
  failure: StreamFailure | undefined = undefined
  inbandError: InbandError | undefined = undefined
  contentStarted = false
  finished = false
  outputChars = 0
  responseId: string | undefined = undefined
  private readonly parser: SseParser

  constructor() {
    this.parser = makeSseParser((event, data) => this.onEvent(event, data))
  }

  /** The parser is between two events (see `SseParser.betweenEvents`). */
  protected betweenEvents(): boolean {
    return this.parser.betweenEvents
  }

  push(chunk: Uint8Array): void {
    this.feed(chunk)
  }

  /** Feeds `chunk` to the SSE parser. */
  private feed(chunk: Uint8Array): void {
    if (this.failure !== undefined) return
    this.parser.push(chunk)
    if (this.parser.failure !== undefined && this.failure === undefined) this.failure = this.parser.failure
  }

  /**
   * Feeds `chunk`, each event that starts while the parser is between events
   * read by `fastEvent` first (a byte-level fast path); what it declines goes
   * to the parser one event (up to its blank line) at a time, so the parser
   * is between events again when the next one is looked at.
   */
  protected pushFast(chunk: Uint8Array): void {
    const n = chunk.length
    let at = 0
    while (at < n && this.failure === undefined) {
      if (this.parser.betweenEvents) {
        const end = this.fastEvent(chunk, at)
        if (end > 0) {
          at = end
          continue
        }
      }
      const boundary = blankLineEnd(chunk, at)
      const stop = boundary < 0 ? n : boundary
      this.feed(at === 0 && stop === n ? chunk : chunk.subarray(at, stop))
      at = stop
    }
  }

  /** Folds the whole event at `at` of `chunk` from its bytes: the index after it, or -1 to leave it to the parser. */
  protected fastEvent(_chunk: Uint8Array, _at: number): number {
    return -1
  }

  end(): void {
    this.parser.end()
  }

  private onEvent(event: string, data: string): void {
    if (this.failure !== undefined) return
    if (this.fast(data)) return
    let parsed: unknown
    try {
      parsed = this.parse(data)
    } catch {
      this.failure = "malformed"
      return
    }
    this.fold(event, parsed)
  }

  /** JSON.parse, with format-specific sentinels; throws on malformed data. */
  protected parse(data: string): unknown {
    return JSON.parse(data)
  }

  protected abstract fold(event: string, data: unknown): void

  /** Folds `data` without JSON.parse when it has a known exact shape; false: parse and fold it. */
  protected fast(_data: string): boolean {
    return false
  }
}

/** A byte-level reader of whole events (`openaiFast.ts`): the end of the event at `at` with what it folds in `out`, or -1. */
export interface FastReader {
  read(chunk: Uint8Array, at: number, out: { bytes: number; started: boolean }): number
}

/**
 * A meter whose common events are read from their bytes by `reader` (no
 * reader: every event is parsed, the reference the fast paths are tested
 * against), output bytes and the start of output folded from what it reads.
 */
export abstract class FastEventMeter extends EventMeter {
  private readonly out = { bytes: 0, started: false }

  constructor(private readonly reader: FastReader | undefined) {
    super()
  }

  override push(chunk: Uint8Array): void {
    if (this.reader === undefined) super.push(chunk)
    else this.pushFast(chunk)
  }

  /** Whether the reader may read the next event (default: always). */
  protected fastReady(): boolean {
    return true
  }

  protected override fastEvent(chunk: Uint8Array, at: number): number {
    if (!this.fastReady()) return -1
    const out = this.out
    const end = this.reader!.read(chunk, at, out)
    if (end < 0) return -1
    this.outputChars += out.bytes
    if (out.started) this.contentStarted = true
    return end
  }
}
