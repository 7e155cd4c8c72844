import { Data, Effect } from "effect"
import type { Scope } from "effect"
import type { TimeoutsConfig } from "../config/model.js"
import type { Endpoint } from "../domain/endpoint.js"
import type { Meter } from "../meter/Meter.js"
import type { StreamMeter } from "../meter/stream.js"
import type { ProviderClient } from "../providers/ProviderClient.js"
import type { Breakers, Outcome, Permit } from "../reliability/Breakers.js"
import type { Deadline, Deadlines, TimeoutKind } from "../reliability/Deadlines.js"
import {
  describeUpstreamError,
  isConnectTimeout,
  UpstreamCall,
  type UpstreamError,
  type UpstreamRequest,
} from "../providers/transport.js"

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
  /** The API endpoint the attempt called: how its body reads. */
  readonly endpoint: Endpoint
  /** The upstream request, with the response's status and headers; its body is read by attaching a reader. */
  readonly call: UpstreamCall
  /** Chunks read before the commit, not yet written to the client. */
  readonly pending: Array<Buffer>
  /** The meter of a 2xx event stream; it has already read `pending`. */
  readonly meter: StreamMeter | undefined
  /** The attempt's timing state; the relay keeps using it. */
  readonly deadline: Deadline
}

/** Closes a response Tollgate will not relay (further): its deadline stops, its request is aborted unless it ended. */
export const closeResponse = (
  deadlines: Deadlines["Service"],
  response: Pick<AttemptResponse, "call" | "deadline">,
) => {
  deadlines.unregister(response.deadline)
  response.call.close()
}

/** The services an attempt uses. */
export interface AttemptEnv {
  readonly deadlines: Deadlines["Service"]
  readonly meters: Meter["Service"]
}

/** Why an attempt produced no response. */
export type AttemptFailureReason = "connect_timeout" | "connection_failed" | TimeoutKind

/** An attempt that ended without a usable upstream response. */
export class AttemptFailed extends Data.TaggedError("AttemptFailed")<{
  /** The stable code (the 502's `targets[].reason`). */
  readonly reason: AttemptFailureReason
  /**
   * The low-level cause, for operators (the 502's `targets[].cause` and the
   * log): `connect ECONNREFUSED 127.0.0.1:9`, `first_token timeout after
   * 60000 ms` (see `describeUpstreamError`; never headers or keys).
   */
  readonly detail: string
}> {}

const isEventStream = (contentType: string | Array<string> | undefined): boolean =>
  typeof contentType === "string" && contentType.startsWith("text/event-stream")

const failureOf = (error: UpstreamError, connectMs: number): AttemptFailed =>
  new AttemptFailed({
    reason: isConnectTimeout(error) ? "connect_timeout" : "connection_failed",
    detail: describeUpstreamError(error, connectMs),
  })

/** The cause of a deadline that passed before the response head (or the end of a stream prelude). */
const timeoutDetail = (kind: TimeoutKind, timeouts: TimeoutsConfig): string => {
  const ms =
    kind === "first_token" ? timeouts.firstTokenMs : kind === "idle" ? timeouts.idleMs : timeouts.totalMs
  return kind === "client_write" ? "client_write timeout" : `${kind} timeout after ${ms} ms`
}

/**
 * What one attempt holds, released by its scope's one finalizer: the
 * response (closed — unread when it was discarded) and the breaker permit
 * (reported "neutral" unless a result was reported). Both are set
 * synchronously the moment they exist, so no interruption falls between
 * getting one and its release being in place.
 */
export class AttemptHold {
  response: AttemptResponse | undefined = undefined
  private permit: Permit | undefined = undefined
  /** The scope's finalizer. */
  readonly release: Effect.Effect<void>

  constructor(
    private readonly deadlines: Deadlines["Service"],
    private readonly breakers: Pick<Breakers["Service"], "record"> | undefined,
  ) {
    this.release = Effect.sync(() => {
      if (this.response !== undefined) closeResponse(this.deadlines, this.response)
      this.response = undefined
      this.report("neutral")
    })
  }

