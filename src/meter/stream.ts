/**
 * Stream meters: read a copy of each SSE chunk after the relay wrote it to
 * the client, and keep what the gateway needs to know about the stream —
 * usage, failure, in-band error, whether content started, whether it
 * finished, and how much output text went by. Plain synchronous code.
 */
import type { Endpoint } from "../domain/endpoint.js"
import {
  blankLineEnd,
  byteLengthOf,
  EventMeter,
  FastEventMeter,
  isObject,
  nonEmptyString,
  toInbandError,
  type Json,
  type StreamMeter,
} from "./eventMeter.js"
import { ChatFast } from "./openaiFast.js"
import { ResponsesMeter } from "./responses.js"
import { DEFAULT_MAX_EVENT_BYTES } from "./sse.js"
import { anthropicReport, mergeUsage, noteModel, openaiReport } from "./usage.js"

export type { InbandError, StreamFailure, StreamMeter } from "./eventMeter.js"

const DELTA_PREFIX = '{"type":"content_block_delta","index":'
/** The delta shapes of the fast path, each with the one string field that counts as output. */
const DELTA_SHAPES = [
  ',"delta":{"type":"text_delta","text":"',
  ',"delta":{"type":"input_json_delta","partial_json":"',
  ',"delta":{"type":"thinking_delta","thinking":"',
]

/** A backslash or a character JSON does not allow raw in a string. */
const ESCAPE_OR_CONTROL = /[\u0000-\u001f\\]/

/** UTF-8 bytes of the character of one JSON escape (`\n`, `\u00e9`, …) at `at` (its backslash); -1 if invalid or a surrogate. */
const escapeBytes = (data: string, at: number): number => {
  const c = data.charCodeAt(at + 1)
  if (c === 0x75) {
    // \uXXXX
    if (at + 6 > data.length) return -1
    const hex = data.slice(at + 2, at + 6)
    if (!/^[0-9a-fA-F]{4}$/.test(hex)) return -1
    const unit = parseInt(hex, 16)
    if (unit >= 0xd800 && unit <= 0xdfff) return -1
    return unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3
  }
  // \" \\ \/ \b \f \n \r \t
  return c === 0x22 ||
    c === 0x5c ||
    c === 0x2f ||
    c === 0x62 ||
    c === 0x66 ||
    c === 0x6e ||
    c === 0x72 ||
    c === 0x74
    ? 1
    : -1
}

/**
 * The output bytes of an Anthropic `content_block_delta` event in the exact
 * shape Anthropic sends — `{"type":"content_block_delta","index":N,"delta":
 * {"type":"text_delta","text":"…"}}` (or `input_json_delta`/`partial_json`,
 * `thinking_delta`/`thinking`), no whitespace — counted straight from the
 * JSON text: the UTF-8 length of the decoded string, what `JSON.parse` plus
 * `Buffer.byteLength` give. -1 for anything else (other shapes, whitespace,
 * surrogates, invalid JSON): the caller parses it. Most events of a stream
 * are these, and JSON.parse of each was a tenth of a stream's CPU.
 */
