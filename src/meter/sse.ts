/**
 * A bounded Server-Sent-Events parser over raw bytes, for the relay's copy of
 * each chunk. Plain synchronous code: no Effect, no Promise per chunk.
 *
 * Grammar: https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream
 * Lines end with LF, CR or CRLF; CR and LF are never part of a multi-byte
 * UTF-8 sequence, so lines are split on bytes and each finished line is
 * decoded once, whatever chunk boundaries fell inside it.
 */
import { isAscii } from "node:buffer"

/** Largest pending event by default: 4 MiB. */
export const DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024

/** Why a parser stopped. */
export type SseFailure = "event_too_large"

/** A push-driven SSE parser. */
export interface SseParser {
  /** Feeds the next bytes of the stream. Ignored after `end()` or a failure. Never throws by itself. */
  push(chunk: Uint8Array): void
  /** The stream ended; an unfinished event is discarded (as the SSE spec says). */
  end(): void
  /** Set once an event grew past `maxEventBytes`; the parser then ignores all further input. */
  readonly failure: SseFailure | undefined
  /** Raw bytes of the unfinished event: its `data`/`event` lines so far plus the unfinished line. */
  readonly pendingBytes: number
  /** Bytes of memory held: pending data plus the capacity of the line buffer. */
  readonly heldBytes: number
  /**
   * True between events: past the first line, nothing pending (no partial
   * line, no `event`/`data` line of an unfinished event, no CR waiting for its
   * LF, no line of an event counted toward its bound), not ended, not failed.
   * An event that starts here can then be read by someone else without
   * changing what this parser would do next.
   */
  readonly betweenEvents: boolean
}

const LF = 0x0a
const CR = 0x0d
const COLON = 0x3a
const SPACE = 0x20
/** A line buffer larger than this is released after its line was parsed. */
const KEEP_LINE_BUFFER_BYTES = 64 * 1024

const toBuffer = (chunk: Uint8Array): Buffer =>
  Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)

class Parser implements SseParser {
  failure: SseFailure | undefined = undefined
  private ended = false
  /** Bytes of a line that started in an earlier chunk. */
  private line: Buffer | undefined = undefined
  private lineLen = 0
  /** The previous chunk ended with CR: a LF first in the next chunk belongs to it. */
  private skipLF = false
  private firstLine = true
  private eventType = ""
  private data = ""
  private hasData = false
  /** Raw bytes (without line ends) of the `data` and `event` lines of the current event. */
  private retained = 0

  constructor(
    private readonly onEvent: (event: string, data: string) => void,
    private readonly maxEventBytes: number,
  ) {}

  get pendingBytes(): number {
    return this.retained + this.lineLen
  }

  get betweenEvents(): boolean {
    return (
      !this.firstLine &&
      !this.skipLF &&
      this.lineLen === 0 &&
      // An event's lines so far count toward its bound (an `event:` line with no value leaves no other trace).
      this.retained === 0 &&
      !this.hasData &&
      this.eventType === "" &&
      this.failure === undefined &&
      !this.ended
    )
  }

  get heldBytes(): number {
    return this.retained + (this.line === undefined ? 0 : this.line.length)
  }

  push(chunk: Uint8Array): void {
    if (this.failure !== undefined || this.ended) return
    const buf = toBuffer(chunk)
    const len = buf.length
    // An all-ASCII chunk (the common case) is decoded once, when its first whole line is
    // found; its lines are then cheap slices. null: not decided yet.
    let text: string | undefined | null = null
    let pos = 0
    if (this.skipLF && len > 0) {
      this.skipLF = false
      if (buf[0] === LF) pos = 1
    }
    // -2: not searched yet; -1: none left in this chunk.
    let nextLF = -2
    let nextCR = -2
    while (pos < len) {
      if (nextLF !== -1 && nextLF < pos) nextLF = buf.indexOf(LF, pos)
      if (nextCR !== -1 && nextCR < pos) nextCR = buf.indexOf(CR, pos)
      if (nextLF === -1 && nextCR === -1) break
      const eol = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : nextLF < nextCR ? nextLF : nextCR
      if (this.lineLen > 0) {
        if (!this.carry(buf, pos, eol)) return
        const line = this.line as Buffer
        const lineLen = this.lineLen
        this.lineLen = 0
        this.processLine(line, 0, lineLen, undefined)
        if (line.length > KEEP_LINE_BUFFER_BYTES) this.line = undefined
      } else {
        if (text === null) text = isAscii(buf) ? buf.toString("latin1") : undefined
        this.processLine(buf, pos, eol, text)
      }
      if (this.failure !== undefined) return
      if (buf[eol] === CR) {
        if (eol + 1 < len) pos = buf[eol + 1] === LF ? eol + 2 : eol + 1
        else {
          this.skipLF = true
          pos = eol + 1
        }
      } else pos = eol + 1
    }
    if (pos < len) this.carry(buf, pos, len)
  }

