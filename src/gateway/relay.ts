import { Effect } from "effect"
import type { ServerResponse } from "node:http"
import type { AttemptResponse } from "./attempt.js"
import type { Deadline, DeadlineHolder, Deadlines, TimeoutKind } from "../reliability/Deadlines.js"
import type { BodyReader, UpstreamError } from "../providers/transport.js"

/** How a committed relay ended. Client disconnects are not here: they interrupt the request fiber. */
export type RelayEnd =
  /** `last`: with `holdLast`, the final chunk, not yet written (the caller ends the response with it). */
  | { readonly _tag: "Complete"; readonly last?: Buffer }
  /** The upstream failed after the first byte: a timeout, a reset, or a body the meter rejected. */
  | { readonly _tag: "UpstreamFailed"; readonly reason: string }
  /** The client did not take data for `timeouts.idle` (a slow client, not the upstream's fault). */
  | { readonly _tag: "ClientStalled" }
  /** The observer asked to pause (the budget cutoff needs a larger reservation); call `relay` again to go on. */
  | { readonly _tag: "Paused" }

const COMPLETE: RelayEnd = { _tag: "Complete" }
const PAUSED: RelayEnd = { _tag: "Paused" }

/** What an observer returns to pause the relay after the current chunk (the upstream stays open). */
export const PAUSE = "pause"

/**
 * Reads a look at each chunk after it was written; returns a reason to stop
 * (malformed SSE, an oversized event, a budget cutoff) or undefined.
 */
export type Observer = (chunk: Buffer) => string | undefined

/**
 * Rewrites the upstream's bytes for the client (a filtered or translated
 * stream): `push` gets each upstream chunk after the observer saw it and
 * returns what to write (undefined: nothing yet); `end` returns what is
 * left once the upstream ended. Plain functions: they run per chunk.
 */
export interface ChunkTransform {
  push(chunk: Buffer): Buffer | undefined
  end(): Buffer | undefined
}

const ignoreResume = (): void => {}

/** A deadline's `expire` while a relay holds it (the sweeper calls the holder instead). */
const expireUnheld = (): void => {}

const endOfTimeout = (kind: TimeoutKind): RelayEnd =>
  kind === "client_write" ? { _tag: "ClientStalled" } : { _tag: "UpstreamFailed", reason: `${kind}_timeout` }

/**
 * Upstream → client after the commit: the pending chunks (not observed
 * again), then every chunk as it arrives, with backpressure (a `false` from
 * `write` pauses the upstream call until `drain`; undici stops reading the
 * socket after the chunk in hand). The relay is the call's `BodyReader`
 * (ADR 0034). Plain callbacks per chunk; one `Effect.callback` for the whole
 * body, whose canceler (interruption: the client left, the drain) stops the
 * relay and aborts the upstream request. The response is not ended here:
 * the caller writes the usage record first.
 *
 * `holdLast` (for bodies that are not event streams) keeps each chunk until
 * the next one arrives, so the last one goes out with the end of the
 * response — headers, body and chunked terminator in one write for the
 * usual one-chunk JSON body, instead of a second syscall after the usage
 * record. A client of a JSON body waits for all of it anyway.
 */
export const relay = (
  deadlines: Deadlines["Service"],
  response: AttemptResponse,
  res: ServerResponse,
  observe: Observer,
  holdLast = false,
  transform?: ChunkTransform,
): Effect.Effect<RelayEnd> =>
  // One relay per call, built here rather than when the effect runs (an `Effect.suspend` stays on the
  // fiber for as long as the stream is open: 140 bytes per stream): run the effect once, where it is made,
  // as both callers in serve.ts do.
  Effect.callback<RelayEnd>(new Relay(deadlines, response, res, observe, holdLast, transform).register)

/**
 * One relay's state and callbacks: the call's `BodyReader` and the deadline's holder in one object, its
 * methods on the prototype, so an open stream holds one object here instead of a closure per callback
 * (issue #21: memory per open stream).
 */
