import { Effect } from "effect"
import type { ServerResponse } from "node:http"
import type { AttemptResponse } from "./attempt.js"
import type { Deadlines, TimeoutKind } from "../reliability/Deadlines.js"
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
  Effect.callback<RelayEnd>((resume) => {
    const { call, deadline } = response
    let done = false
    let held: Buffer | undefined
    const stop = (close: boolean, keepOpen = false): boolean => {
      if (done) return false
      done = true
      if (!keepOpen) deadlines.unregister(deadline)
      call.detach()
      res.off("drain", onDrain)
      if (close) call.close()
      return true
    }
    const finish = (end: RelayEnd, close: boolean) => {
      if (stop(close)) resume(Effect.succeed(end))
    }
    const write = (arrived: Buffer, observed: boolean): boolean => {
      const reason = observed ? undefined : observe(arrived)
      let chunk: Buffer | undefined = transform === undefined ? arrived : transform.push(arrived)
      if (holdLast && chunk !== undefined) {
        const previous = held
        held = chunk
        chunk = previous
      }
      const more = chunk === undefined || res.write(chunk)
      return written(more, reason)
    }
    /**
     * Several chunks that are all here (what queued while nobody read):
     * observed in order up to the first that asks to stop, then written up
     * to it with one `write` — the client gets the same bytes as from
     * `write` one by one, in one HTTP chunk instead of one each (ADR 0038).
     * Returns how many it took.
     */
    const writeMany = (chunks: ReadonlyArray<Buffer>, observed: boolean): number => {
      let taken = chunks.length
      let reason: string | undefined
      if (!observed) {
        for (let i = 0; i < chunks.length; i++) {
          reason = observe(chunks[i]!)
          if (reason !== undefined) {
            taken = i + 1
            break
          }
        }
      }
      let parts = taken === chunks.length ? chunks : chunks.slice(0, taken)
      if (transform !== undefined) {
        const out: Array<Buffer> = []
        for (const part of parts) {
          const rewritten = transform.push(part)
          if (rewritten !== undefined) out.push(rewritten)
        }
        parts = out
      }
      if (holdLast && parts.length > 0) {
        const last = parts[parts.length - 1]!
        parts = held === undefined ? parts.slice(0, -1) : [held, ...parts.slice(0, -1)]
        held = last
      }
      const more = parts.length === 0 || res.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts))
      written(more, reason)
      return taken
    }
    /** After a write: what the observer asked for, or backpressure. False when the relay stopped. */
    const written = (more: boolean, reason: string | undefined): boolean => {
      if (reason === PAUSE) {
        call.pause()
        // The client's buffer may be full too: the next relay then waits for its drain before reading on.
        if (!more) deadline.waitingForClientSince = deadlines.now()
        if (stop(false, true)) {
          // Timeouts keep running while the caller extends the reservation; the next relay sees them.
          deadline.expire = (kind) => {
            deadline.expired = kind
          }
          // Interrupted while the caller extends: the attempt's scope closes the paused upstream request.
          resume(Effect.succeed(PAUSED))
        }
        return false
      }
      if (reason !== undefined) {
        finish({ _tag: "UpstreamFailed", reason }, true)
        return false
      }
      if (!more) {
        call.pause()
        deadline.waitingForClientSince = deadlines.now()
      }
      return true
    }
    const complete = (): RelayEnd => {
      const rest = transform?.end()
      if (rest !== undefined) {
        if (!holdLast) res.write(rest)
        else held = held === undefined ? rest : Buffer.concat([held, rest])
      }
      return held === undefined ? COMPLETE : { _tag: "Complete", last: held }
    }
    const reader: BodyReader = {
      onData: (chunk) => {
        deadline.lastActivity = deadlines.now()
        write(chunk, false)
      },
      onDataMany: (chunks) => {
        deadline.lastActivity = deadlines.now()
        return writeMany(chunks, false)
      },
      onEnd: () => finish(complete(), false),
      onError: (error: UpstreamError) =>
        finish({ _tag: "UpstreamFailed", reason: `connection_failed: ${error.code ?? error.message}` }, true),
    }
    const onDrain = () => {
      deadline.waitingForClientSince = 0
      deadline.lastActivity = deadlines.now()
      if (!done) call.resume()
    }

    if (deadline.expired !== undefined) return finish(endOfTimeout(deadline.expired), true)
    deadlines.register(deadline)
    deadline.expire = (kind) => finish(endOfTimeout(kind), true)
    deadline.buffered = () => call.queuedBytes + res.writableLength + (held?.length ?? 0)
    // The pending chunks were already observed by whoever held them (the attempt's meter, or the caller).
    const pending = response.pending
    if (pending.length === 1) write(pending[0]!, true)
    else if (pending.length > 1) writeMany(pending, true)
    pending.length = 0
    res.on("drain", onDrain)
    // What arrived since the attempt (or the last relay) paused, then the end or a failure if they came.
    call.attach(reader)
    // Waiting for a drain that already came (while the caller extended the reservation): not waiting any more.
    if (deadline.waitingForClientSince !== 0 && !res.writableNeedDrain) deadline.waitingForClientSince = 0
    if (!done && deadline.waitingForClientSince === 0) call.resume()
    // Interruption (the client left, or the drain): stop relaying and abort the upstream request.
    return Effect.sync(() => void stop(true))
  })
