/**
 * The byte-level fast paths of the OpenAI-format stream meters (ADR 0075):
 * a whole Chat Completions chunk event (`data: {…}` and a blank line) or a
 * Responses output-delta event (`event: …`, `data: {…}`, a blank line) read
 * from the chunk's bytes with the strict reader of `skim.ts`, folding exactly
 * what `JSON.parse` and the meter's `fold` would, or declining (-1) so the
 * SSE parser and `JSON.parse` read the event as before. Most events of a
 * stream are these, and parsing each was most of an OpenAI stream's CPU.
 */
import { DEFAULT_MAX_EVENT_BYTES } from "./sse.js"
import {
  type Counted,
  type Key,
  names,
  readKey,
  skipNull,
  skipSpace,
  skipString,
  skipValue,
  stringBytes,
} from "./skim.js"

const LF = 0x0a
const QUOTE = 0x22
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d

/** What a fast path leaves of the event it read. */
export interface FastFold {
  /** UTF-8 bytes of output (text, refusal, reasoning, tool-call arguments). */
  bytes: number
  /** The event starts the output. */
  started: boolean
}

const DATA = [0x64, 0x61, 0x74, 0x61, COLON]
const EVENT = [0x65, 0x76, 0x65, 0x6e, 0x74, COLON]

const startsWith = (b: Uint8Array, at: number, word: ReadonlyArray<number>): boolean => {
  for (let k = 0; k < word.length; k++) if (b[at + k] !== word[k]) return false
  return true
}

/** The index of the value of a `data:` line at `at` (after its one optional space), or -1. */
const dataValue = (b: Uint8Array, at: number): number => {
  if (!startsWith(b, at, DATA)) return -1
  at += DATA.length
  return b[at] === 0x20 ? at + 1 : at
}

/**
 * The end of the event whose JSON object ends at `i`: after trailing spaces, the line's LF and the blank
 * line's LF; -1 for anything else (a CR, more lines) or an event the parser would refuse as too large (the
 * margin keeps it independent of how line ends are counted).
 */
const eventEnd = (b: Uint8Array, start: number, i: number): number => {
  if (i < 0) return -1
  i = skipSpace(b, i)
  if (b[i] !== LF || b[i + 1] !== LF) return -1
  if (i + 2 - start > DEFAULT_MAX_EVENT_BYTES - 16) return -1
  return i + 2
}

/** Reads the members of the object at `i` (its `{`), handing each key's index in `known` and its value's index to `member`. */
const readObject = <K>(
  b: Uint8Array,
  i: number,
  known: ReadonlyArray<Uint8Array>,
  reader: Reader<K>,
  kind: K,
): number => {
  if (b[i] !== OPEN_OBJECT) return -1
  i = skipSpace(b, i + 1)
  if (b[i] === CLOSE_OBJECT) return i + 1
  const key = reader.key
  for (;;) {
    if (b[i] !== QUOTE) return -1
    const name = readKey(b, i, known, key)
    if (name < 0) return -1
    i = skipSpace(b, key.end)
    if (b[i] !== COLON) return -1
    i = reader.member(kind, name, skipSpace(b, i + 1))
    if (i < 0) return -1
    i = skipSpace(b, i)
    if (b[i] === CLOSE_OBJECT) return i + 1
    if (b[i] !== COMMA) return -1
    i = skipSpace(b, i + 1)
  }
}

/** Reads the elements of the array at `i` (its `[`), handing each value's index to `element`. */
const readArray = <K>(b: Uint8Array, i: number, reader: Reader<K>, kind: K): number => {
  if (b[i] !== OPEN_ARRAY) return -1
  i = skipSpace(b, i + 1)
  if (b[i] === CLOSE_ARRAY) return i + 1
  for (;;) {
    i = reader.element(kind, i)
    if (i < 0) return -1
    i = skipSpace(b, i)
    if (b[i] === CLOSE_ARRAY) return i + 1
    if (b[i] !== COMMA) return -1
    i = skipSpace(b, i + 1)
  }
}

/** A reader of one event's JSON: what to do with a member or element of each kind of value. Made once per meter. */
interface Reader<K> {
  readonly key: Key
  member(kind: K, name: number, value: number): number
  element(kind: K, value: number): number
}