class Relay implements BodyReader, DeadlineHolder {
  private done = false
  private held: Buffer | undefined = undefined
  /** A stream's chunks of this turn, not yet written (ADR 0078): one `write` on the next tick. */
  private readonly batch: Array<Buffer> = []
  private batchBytes = 0
  private flushScheduled = false
  private readonly call: AttemptResponse["call"]
  private readonly deadline: Deadline
  private resume: (effect: Effect.Effect<RelayEnd>) => void = ignoreResume
  /** `Effect.callback`'s registration: takes over the call and the deadline; returns the canceler. */
  readonly register = (
    resume: (effect: Effect.Effect<RelayEnd>) => void,
  ): Effect.Effect<void> | undefined => {
    this.resume = resume
    return this.start()
  }
  /** Interruption (the client left, or the drain): stop relaying and abort the upstream request. */
  private readonly cancel = Effect.sync(() => void this.stop(true))
  /** The next tick's write of `relay`'s chunks of the turn (one function for every relay, handed the relay). */
  private static flushLater(relay: Relay): void {
    relay.flushScheduled = false
    if (relay.batch.length === 0 || relay.done) return
    if (!relay.flush()) {
      relay.call.pause()
      relay.deadline.waitingForClientSince = relay.deadlines.now()
    }
  }
  /** The response's `drain` listener. */
  private readonly onDrain = (): void => {
    const deadline = this.deadline
    deadline.waitingForClientSince = 0
    deadline.lastActivity = this.deadlines.now()
    if (!this.done) this.call.resume()
  }

  constructor(
    private readonly deadlines: Deadlines["Service"],
    private readonly response: AttemptResponse,
    private readonly res: ServerResponse,
    private readonly observe: Observer,
    private readonly holdLast: boolean,
    private readonly transform: ChunkTransform | undefined,
  ) {
    this.call = response.call
    this.deadline = response.deadline
  }

  private start(): Effect.Effect<void> | undefined {
    const { deadline, deadlines, call, res } = this
    if (deadline.expired !== undefined) {
      this.finish(endOfTimeout(deadline.expired), true)
      return undefined
    }
    deadlines.register(deadline)
    deadline.holder = this
    // The attempt's expiry (or a paused relay's) is not called while a holder is set: dropped, so the
    // stream does not keep alive what its closure holds.
    deadline.expire = expireUnheld
    // The pending chunks were already observed by whoever held them (the attempt's meter, or the caller).
    const pending = this.response.pending
    if (pending.length === 1) this.write(pending[0]!, true)
    else if (pending.length > 1) this.writeMany(pending, true)
    pending.length = 0
    res.on("drain", this.onDrain)
    // What arrived since the attempt (or the last relay) paused, then the end or a failure if they came.
    call.attach(this)
    // Waiting for a drain that already came (while the caller extended the reservation): not waiting any more.
    if (deadline.waitingForClientSince !== 0 && !res.writableNeedDrain) deadline.waitingForClientSince = 0
    if (!this.done && deadline.waitingForClientSince === 0) call.resume()
    return this.cancel
  }

  onData(chunk: Buffer): void {
    this.deadline.lastActivity = this.deadlines.now()
    this.write(chunk, false)
  }

  onDataMany(chunks: ReadonlyArray<Buffer>): number {
    this.deadline.lastActivity = this.deadlines.now()
    return this.writeMany(chunks, false)
  }

  onEnd(): void {
    this.finish(this.complete(), false)
  }

  onError(error: UpstreamError): void {
    this.finish({ _tag: "UpstreamFailed", reason: `connection_failed: ${error.code ?? error.message}` }, true)
  }

  /** The sweeper: a deadline passed. */
  expire(kind: TimeoutKind): void {
    this.finish(endOfTimeout(kind), true)
  }

  /** The bytes Tollgate holds for this response (upstream read buffer, client write buffer, a held chunk). */
  buffered(): number {
    return this.call.queuedBytes + this.res.writableLength + (this.held?.length ?? 0) + this.batchBytes
  }

  private stop(close: boolean, keepOpen = false): boolean {
    if (this.done) return false
    // What this turn relayed goes out before anything the caller writes after the relay (or is dropped
    // with a response already gone).
    // A paused relay's next part waits for the client's drain first, as after any full write.
    if (this.batch.length > 0 && !this.flush() && keepOpen) {
      this.deadline.waitingForClientSince = this.deadlines.now()
    }
    this.done = true
    if (!keepOpen) this.deadlines.unregister(this.deadline)
    this.deadline.holder = undefined
    this.call.detach()
    this.res.off("drain", this.onDrain)
    if (close) this.call.close()
    return true
  }

  private finish(end: RelayEnd, close: boolean): void {
    if (this.stop(close)) this.resume(Effect.succeed(end))
  }