  /** Holds `permit` until `report`. */
  hold(permit: Permit): void {
    this.permit = permit
  }

  /** Reports the attempt's result to its breaker (once; later calls do nothing). */
  report(outcome: Outcome): void {
    const permit = this.permit
    if (permit === undefined) return
    this.permit = undefined
    this.breakers?.record(permit, outcome)
  }
}

/**
 * Sends one attempt and waits for its response head (see `AttemptResponse`),
 * or succeeds with `AttemptFailed` when there was none (a value, not an
 * error: the attempt loop branches on it either way). The first-token and
 * total deadlines run from the moment the request is sent. The response is
 * put in `hold` as it arrives (the attempt scope's finalizer closes it);
 * interruption while waiting (client gone, the drain, a caller's
 * `Effect.timeout`) aborts the upstream request.
 */
export const sendAttempt = (
  env: AttemptEnv,
  client: Pick<ProviderClient["Service"], "api" | "dispatch">,
  upstream: UpstreamRequest,
  timeouts: TimeoutsConfig,
  hold: AttemptHold,
): Effect.Effect<AttemptResponse | AttemptFailed> => awaitHead(env, client, upstream, timeouts, hold)

/** `sendAttempt` with its response held by the current scope (no breaker permit). */
export const openAttempt = (
  env: AttemptEnv,
  client: Pick<ProviderClient["Service"], "api" | "dispatch">,
  upstream: UpstreamRequest,
  timeouts: TimeoutsConfig,
): Effect.Effect<AttemptResponse | AttemptFailed, never, Scope.Scope> =>
  Effect.suspend(() => {
    const hold = new AttemptHold(env.deadlines, undefined)
    return Effect.andThen(
      Effect.addFinalizer(() => hold.release),
      awaitHead(env, client, upstream, timeouts, hold),
    )
  })

const awaitHead = (
  { deadlines, meters }: AttemptEnv,
  client: Pick<ProviderClient["Service"], "api" | "dispatch">,
  upstream: UpstreamRequest,
  timeouts: TimeoutsConfig,
  hold: AttemptHold,
): Effect.Effect<AttemptResponse | AttemptFailed> =>
  Effect.callback<AttemptResponse | AttemptFailed>((resume) => {
    let settled = false
    const now = deadlines.now()
    const settle = (result: AttemptResponse | AttemptFailed) => {
      if (settled) return
      settled = true
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
      // Set by the relay; declared here so adding it later does not give every stream's deadline a property array.
      holder: undefined,
      expire: (kind) => fail(new AttemptFailed({ reason: kind, detail: timeoutDetail(kind, timeouts) })),
    }
    let meter: StreamMeter | undefined
    const pending: Array<Buffer> = []
    let held = 0
    /** The response head arrived: answer at once (not 2xx), or read the first chunk / the stream prelude. */
    const onHead = (call: UpstreamCall) => {
      const status = call.status
      if (status < 200 || status >= 300) return respond()
      if (isEventStream(call.headers["content-type"])) meter = meters.stream(upstream.endpoint)
      call.attach(prelude)
    }
    // What arrives until the relay attaches is queued (up to 32 KiB): a body that ends meanwhile leaves the
    // connection reusable, also when the response is discarded.
    const respond = () => {
      call.detach()
      deadline.firstByteBy = Infinity
      deadline.lastActivity = deadlines.now()
      const response: AttemptResponse = { endpoint: upstream.endpoint, call, pending, meter, deadline }
      // Held before the fiber resumes: from here on the attempt's scope closes it.
      hold.response = response
      settle(response)
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
      onError: (error: UpstreamError) => fail(failureOf(error, timeouts.connectMs)),
    }
    const call = new UpstreamCall(onHead, (error) => fail(failureOf(error, timeouts.connectMs)))
    deadlines.register(deadline)
    client.dispatch(upstream, call, timeouts.connectMs)
    // Interrupted while waiting: abort the upstream request (a response already delivered is the scope's).
    return Effect.sync(() => {
      if (settled) return
      settled = true
      close()
    })
  })