const CHAT_TOP = names("choices", "usage", "error")
const CHOICES = 0
const USAGE = 1
const CHOICE = names("delta", "finish_reason")
const DELTA = 0
const FINISH = 1
/** `foldChoice`'s delta fields: the counted strings, then `tool_calls`. */
const DELTA_FIELDS = names("content", "refusal", "reasoning_content", "reasoning", "tool_calls")
const CONTENT = 0
const REFUSAL = 1
const TOOL_CALLS = 4
const CALL = names("function")
const FUNCTION = names("arguments")

/** The kinds of value a Chat chunk's reader is in: the chunk (its elements: choices), a choice, a delta (its elements: tool calls), a call, a call's function. */
const Chat = { Top: 0, Choice: 1, Delta: 2, Call: 3, Function: 4 } as const
type Chat = (typeof Chat)[keyof typeof Chat]

/**
 * Reads Chat Completions chunk events as `OpenAIMeter.fold` reads them once
 * the stream's model is known (`read`). One per meter; no allocation per
 * event.
 */
export class ChatFast implements Reader<Chat> {
  readonly key: Key = { end: 0 }
  private readonly counted: Counted = { bytes: 0 }
  private b: Uint8Array = new Uint8Array(0)
  /** Of the last `choices` member (JSON.parse keeps the last of a repeated key). */
  private bytes = 0
  private started = false
  /** The choice's delta fields: each one's last value (`tool_calls`: the sum over its calls). */
  private readonly fields = [0, 0, 0, 0, 0]
  private toolCalls = false
  private finish = false
  /** The current call's last `function`'s arguments. */
  private callBytes = 0

  /**
   * The event at `at`: its end with its output in `out`, or -1 (an `error`
   * member, a `usage` other than null, `choices` that are not an array of
   * objects, a string to count that is not well-formed UTF-8, or anything that is not
   * exactly one `data:` line of strict JSON and a blank line).
   */
  read(b: Uint8Array, at: number, out: FastFold): number {
    let i = dataValue(b, at)
    if (i < 0) return -1
    this.b = b
    this.bytes = 0
    this.started = false
    i = readObject(b, skipSpace(b, i), CHAT_TOP, this, Chat.Top)
    this.b = EMPTY
    const end = eventEnd(b, at, i)
    if (end < 0) return -1
    out.bytes = this.bytes
    out.started = this.started
    return end
  }

  private string(v: number): number {
    if (this.b[v] !== QUOTE) {
      this.counted.bytes = 0
      return skipValue(this.b, v)
    }
    return stringBytes(this.b, v, this.counted)
  }

  member(kind: Chat, name: number, v: number): number {
    const b = this.b
    switch (kind) {
      case Chat.Top:
        if (name === CHOICES) {
          this.bytes = 0
          this.started = false
          return readArray(b, v, this, Chat.Top)
        }
        if (name === USAGE) return skipNull(b, v)
        if (name < CHAT_TOP.length) return -1
        return skipValue(b, v)
      case Chat.Choice:
        if (name === DELTA) {
          this.fields.fill(0)
          this.toolCalls = false
          return b[v] === OPEN_OBJECT ? readObject(b, v, DELTA_FIELDS, this, Chat.Delta) : skipValue(b, v)
        }
        if (name === FINISH) {
          const isNull = skipNull(b, v)
          this.finish = isNull < 0
          return isNull < 0 ? skipValue(b, v) : isNull
        }
        return skipValue(b, v)
      case Chat.Delta:
        if (name === TOOL_CALLS) {
          this.fields[TOOL_CALLS] = 0
          this.toolCalls = false
          return b[v] === OPEN_ARRAY ? readArray(b, v, this, Chat.Delta) : skipValue(b, v)
        }
        if (name < DELTA_FIELDS.length) {
          const end = this.string(v)
          this.fields[name] = this.counted.bytes
          return end
        }
        return skipValue(b, v)
      case Chat.Call:
        if (name !== 0) return skipValue(b, v)
        this.callBytes = 0
        return b[v] === OPEN_OBJECT ? readObject(b, v, FUNCTION, this, Chat.Function) : skipValue(b, v)
      case Chat.Function: {
        if (name !== 0) return skipValue(b, v)
        const end = this.string(v)
        this.callBytes = this.counted.bytes
        return end
      }
    }
  }