  private write(arrived: Buffer, observed: boolean): boolean {
    const reason = observed ? undefined : this.observe(arrived)
    const transform = this.transform
    let chunk: Buffer | undefined = transform === undefined ? arrived : transform.push(arrived)
    if (this.holdLast && chunk !== undefined) {
      const previous = this.held
      this.held = chunk
      chunk = previous
    }
    if (chunk !== undefined) {
      if (this.holdLast) return this.written(this.res.write(chunk), reason)
      this.queue(chunk)
    }
    return this.written(true, reason)
  }

  /**
   * A stream's chunk joins this turn's batch, written once on the next
   * tick (or when the relay stops): the chunks of one upstream read go to
   * the client as one HTTP chunk and one `writev` entry, not three entries
   * each (ADR 0078). Backpressure is then judged once per read.
   */
  private queue(chunk: Buffer): void {
    this.batch.push(chunk)
    this.batchBytes += chunk.length
    if (!this.flushScheduled) {
      this.flushScheduled = true
      process.nextTick(Relay.flushLater, this)
    }
  }

  /**
   * Writes the batch (or drops it, for a response already gone) and empties
   * it, keeping its array for the next read; false when the client's buffer
   * is full.
   */
  private flush(): boolean {
    const batch = this.batch
    const res = this.res
    const data =
      res.destroyed || res.writableEnded
        ? undefined
        : batch.length === 1
          ? batch[0]!
          : Buffer.concat(batch, this.batchBytes)
    batch.length = 0
    this.batchBytes = 0
    return data === undefined || res.write(data)
  }

  /**
   * Several chunks that are all here (what queued while nobody read):
   * observed in order up to the first that asks to stop, then written up
   * to it with one `write` — the client gets the same bytes as from
   * `write` one by one, in one HTTP chunk instead of one each (ADR 0038).
   * Returns how many it took.
   */
  private writeMany(chunks: ReadonlyArray<Buffer>, observed: boolean): number {
    let taken = chunks.length
    let reason: string | undefined
    if (!observed) {
      for (let i = 0; i < chunks.length; i++) {
        reason = this.observe(chunks[i]!)
        if (reason !== undefined) {
          taken = i + 1
          break
        }
      }
    }
    let parts = taken === chunks.length ? chunks : chunks.slice(0, taken)
    const transform = this.transform
    if (transform !== undefined) {
      const out: Array<Buffer> = []
      for (const part of parts) {
        const rewritten = transform.push(part)
        if (rewritten !== undefined) out.push(rewritten)
      }
      parts = out
    }
    if (this.holdLast && parts.length > 0) {
      const last = parts[parts.length - 1]!
      const held = this.held
      parts = held === undefined ? parts.slice(0, -1) : [held, ...parts.slice(0, -1)]
      this.held = last
    }
    if (!this.holdLast) {
      for (const part of parts) this.queue(part)
      this.written(true, reason)
      return taken
    }
    const more = parts.length === 0 || this.res.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts))
    this.written(more, reason)
    return taken
  }

  /** After a write: what the observer asked for, or backpressure. False when the relay stopped. */
  private written(more: boolean, reason: string | undefined): boolean {
    const deadline = this.deadline
    if (reason === PAUSE) {
      this.call.pause()
      // The client's buffer may be full too: the next relay then waits for its drain before reading on.
      if (!more) deadline.waitingForClientSince = this.deadlines.now()
      if (this.stop(false, true)) {
        // Timeouts keep running while the caller extends the reservation; the next relay sees them.
        deadline.expire = (kind) => {
          deadline.expired = kind
        }
        // Interrupted while the caller extends: the attempt's scope closes the paused upstream request.
        this.resume(Effect.succeed(PAUSED))
      }
      return false
    }
    if (reason !== undefined) {
      this.finish({ _tag: "UpstreamFailed", reason }, true)
      return false
    }
    if (!more) {
      this.call.pause()
      deadline.waitingForClientSince = this.deadlines.now()
    }
    return true
  }

  private complete(): RelayEnd {
    const rest = this.transform?.end()
    if (rest !== undefined) {
      if (!this.holdLast) this.queue(rest)
      else this.held = this.held === undefined ? rest : Buffer.concat([this.held, rest])
    }
    if (this.batch.length > 0) this.flush()
    // The body's end came with chunks written in this same turn, still corked until Node's next tick: kept
    // corked, so they leave with the end of the response (after the usage record) in one write instead
    // of two. `res.end()` uncorks the socket fully; a destroyed response drops them with the socket.
    const socket = this.res.socket
    if (!this.holdLast && socket !== null && socket.writableCorked > 0) socket.cork()
    const held = this.held
    return held === undefined ? COMPLETE : { _tag: "Complete", last: held }
  }
}
