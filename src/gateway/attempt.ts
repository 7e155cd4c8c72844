import { Data, Effect } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import type { Dispatcher } from "undici"
import type { TimeoutsConfig } from "../config/model.js"
import type { UpstreamRequest } from "../providers/adapter.js"
import type { Deadline, Deadlines, TimeoutKind } from "./Deadlines.js"

type Body = Dispatcher.ResponseData["body"]

/**
 * An upstream response whose client response has not started. For a 2xx
 * the first body chunk has arrived (headers alone never commit); for other
 * statuses only the headers, and the body is still unread.
 */
export interface AttemptResponse {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Body
  /** Chunks read before the commit (at most the first one). */
  readonly pending: Array<Buffer>
  /** The upstream body already ended. */
  readonly ended: boolean
  /** The attempt's timing state; the relay keeps using it. */
  readonly deadline: Deadline
}

/** Why an attempt produced no response. */
export type AttemptFailureReason = "connect_timeout" | "connection_failed" | TimeoutKind

/** An attempt that ended without a usable upstream response. */
export class AttemptFailed extends Data.TaggedError("AttemptFailed")<{
  readonly reason: AttemptFailureReason
  readonly detail: string
}> {}

const failureOf = (error: Error & { code?: string }): AttemptFailed =>
  error.code === "UND_ERR_CONNECT_TIMEOUT"
    ? new AttemptFailed({ reason: "connect_timeout", detail: "connect timeout" })
    : new AttemptFailed({ reason: "connection_failed", detail: error.code ?? error.message })

/**
 * Sends one attempt and waits for its response head (see `AttemptResponse`).
 * The first-token and total deadlines run from the moment the request is
 * sent; interruption (client gone, or the caller gave up) aborts the
 * upstream request.
 */
export const sendAttempt = (
  deadlines: Deadlines["Type"],
  dispatcher: Dispatcher,
  upstream: UpstreamRequest,
  timeouts: TimeoutsConfig,
  highWaterMark: number,
): Effect.Effect<AttemptResponse, AttemptFailed> =>
  Effect.async<AttemptResponse, AttemptFailed>((resume) => {
    const controller = new AbortController()
    let settled = false
    let body: Body | undefined
    const now = deadlines.now()
    const settle = (result: Effect.Effect<AttemptResponse, AttemptFailed>) => {
      if (settled) return
      settled = true
      resume(result)
    }
    const fail = (failure: AttemptFailed) => {
      if (settled) return
      deadlines.unregister(deadline)
      if (body !== undefined) body.destroy()
      else controller.abort()
      settle(Effect.fail(failure))
    }
    const deadline: Deadline = {
      firstByteBy: now + timeouts.firstTokenMs,
      totalBy: now + timeouts.totalMs,
      idleMs: timeouts.idleMs,
      lastActivity: now,
      waitingForClientSince: 0,
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
        signal: controller.signal,
        highWaterMark,
      },
      (error, data) => {
        if (settled) {
          if (data !== undefined) data.body.destroy()
          return
        }
        if (error !== null) return fail(failureOf(error))
        body = data.body
        const response = (pending: Array<Buffer>, ended: boolean): AttemptResponse => ({
          status: data.statusCode,
          headers: data.headers,
          body: data.body,
          pending,
          ended,
          deadline,
        })
        if (data.statusCode < 200 || data.statusCode >= 300) {
          return settle(Effect.succeed(response([], false)))
        }
        const cleanup = () => {
          data.body.off("data", onData)
          data.body.off("end", onEnd)
          data.body.off("error", onError)
        }
        const onData = (chunk: Buffer) => {
          cleanup()
          data.body.pause()
          deadline.firstByteBy = Infinity
          deadline.lastActivity = deadlines.now()
          settle(Effect.succeed(response([chunk], false)))
        }
        const onEnd = () => {
          cleanup()
          deadline.firstByteBy = Infinity
          settle(Effect.succeed(response([], true)))
        }
        const onError = (e: Error) => {
          cleanup()
          fail(failureOf(e))
        }
        data.body.on("data", onData)
        data.body.on("end", onEnd)
        data.body.on("error", onError)
      },
    )
    return Effect.sync(() => {
      if (settled) return
      settled = true
      deadlines.unregister(deadline)
      if (body !== undefined) body.destroy()
      else controller.abort()
    })
  })