export const deltaOutputBytes = (data: string): number => {
  // `indexOf(…) === i` rather than `startsWith`: on the sliced strings the SSE parser hands out, V8's
  // startsWith costs ~120 ns and indexOf ~25 ns. Two characters first, so other events are rejected at once.
  if (data.charCodeAt(23) !== 0x64 || data.charCodeAt(9) !== 0x63 || data.indexOf(DELTA_PREFIX) !== 0)
    return -1
  let i = DELTA_PREFIX.length
  const digits = i
  while (i < data.length && data.charCodeAt(i) >= 0x30 && data.charCodeAt(i) <= 0x39) i++
  const n = i - digits
  if (n === 0 || n > 9 || (n > 1 && data.charCodeAt(digits) === 0x30)) return -1
  let shape = ""
  for (const candidate of DELTA_SHAPES) {
    if (data.indexOf(candidate, i) === i) {
      shape = candidate
      break
    }
  }
  if (shape === "") return -1
  i += shape.length
  const end = data.length
  const close = data.indexOf('"', i)
  if (close < 0) return -1
  // The usual text has no escape and no control character: it is its own decoded value.
  const raw = data.slice(i, close)
  if (!ESCAPE_OR_CONTROL.test(raw)) {
    if (close + 3 !== end || data.charCodeAt(close + 1) !== 0x7d || data.charCodeAt(close + 2) !== 0x7d)
      return -1
    return Buffer.byteLength(raw, "utf8")
  }
  let bytes = 0
  for (; i < end; i++) {
    const c = data.charCodeAt(i)
    if (c === 0x22) break
    if (c === 0x5c) {
      const b = escapeBytes(data, i)
      if (b < 0) return -1
      bytes += b
      i += data.charCodeAt(i + 1) === 0x75 ? 5 : 1
    } else if (c < 0x20) return -1
    else if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdfff) return -1
    else bytes += 3
  }
  // The string's closing quote, then exactly the two closing braces.
  if (i + 3 !== end || data.charCodeAt(i + 1) !== 0x7d || data.charCodeAt(i + 2) !== 0x7d) return -1
  return bytes
}

/** Bytes to find at a position, also as little-endian 32-bit words (the compare reads 4 bytes at a time). */
interface Pattern {
  readonly bytes: Uint8Array
  readonly words: Int32Array
}

const pattern = (text: string): Pattern => {
  const bytes = new Uint8Array(Buffer.from(text))
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const words = new Int32Array(bytes.length >> 2)
  for (let k = 0; k < words.length; k++) words[k] = view.getInt32(k * 4, true)
  return { bytes, words }
}

const DELTA_EVENT_PREFIX = pattern(`event: content_block_delta\ndata: ${DELTA_PREFIX}`)
const DELTA_SHAPE_PATTERNS = DELTA_SHAPES.map(pattern)
const DELTA_EVENT_END = pattern('"}}\n\n')

/** A chunk and a `DataView` of its whole `ArrayBuffer` (the chunk starts at `offset` in it), for `deltaEventEnd`. */
interface Bytes {
  readonly chunk: Uint8Array
  readonly view: DataView
  readonly offset: number
}

/**
 * The view of the last `ArrayBuffer` seen: the chunks of one socket read
 * share theirs, and making a `DataView` is a call into the engine's C++ (the
 * view holds the buffer until the next one replaces it).
 */
let lastView: DataView | undefined

const bytesOf = (chunk: Uint8Array): Bytes => {
  let view = lastView
  if (view === undefined || view.buffer !== chunk.buffer) lastView = view = new DataView(chunk.buffer)
  return { chunk, view, offset: chunk.byteOffset }
}

/**
 * `p` stands in the chunk at `at`. Four bytes at a time through the
 * `DataView`: a byte loop over a `Uint8Array` took twice as long, the
 * native `Buffer#compare` and string routines (`latin1` + `startsWith` or
 * `indexOf`) longer still, for the ~110 bytes of a delta event's frame
 * (micro-benchmark, 50 events: ~3 µs, bytes ~7 µs, `compare` ~9 µs,
 * `startsWith` ~20 µs).
 */
const matchAt = (b: Bytes, at: number, p: Pattern): boolean => {
  const chunk = b.chunk
  const view = b.view
  const bytes = p.bytes
  if (at + bytes.length > chunk.length) return false
  const words = p.words
  const n = words.length
  const base = b.offset + at
  for (let k = 0; k < n; k++) if (view.getInt32(base + k * 4, true) !== words[k]) return false
  for (let k = n * 4; k < bytes.length; k++) if (chunk[at + k] !== bytes[k]) return false
  return true
}

/** Where `deltaEventEnd` leaves the output bytes of the event it matched. */
interface DeltaScan {
  bytes: number
}

