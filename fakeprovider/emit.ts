/**
 * Writes a generated response body lazily (a million tokens never sit in memory at once), honouring
 * backpressure, `delay:MS` and the `*-after:N-tokens` scenarios.
 */
import type { Chunk, Exchange } from "./exchange.js"
import type { AfterTokens } from "./scenario.js"

/**
 * One piece of a body: a string or bytes (a Bedrock event-stream frame), or a function giving its chunks lazily,
 * for an event that repeats the whole output text (a Responses stream's `response.completed`) or that is made
 * when it is sent (Bedrock's invocation metrics); its chunks go out back to back, one delay for all.
 */
export type Piece = Chunk | (() => Iterable<Chunk>)

/**
 * A response body as pieces: `head`, then `tokens` pieces made by `token(i)`, then `tail`. For a stream each
 * piece is one SSE event; for JSON they are fragments whose concatenation is the document.
 */
export interface BodyPlan {
  readonly head: ReadonlyArray<Piece>
  readonly tokens: number
  readonly token: (index: number) => Chunk
  readonly tail: ReadonlyArray<Piece>
  /** Sent by `malformed-after:N-tokens` before the response ends: not valid JSON in this format. */
  readonly malformed: Chunk
}

/** How to write a body. */
export interface EmitOptions {
  /** Stream: one write per piece with `delayMs` before each; JSON: pieces coalesced into ~16 KiB writes. */
  readonly stream: boolean
  /** Milliseconds before each stream event. Default 0. */
  readonly delayMs?: number
  /** Stop after this many tokens (or after the last token when there are fewer) and hang, reset or corrupt. */
  readonly after?: AfterTokens
}

const coalesceBytes = 16 * 1024

/** Writes `plan` to the exchange and ends the response (unless a scenario hangs or drops it). */
export const emitBody = async (exchange: Exchange, plan: BodyPlan, options: EmitOptions): Promise<void> => {
  const delayMs = options.stream ? (options.delayMs ?? 0) : 0
  let pending: Array<Chunk> = []
  let pendingLength = 0

  const flush = async (): Promise<void> => {
    if (pending.length === 0) return
    const chunk = pending.every((part) => typeof part === "string")
      ? pending.join("")
      : Buffer.concat(pending.map((part) => (typeof part === "string" ? Buffer.from(part, "utf8") : part)))
    pending = []
    pendingLength = 0
    await exchange.write(chunk)
  }
  const putChunk = (chunk: Chunk): Promise<void> | undefined => {
    if (options.stream) return exchange.write(chunk)
    pending.push(chunk)
    pendingLength += chunk.length
    return pendingLength >= coalesceBytes ? flush() : undefined
  }
  const put = async (piece: Piece): Promise<void> => {
    if (options.stream && delayMs > 0) await exchange.sleep(delayMs)
    if (typeof piece !== "function") {
      const wait = putChunk(piece)
      if (wait !== undefined) await wait
      return
    }
    for (const chunk of piece()) {
      if (exchange.closed) return
      const wait = putChunk(chunk)
      if (wait !== undefined) await wait
    }
  }
  const act = async (after: AfterTokens): Promise<void> => {
    await flush()
    if (exchange.closed) return
    switch (after.action) {
      case "hang":
        return exchange.waitClose()
      case "reset":
        return exchange.dropConnection()
      case "malformed":
        if (delayMs > 0) await exchange.sleep(delayMs)
        return exchange.end(plan.malformed)
    }
  }

  for (const piece of plan.head) {
    if (exchange.closed) return
    await put(piece)
  }
  for (let index = 0; index < plan.tokens; index++) {
    if (exchange.closed) return
    if (options.after !== undefined && index === options.after.tokens) return act(options.after)
    await put(plan.token(index))
  }
  if (options.after !== undefined) return act(options.after)
  for (const piece of plan.tail) {
    if (exchange.closed) return
    await put(piece)
  }
  await flush()
  exchange.end()
}