  end(): void {
    this.ended = true
    this.release()
  }

  /** Appends bytes of an unfinished line to the line buffer; false (and failure) when over the bound. */
  private carry(buf: Buffer, start: number, end: number): boolean {
    const add = end - start
    const needed = this.lineLen + add
    if (this.retained + needed > this.maxEventBytes) {
      this.fail()
      return false
    }
    let line = this.line
    if (line === undefined || line.length < needed) {
      const size = Math.min(Math.max(needed, 2 * (line?.length ?? 0), 256), this.maxEventBytes)
      const grown = Buffer.allocUnsafe(size)
      if (line !== undefined && this.lineLen > 0) line.copy(grown, 0, 0, this.lineLen)
      this.line = line = grown
    }
    buf.copy(line, this.lineLen, start, end)
    this.lineLen = needed
    return true
  }

  /** `text`, when given, is `buf` decoded (ASCII only, so byte offsets are string offsets). */
  private processLine(buf: Buffer, start: number, end: number, text: string | undefined): void {
    if (this.firstLine) {
      this.firstLine = false
      if (end - start >= 3 && buf[start] === 0xef && buf[start + 1] === 0xbb && buf[start + 2] === 0xbf)
        start += 3
    }
    if (start === end) return this.dispatch()
    const first = buf[start]
    if (first === COLON) return
    let colon = start
    while (colon < end && buf[colon] !== COLON) colon++
    const nameLen = colon - start
    let valueStart = colon < end ? colon + 1 : end
    if (valueStart < end && buf[valueStart] === SPACE) valueStart++
    const isData =
      nameLen === 4 &&
      first === 0x64 &&
      buf[start + 1] === 0x61 &&
      buf[start + 2] === 0x74 &&
      buf[start + 3] === 0x61
    const isEvent =
      !isData &&
      nameLen === 5 &&
      first === 0x65 &&
      buf[start + 1] === 0x76 &&
      buf[start + 2] === 0x65 &&
      buf[start + 3] === 0x6e &&
      buf[start + 4] === 0x74
    if (!isData && !isEvent) return
    if (this.retained + (end - start) > this.maxEventBytes) return this.fail()
    this.retained += end - start
    const valueLen = end - valueStart
    const value =
      valueLen === 0
        ? ""
        : text !== undefined
          ? text.slice(valueStart, end)
          : buf.toString("utf8", valueStart, end)
    if (isEvent) this.eventType = value
    else if (this.hasData) this.data += "\n" + value
    else {
      this.data = value
      this.hasData = true
    }
  }

  private dispatch(): void {
    const hasData = this.hasData
    const type = this.eventType === "" ? "message" : this.eventType
    const data = this.data
    this.eventType = ""
    this.data = ""
    this.hasData = false
    this.retained = 0
    if (hasData) this.onEvent(type, data)
  }

  private fail(): void {
    this.failure = "event_too_large"
    this.release()
  }

  private release(): void {
    this.line = undefined
    this.lineLen = 0
    this.data = ""
    this.eventType = ""
    this.hasData = false
    this.retained = 0
  }
}

/**
 * Makes a parser that calls `onEvent(event, data)` for every dispatched event
 * (`event` defaults to `"message"`; multi-line data joined with "\n").
 * An event whose `data`/`event` lines plus unfinished line (raw bytes, line
 * ends not counted) exceed `maxEventBytes` (default 4 MiB) sets `failure` to `"event_too_large"` and stops the parser; memory
 * then stays bounded and nothing throws.
 */
export const makeSseParser = (
  onEvent: (event: string, data: string) => void,
  maxEventBytes: number = DEFAULT_MAX_EVENT_BYTES,
): SseParser => new Parser(onEvent, maxEventBytes)