/**
 * Matches one whole Anthropic text, JSON or thinking delta event starting at
 * `at` — `event: content_block_delta`, its `data:` line in the shape
 * `deltaOutputBytes` knows, LF line ends, ASCII text without escapes, the
 * blank line — read straight from the bytes, with no string made. Returns
 * the index just past the event, with its output bytes in `out.bytes`, or -1
 * for anything else (the SSE parser then reads it).
 */
const deltaEventEnd = (b: Bytes, at: number, out: DeltaScan): number => {
  if (!matchAt(b, at, DELTA_EVENT_PREFIX)) return -1
  const chunk = b.chunk
  const n = chunk.length
  let i = at + DELTA_EVENT_PREFIX.bytes.length
  const digits = i
  while (i < n && chunk[i]! >= 0x30 && chunk[i]! <= 0x39) i++
  const count = i - digits
  if (count === 0 || count > 9 || (count > 1 && chunk[digits] === 0x30)) return -1
  let shape: Pattern | undefined
  for (let k = 0; k < DELTA_SHAPE_PATTERNS.length; k++) {
    if (matchAt(b, i, DELTA_SHAPE_PATTERNS[k]!)) {
      shape = DELTA_SHAPE_PATTERNS[k]!
      break
    }
  }
  if (shape === undefined) return -1
  i += shape.bytes.length
  const text = i
  // The text: printable ASCII other than `"` and `\` is its own UTF-8 and its own decoded value. Its end is
  // the first `"` (a `"` inside a JSON string is escaped, and an escape declines).
  for (; i < n; i++) {
    const c = chunk[i]!
    if (c === 0x22) break
    if (c < 0x20 || c === 0x5c || c >= 0x7f) return -1
  }
  if (!matchAt(b, i, DELTA_EVENT_END)) return -1
  const end = i + DELTA_EVENT_END.bytes.length
  // An event the parser would refuse as too large is left to the parser, so it fails the same way however
  // the stream is cut into chunks (the margin keeps this independent of how line ends are counted).
  if (end - at > DEFAULT_MAX_EVENT_BYTES - 16) return -1
  out.bytes = i - text
  return end
}

/**
 * The output bytes of a chunk that is exactly one such delta event
 * (`deltaEventEnd`), or -1 for any other chunk.
 */
export const deltaChunkBytes = (chunk: Uint8Array): number => {
  const out = { bytes: 0 }
  return deltaEventEnd(bytesOf(chunk), 0, out) === chunk.length ? out.bytes : -1
}

class AnthropicMeter extends EventMeter {
  private readonly scan: DeltaScan = { bytes: 0 }

  /**
   * Delta events of the common shape are counted from their bytes
   * (`deltaEventEnd`) wherever an event starts; everything else goes to the
   * SSE parser, one event (up to its blank line) at a time, so the parser is
   * between events again when the next delta is looked at.
   */
  override push(chunk: Uint8Array): void {
    const n = chunk.length
    // Made at the first look for a delta event (most chunks of a stream are, or start with, one).
    let bytes: Bytes | undefined
    let at = 0
    while (at < n && this.failure === undefined) {
      if (this.betweenEvents()) {
        bytes ??= bytesOf(chunk)
        const end = deltaEventEnd(bytes, at, this.scan)
        if (end > 0) {
          this.contentStarted = true
          this.outputChars += this.scan.bytes
          at = end
          continue
        }
      }
      const boundary = blankLineEnd(chunk, at)
      const stop = boundary < 0 ? n : boundary
      super.push(at === 0 && stop === n ? chunk : chunk.subarray(at, stop))
      at = stop
    }
  }

  protected override fast(data: string): boolean {
    const bytes = deltaOutputBytes(data)
    if (bytes < 0) return false
    this.contentStarted = true
    this.outputChars += bytes
    return true
  }

