/**
 * What the stream translators share: the push/end contract, the bounded SSE
 * parser in front of each, and the client's bytes collected per push.
 */
import { makeSseParser, type SseParser } from "../../meter/sse.js"
import { anthropicReport, mergeUsage, type UsageAcc } from "../../meter/usage.js"
import { isObject, type Json } from "../wire.js"

/** Translates one upstream SSE stream into the client's stream format. */
export interface StreamTranslator {
  /**
   * Feeds upstream SSE bytes, any chunking; returns the client's bytes to write now (undefined: nothing
   * yet).
   */
  push(chunk: Uint8Array): Buffer | undefined
  /** The upstream stream ended: anything still to write (undefined: nothing). */
  end(): Buffer | undefined
}

/**
 * A translator driven by upstream SSE events. A subclass handles each event
 * and `write`s client text; once it calls `close` (the stream finished or
 * failed in band) every later byte is ignored. Memory: the parser's one
 * pending event plus what the subclass keeps.
 */
export abstract class SseTranslator implements StreamTranslator {
  private readonly parser: SseParser
  private out: Array<string> = []
  private closed = false

  constructor() {
    this.parser = makeSseParser((event, data) => {
      if (!this.closed) this.onEvent(event, data)
    })
  }

  push(chunk: Uint8Array): Buffer | undefined {
    if (!this.closed) this.parser.push(chunk)
    return this.flush()
  }

  end(): Buffer | undefined {
    if (!this.closed) {
      this.parser.end()
      this.onEnd()
      this.closed = true
    }
    return this.flush()
  }

  /** One upstream event (`event` defaults to `message`; `data` is the joined data lines). */
  protected abstract onEvent(event: string, data: string): void

  /** The upstream ended before the translator closed (by default: nothing to add). */
  protected onEnd(): void {}

  /** Queues client bytes for the current push. */
  protected write(text: string): void {
    this.out.push(text)
  }

  /** Nothing more is written after this. */
  protected close(): void {
    this.closed = true
  }

  private flush(): Buffer | undefined {
    if (this.out.length === 0) return undefined
    const bytes = Buffer.from(this.out.length === 1 ? (this.out[0] as string) : this.out.join(""), "utf8")
    this.out = []
    return bytes
  }
}

/** The JSON object of an event's data; undefined for anything else (malformed data is ignored). */
export const eventJson = (data: string): Json | undefined => {
  try {
    const parsed: unknown = JSON.parse(data)
    return isObject(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

/**
 * Adds to `usage` what an Anthropic `message_start` (under `message`) or `message_delta` event reports
 * (nothing when it reports none).
 */
export const addAnthropicUsage = (usage: UsageAcc, event: Readonly<Json>): void => {
  const message = event["message"]
  const source =
    event["type"] === "message_start" ? (isObject(message) ? message["usage"] : undefined) : event["usage"]
  const report = anthropicReport(source)
  if (report !== undefined) mergeUsage(usage, report)
}

/** The `stop_reason` of an Anthropic `message_delta` event (undefined when it has none). */
export const deltaStopReason = (event: Readonly<Json>): unknown => {
  const delta = event["delta"]
  return isObject(delta) ? delta["stop_reason"] : undefined
}

/** An SSE event with a name (Anthropic and Responses streams). */
export const namedEvent = (name: string, data: unknown): string =>
  `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`

/** An SSE event with data only (Chat streams). */
export const dataEvent = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`

/**
 * An SSE comment for an upstream ping: clients ignore it, and it keeps the
 * connection busy while the upstream thinks or waits (the OpenAI formats
 * have no ping event).
 */
export const KEEPALIVE = ": ping\n\n"

/** The end of a Chat stream. */
export const DONE = "data: [DONE]\n\n"
