import { Data, Effect } from "effect"
import { EventEmitter } from "node:events"
import type { IncomingHttpHeaders } from "node:http"
import type { Dispatcher } from "undici"
import type { ApiFormat, TimeoutsConfig } from "../config/model.js"
import { makeStreamMeter, type StreamMeter } from "../meter/stream.js"
import type { UpstreamRequest } from "../providers/adapter.js"
import type { Deadline, Deadlines, TimeoutKind } from "./Deadlines.js"

type Body = Dispatcher.ResponseData["body"]

/** Largest stream prelude held back while waiting for the first content, bytes (ADR 0007). */
export const MAX_PRELUDE_BYTES = 64 * 1024

/**
 * An upstream response whose client response has not started. For other
 * statuses than 2xx only the headers have arrived and the body is unread.
 * For a 2xx JSON body the first chunk has arrived (headers alone never
 * commit). For a 2xx event stream the prelude has been read and metered
 * until the first content, an in-band error, a meter failure, 64 KiB, or
 * the end of the stream (ADR 0007).
 */
export interface AttemptResponse {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Body
  /** Chunks read before the commit, not yet written to the client. */
  readonly pending: Array<Buffer>
  /** The meter of a 2xx event stream; it has already read `pending`. */
  readonly meter: StreamMeter | undefined
  /** The upstream body already ended. */
  readonly ended: boolean
  /** The attempt's timing state; the relay keeps using it. */
  readonly deadline: Deadline
}

/**
 * Where an asynchronous step of a request leaves its canceler. The steps are
 * `Effect.async` without a canceler of their own (each one would cost the
 * request fiber four more operations); the request's one finalizer calls
 * what is left here when the fiber is interrupted.
 */
export interface CancelSlot {
  cancel: (() => void) | undefined
}

/** Stops the step `slot` holds a canceler for, if any, and clears the slot. */
export const cancelPending = (slot: CancelSlot): void => {
  const cancel = slot.cancel
  if (cancel === undefined) return
  slot.cancel = undefined
  cancel()
}

/** Why an attempt produced no response. */
export type AttemptFailureReason = "connect_timeout" | "connection_failed" | TimeoutKind

/** An attempt that ended without a usable upstream response. */
export class AttemptFailed extends Data.TaggedError("AttemptFailed")<{
  readonly reason: AttemptFailureReason
  readonly detail: string
}> {}

const ignore = () => {}

/**
 * Closes an upstream response body without reading it. undici's body emits
 * an abort error when destroyed before its end; without a listener that
 * error would crash the process.
 */
export const closeBody = (body: Body): void => {
  body.on("error", ignore)
  body.destroy()
}

const isEventStream = (contentType: string | Array<string> | undefined): boolean =>
  typeof contentType === "string" && contentType.startsWith("text/event-stream")

const failureOf = (error: Error & { code?: string }): AttemptFailed =>
  error.code === "UND_ERR_CONNECT_TIMEOUT"
    ? new AttemptFailed({ reason: "connect_timeout", detail: "connect timeout" })
    : new AttemptFailed({ reason: "connection_failed", detail: error.code ?? error.message })

/**
 * Sends one attempt and waits for its response head (see `AttemptResponse`),
 * or succeeds with `AttemptFailed` when there was none (a value, not an
 * error: the attempt loop branches on it either way, and a failure channel
 * would cost it two more operations per attempt). The first-token and total
 * deadlines run from the moment the request is sent; interruption (client
 * gone, or the caller gave up) aborts the upstream request.
 */
export const sendAttempt = (
  deadlines: Deadlines["Type"],
  dispatcher: Dispatcher,
  upstream: UpstreamRequest,
  timeouts: TimeoutsConfig,
  highWaterMark: number,
  api: ApiFormat,
  slot: CancelSlot,
): Effect.Effect<AttemptResponse | AttemptFailed> =>
  Effect.async<AttemptResponse | AttemptFailed>((resume) => {
    // An EventEmitter is a signal undici accepts; an AbortController allocates an EventTarget per attempt
    // and a DOMException with a stack on abort.
    const signal = new EventEmitter()
    let settled = false
    let body: Body | undefined
    const now = deadlines.now()
    const settle = (result: AttemptResponse | AttemptFailed) => {
      if (settled) return
      settled = true
      slot.cancel = undefined
      resume(Effect.succeed(result))
    }
    const fail = (failure: AttemptFailed) => {
      if (settled) return
      deadlines.unregister(deadline)
      if (body !== undefined) closeBody(body)
      else signal.emit("abort")
      settle(failure)
    }
    const deadline: Deadline = {
      firstByteBy: now + timeouts.firstTokenMs,
      totalBy: now + timeouts.totalMs,
      idleMs: timeouts.idleMs,
      lastActivity: now,
      waitingForClientSince: 0,
      listIndex: -1,
      expire: (kind) => fail(new AttemptFailed({ reason: kind, detail: `${kind} timeout` })),
    }
    deadlines.register(deadline)
    dispatcher.request(
      {
        origin: upstream.origin,
        path: upstream.path,
        method: "POST",
        headers: upstream.headers,
        body: upstream.body,
        signal,
        highWaterMark,
      },
      (error, data) => {
        if (settled) {
          // Already given up on; undici may still call back (with an error, and no body).
          if (error === null && data?.body !== undefined) closeBody(data.body)
          return
        }
        if (error !== null) return fail(failureOf(error))
        body = data.body
        const status = data.statusCode
        const stream = status >= 200 && status < 300 && isEventStream(data.headers["content-type"])
        const meter = stream ? makeStreamMeter(api) : undefined
        const pending: Array<Buffer> = []
        let held = 0
        const respond = (ended: boolean) => {
          cleanup()
          if (!ended) data.body.pause()
          deadline.firstByteBy = Infinity
          deadline.lastActivity = deadlines.now()
          settle({
            status,
            headers: data.headers,
            body: data.body,
            pending,
            meter,
            ended,
            deadline,
          })
        }
        const cleanup = () => {
          data.body.off("data", onData)
          data.body.off("end", onEnd)
          data.body.off("error", onError)
        }
        const onData = (chunk: Buffer) => {
          pending.push(chunk)
          if (meter === undefined) return respond(false)
          meter.push(chunk)
          held += chunk.length
          // first_token ends at the first body byte (SPEC); between prelude events the idle timeout applies,
          // and it fails the attempt before the commit, so the next target can still answer.
          deadline.firstByteBy = Infinity
          deadline.lastActivity = deadlines.now()
          if (meter.contentStarted || meter.inbandError !== undefined || meter.failure !== undefined)
            return respond(false)
          if (held >= MAX_PRELUDE_BYTES) return respond(false)
        }
        const onEnd = () => {
          meter?.end()
          respond(true)
        }
        const onError = (e: Error) => {
          cleanup()
          fail(failureOf(e))
        }
        if (status < 200 || status >= 300) return respond(false)
        data.body.on("data", onData)
        data.body.on("end", onEnd)
        data.body.on("error", onError)
      },
    )
    slot.cancel = () => {
      if (settled) return
      settled = true
      deadlines.unregister(deadline)
      if (body !== undefined) closeBody(body)
      else signal.emit("abort")
    }
  })