  protected fold(event: string, data: unknown): void {
    if (!isObject(data)) return
    const type = typeof data["type"] === "string" ? data["type"] : event
    switch (type) {
      case "content_block_delta": {
        this.contentStarted = true
        const delta = data["delta"]
        if (isObject(delta)) {
          this.outputChars +=
            byteLengthOf(delta["text"]) +
            byteLengthOf(delta["partial_json"]) +
            byteLengthOf(delta["thinking"])
        }
        return
      }
      case "content_block_start": {
        const block = data["content_block"]
        if (!this.contentStarted && isObject(block)) {
          this.contentStarted = !(block["type"] === "text" && !nonEmptyString(block["text"]))
        }
        if (isObject(block)) this.outputChars += byteLengthOf(block["text"])
        return
      }
      case "message_start": {
        const message = data["message"]
        if (isObject(message)) {
          noteModel(this.usage, message["model"])
          this.foldUsage(message["usage"])
        }
        return
      }
      case "message_delta":
        return this.foldUsage(data["usage"])
      case "message_stop":
        this.finished = true
        return
      case "error":
        if (this.inbandError === undefined) this.inbandError = toInbandError(data["error"])
        return
    }
  }

  private foldUsage(usage: unknown): void {
    const report = anthropicReport(usage)
    if (report !== undefined) mergeUsage(this.usage, report)
  }
}

class OpenAIMeter extends FastEventMeter {
  /** `fast`: chunk events are read from their bytes where they can be (`openaiFast.ts`); false: always parsed. */
  constructor(fast: boolean) {
    super(fast ? new ChatFast() : undefined)
  }

  /** Until the stream's model is known, every chunk may name it: those are parsed. */
  protected override fastReady(): boolean {
    return this.usage.model !== undefined
  }

  protected override parse(data: string): unknown {
    return data === "[DONE]" ? DONE : JSON.parse(data)
  }

  protected fold(_event: string, data: unknown): void {
    if (data === DONE) {
      this.finished = true
      return
    }
    if (!isObject(data)) return
    if ("error" in data && data["error"] != null) {
      if (this.inbandError === undefined) this.inbandError = toInbandError(data["error"])
      return
    }
    if (this.usage.model === undefined) noteModel(this.usage, data["model"])
    const choices = data["choices"]
    if (Array.isArray(choices)) {
      for (const choice of choices) if (isObject(choice)) this.foldChoice(choice)
    }
    const report = openaiReport(data["usage"])
    if (report !== undefined) mergeUsage(this.usage, report)
  }

  private foldChoice(choice: Json): void {
    const delta = choice["delta"]
    let started = choice["finish_reason"] != null
    if (isObject(delta)) {
      const content = byteLengthOf(delta["content"])
      const refusal = byteLengthOf(delta["refusal"])
      let toolBytes = 0
      const toolCalls = delta["tool_calls"]
      if (Array.isArray(toolCalls) && toolCalls.length > 0) {
        started = true
        for (const call of toolCalls) {
          if (isObject(call) && isObject(call["function"]))
            toolBytes += byteLengthOf(call["function"]["arguments"])
        }
      }
      if (content > 0 || refusal > 0) started = true
      this.outputChars +=
        content +
        refusal +
        toolBytes +
        byteLengthOf(delta["reasoning_content"]) +
        byteLengthOf(delta["reasoning"])
    }
    if (started) this.contentStarted = true
  }
}

/** The OpenAI end-of-stream sentinel after parsing. */
const DONE: unique symbol = Symbol("[DONE]")

/**
 * Makes a meter for one response stream of `endpoint` (the upstream's: Vertex
 * streams are Messages streams, Ollama's Chat Completions streams).
 */
export const makeStreamMeter = (endpoint: Endpoint, options?: { readonly fast?: boolean }): StreamMeter => {
  const fast = options?.fast !== false
  switch (endpoint) {
    case "/v1/chat/completions":
    case "/v1/embeddings":
      return new OpenAIMeter(fast)
    case "/v1/responses":
      return new ResponsesMeter(fast)
    default:
      return new AnthropicMeter()
  }
}
