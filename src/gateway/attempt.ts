import { Data, Effect } from "effect"
import type { Dispatcher } from "undici"
import type { ApiFormat, TimeoutsConfig } from "../config/model.js"
import { makeStreamMeter, type StreamMeter } from "../meter/stream.js"
import type { UpstreamRequest } from "../providers/adapter.js"
import type { Deadline, Deadlines, TimeoutKind } from "./Deadlines.js"
import { UpstreamCall, type UpstreamError } from "./upstream.js"

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
  /** The upstream request, with the response's status and headers; its body is read by attaching a reader. */
  readonly call: UpstreamCall
  /** Chunks read before the commit, not yet written to the client. */
  readonly pending: Array<Buffer>
  /** The meter of a 2xx event stream; it has already read `pending`. */
  readonly meter: StreamMeter | undefined
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

/** Closes a response Tollgate will not relay (further): its deadline stops, its request is aborted unless it ended. */
export const closeResponse = (
  deadlines: Deadlines["Service"],
  response: Pick<AttemptResponse, "call" | "deadline">,
) => {
  deadlines.unregister(response.deadline)
  response.call.close()
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

const isEventStream = (contentType: string | Array<string> | undefined): boolean =>
  typeof contentType === "string" && contentType.startsWith("text/event-stream")

const failureOf = (error: UpstreamError): AttemptFailed =>
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
  deadlines: Deadlines["Service"],
  dispatcher: Dispatcher,
  upstream: UpstreamRequest,
  timeouts: TimeoutsConfig,
  api: ApiFormat,
  slot: CancelSlot,
): Effect.Effect<AttemptResponse | AttemptFailed> =>
  Effect.callback<AttemptResponse | AttemptFailed>((resume) => {
    let settled = false
    const now = deadlines.now()
    /** `cancel`: what the request's finalizer closes until the next step takes the response over. */
    const settle = (result: AttemptResponse | AttemptFailed, cancel?: () => void) => {
      if (settled) return
      settled = true
      slot.cancel = cancel
      resume(Effect.succeed(result))
    }
    const close = () => closeResponse(deadlines, { call, deadline })
    const fail = (failure: AttemptFailed) => {
      if (settled) return
      close()
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
    let meter: StreamMeter | undefined
    const pending: Array<Buffer> = []
    let held = 0
    /** The response head arrived: answer at once (not 2xx), or read the first chunk / the stream prelude. */
    const onHead = (call: UpstreamCall) => {
      const status = call.status
      if (status < 200 || status >= 300) return respond()
      if (isEventStream(call.headers["content-type"])) meter = makeStreamMeter(api)
      call.attach(prelude)
    }
    // What arrives until the relay attaches is queued (up to 32 KiB): a body that ends meanwhile leaves the
    // connection reusable, also when the response is discarded.
    const respond = () => {
      call.detach()
      deadline.firstByteBy = Infinity
      deadline.lastActivity = deadlines.now()
      settle({ call, pending, meter, deadline }, close)
    }
    const prelude = {
      onData: (chunk: Buffer) => {
        pending.push(chunk)
        if (meter === undefined) return respond()
        meter.push(chunk)
        held += chunk.length
        // first_token ends at the first body byte (SPEC); between prelude events the idle timeout applies,
        // and it fails the attempt before the commit, so the next target can still answer.
        deadline.firstByteBy = Infinity
        deadline.lastActivity = deadlines.now()
        if (meter.contentStarted || meter.inbandError !== undefined || meter.failure !== undefined)
          return respond()
        if (held >= MAX_PRELUDE_BYTES) return respond()
      },
      onEnd: () => {
        meter?.end()
        respond()
      },
      onError: (error: UpstreamError) => fail(failureOf(error)),
    }
    const call = new UpstreamCall(onHead, (error) => fail(failureOf(error)))
    deadlines.register(deadline)
    slot.cancel = () => {
      if (settled) return
      settled = true
      close()
    }
    dispatcher.dispatch(
      {
        origin: upstream.origin,
        path: upstream.path,
        method: "POST",
        headers: upstream.headers,
        body: upstream.body,
      },
      call,
    )
  })