  element(kind: Chat, v: number): number {
    const b = this.b
    if (kind === Chat.Top) {
      // A choice.
      if (b[v] !== OPEN_OBJECT) return -1
      this.fields.fill(0)
      this.toolCalls = false
      this.finish = false
      const end = readObject(b, v, CHOICE, this, Chat.Choice)
      if (end < 0) return -1
      const fields = this.fields
      this.bytes += fields[0]! + fields[1]! + fields[2]! + fields[3]! + fields[4]!
      if (this.finish || this.toolCalls || fields[CONTENT]! > 0 || fields[REFUSAL]! > 0) this.started = true
      return end
    }
    // A tool call (any value: a non-empty `tool_calls` starts the output).
    this.toolCalls = true
    if (b[v] !== OPEN_OBJECT) return skipValue(b, v)
    this.callBytes = 0
    const end = readObject(b, v, CALL, this, Chat.Call)
    this.fields[TOOL_CALLS]! += this.callBytes
    return end
  }
}

const EMPTY = new Uint8Array(0)

/** The Responses events whose `delta` is generated output (the meter's, `responses.ts`, too). */
export const OUTPUT_DELTA_TYPES: ReadonlyArray<string> = [
  "response.output_text.delta",
  "response.refusal.delta",
  "response.function_call_arguments.delta",
  "response.reasoning_text.delta",
  "response.reasoning_summary_text.delta",
  "response.custom_tool_call_input.delta",
]
/** The other types `ResponsesMeter.fold` reads something of: those events are parsed. */
const FOLDED_TYPES = [
  "response.created",
  "response.output_item.added",
  "response.completed",
  "response.incomplete",
  "response.failed",
  "error",
]
/** Both, output deltas first; any other type is one the fold does nothing with. */
const TYPES = names(...OUTPUT_DELTA_TYPES, ...FOLDED_TYPES)
const RESPONSE_TOP = names("type", "delta")

/**
 * Reads Responses events (`event:` and `data:` lines, a blank line) as
 * `ResponsesMeter.fold` reads them (`read`): an output delta counts its
 * `delta`, an event of a type the fold does nothing with (`in_progress`,
 * `output_text.done`, `content_part.*`, `output_item.done`, …) is only
 * checked to be JSON; the types the fold reads more of are parsed. One per
 * meter.
 */
export class ResponsesFast implements Reader<0> {
  readonly key: Key = { end: 0 }
  private readonly counted: Counted = { bytes: 0 }
  private readonly typeKey: Key = { end: 0 }
  private b: Uint8Array = EMPTY
  /** The last `type` member: its index in TYPES (TYPES.length: another type), -1 none or not a string. */
  private type = -1
  /** The last `delta` member's output bytes, -1 when it has text this reader does not count. */
  private bytes = 0

  /**
   * The event at `at`: its end with its output in `out`, or -1 (a type the
   * fold reads, a `type` missing or with an escape, a `delta` to count
   * that is not well-formed UTF-8, other lines, or JSON that is not strict).
   */
  read(b: Uint8Array, at: number, out: FastFold): number {
    if (!startsWith(b, at, EVENT)) return -1
    let i = at + EVENT.length
    const n = b.length
    // The event line's value is not read: the data's `type` decides.
    while (i < n && b[i] !== LF) {
      if (b[i] === 0x0d) return -1
      i++
    }
    if (i >= n) return -1
    i = dataValue(b, i + 1)
    if (i < 0) return -1
    this.b = b
    this.type = -1
    this.bytes = 0
    i = readObject(b, skipSpace(b, i), RESPONSE_TOP, this, 0)
    this.b = EMPTY
    const end = eventEnd(b, at, i)
    const type = this.type
    if (end < 0 || type < 0) return -1
    if (type < OUTPUT_DELTA_TYPES.length) {
      if (this.bytes < 0) return -1
      out.bytes = this.bytes
      out.started = true
      return end
    }
    if (type < TYPES.length) return -1
    out.bytes = 0
    out.started = false
    return end
  }

  member(_kind: 0, name: number, v: number): number {
    const b = this.b
    if (name === 0) {
      if (b[v] !== QUOTE) {
        this.type = -1
        return skipValue(b, v)
      }
      const type = readKey(b, v, TYPES, this.typeKey)
      if (type < 0) return -1
      this.type = type
      return this.typeKey.end
    }
    if (name === 1) {
      if (b[v] !== QUOTE) {
        this.bytes = 0
        return skipValue(b, v)
      }
      const end = stringBytes(b, v, this.counted)
      if (end >= 0) {
        this.bytes = this.counted.bytes
        return end
      }
      // Text it does not count: fine for an event whose delta is not output.
      this.bytes = -1
      return skipString(b, v)
    }
    return skipValue(b, v)
  }

  element(_kind: 0, v: number): number {
    return skipValue(this.b, v)
  }
}
