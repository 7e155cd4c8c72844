import { Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Random } from "effect"
import { randomUUID } from "node:crypto"
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import { LiveConfig } from "../config/LiveConfig.js"
import type { TenantConfig, TollgateConfig } from "../config/model.js"
import { endpointApi, type Endpoint } from "../domain/endpoint.js"
import { RateLimited, renderError, Unauthenticated } from "../domain/errors.js"
import { KeyStore } from "../keys/KeyStore.js"
import { Limits } from "../limits/Limits.js"
import { Meter } from "../meter/Meter.js"
import { BodyBuffers } from "../ops/BodyBuffers.js"
import { UsageLog } from "../meter/UsageLog.js"
import { IndexedList, type Listed } from "../ops/IndexedList.js"
import { OpenRequests } from "../ops/OpenRequests.js"
import { Telemetry } from "../ops/Telemetry.js"
import { Tracing } from "../ops/Tracing.js"
import { Providers, type ProviderView } from "../providers/Providers.js"
import { Breakers } from "../reliability/Breakers.js"
import { Deadlines } from "../reliability/Deadlines.js"
import { RetryBudget } from "../reliability/RetryBudget.js"
import { makeAuthenticator, type Principal } from "./auth.js"
import { collectBody } from "./parse.js"
import { UsageBacklog } from "../ops/UsageBacklog.js"
import { makePipeline, type Interruption } from "./pipeline.js"
import { writeError } from "./respond.js"
import type { RequestInfo } from "./stages.js"
import { callerContext, RequestTrace } from "./trace.js"

/**
 * The proxy endpoints' handler: auth, the body, and one fiber per request
 * running the pipeline (src/gateway/pipeline.ts), forked with the services
 * this layer was built with. A client that goes away interrupts its fiber,
 * which closes the request's scope and so aborts its upstream request; the
 * usage record is written on every path, interruption included.
 */
export class Gateway extends Context.Service<
  Gateway,
  {
    readonly handle: (req: IncomingMessage, res: ServerResponse, endpoint: Endpoint) => void
    /** Graceful shutdown: see `drain` in the layer. */
    readonly drain: (graceMs: number) => Effect.Effect<void>
    readonly draining: () => boolean
  }
>()("tollgate/Gateway") {}

const expectsContinue = (req: IncomingMessage): boolean => {
  const expect = req.headers.expect
  return expect !== undefined && expect.toLowerCase() === "100-continue"
}

/** At most one warning line about failed authentications per this many ms. */
const AUTH_WARN_EVERY_MS = 10_000

/** The refusal of a request whose client went away while it waited in its tenant's queue (recorded as 499, ADR 0057). */
const CLIENT_LEFT_QUEUE = {
  message: "the client went away while the request waited in the tenant's queue",
  retryAfterSeconds: 1,
}

/** A request in flight: its fiber (while it runs), why it may be interrupted, and what it holds. */
interface InFlight extends Listed, Interruption {
  fiber: Fiber.Fiber<void> | undefined
  shutdown: boolean
  /** The tenant it is counted in flight for by the gate (undefined: not counted). */
  tenant: TenantConfig | undefined
  /** Body bytes it holds of the buffer budget. */
  buffered: number
  /** The configuration it runs under. */
  readonly snapshot: Snapshot
}

/** One configuration's request path: what a request started under it uses until its end. */
interface Snapshot {
  readonly config: TollgateConfig
  readonly pipeline: ReturnType<typeof makePipeline>
  readonly authenticate: (headers: IncomingHttpHeaders) => Principal | undefined
  readonly providers: ProviderView
  /** Requests in flight under it. */
  users: number
  /** A later configuration replaced it: its clients are released once its last request ends. */
  retired: boolean
}

export const layer = Layer.effect(
  Gateway,
  Effect.gen(function* () {
    const live = yield* LiveConfig
    const usageLog = yield* UsageLog
    const deadlines = yield* Deadlines
    const limits = yield* Limits
    const providers = yield* Providers
    const keys = yield* KeyStore
    const telemetry = yield* Telemetry
    const services = {
      deadlines,
      usageLog,
      breakers: yield* Breakers,
      retryBudget: yield* RetryBudget,
      limits,
      telemetry,
      openRequests: yield* OpenRequests,
      meters: yield* Meter,
      usageBacklog: yield* UsageBacklog,
      random: yield* Random.Random,
    }
    /** What a request uses from its start to its end, for one configuration (a reload makes the next, ADR 0052). */
    const snapshotOf = (next: TollgateConfig, clients: ProviderView): Snapshot => ({
      config: next,
      pipeline: makePipeline({ ...services, config: next, providers: clients }),
      authenticate: makeAuthenticator(next, keys),
      providers: clients,
      users: 0,
      retired: false,
    })
    let current = snapshotOf(live.get(), providers.current())
    live.register((next) =>
      Effect.map(providers.prepare(next), (prepared) => {
        const snapshot = snapshotOf(next, prepared.view)
        return {
          commit: () => {
            prepared.commit()
            const previous = current
            current = snapshot
            previous.retired = true
            if (previous.users === 0) run(providers.release(previous.providers))
          },
          abort: prepared.abort,
        }
      }),
    )
    const buffers = yield* BodyBuffers
    const { tracer } = yield* Tracing
    /** Failed authentications since the last warning line (at most one line per AUTH_WARN_EVERY_MS). */
    let authFailures = 0
    let authWarnedAt = Number.NEGATIVE_INFINITY
    // Request fibers run with the services this layer was built with (the Clock included, so TestClock
    // drives their time in tests).
    const run = Effect.runForkWith(yield* Effect.context<never>())

    /** Requests in flight: what a drain waits for. */
    const inflight = new IndexedList<InFlight>()
    let draining = false
    /** Requests waiting in a tenant's queue for a place (not yet in flight): the drain refuses them. */
    const queued = new Set<() => void>()
    let idle: Deferred.Deferred<void> | undefined

    /**
     * Stops taking proxy requests (503 `overloaded_error`, `connection:
     * close`; /readyz reports draining), lets open requests finish for up to
     * `graceMs`, then ends the rest — streams with an error event — after
     * their usage records are written.
     */
    const drain = (graceMs: number) =>
      Effect.gen(function* () {
        draining = true
        for (const refuse of [...queued]) refuse()
        if (inflight.size === 0) return
        const done = (idle = yield* Deferred.make<void>())
        // Finalizers run uninterruptibly: the wait must be interruptible for the timeout to end it.
        const finished = yield* Effect.interruptible(Deferred.await(done)).pipe(
          Effect.timeoutOption(Duration.millis(graceMs)),
        )
        if (Option.isSome(finished)) return
        const remaining = inflight.snapshot()
        for (const entry of remaining) entry.shutdown = true
        yield* Fiber.interruptAll(
          remaining.flatMap((entry) => (entry.fiber === undefined ? [] : [entry.fiber])),
        )
        // Their records are written and their responses ended on the next check phase (ADR 0037): wait for
        // that write, not for every request in flight (refusals keep arriving until the server closes).
        yield* Effect.callback<void>((resume) => usageLog.afterWrite(() => resume(Effect.void)))
      })

    /** Forks the request's fiber: tracked for the drain, interrupted when the client goes away. */
    const start = (res: ServerResponse, entry: InFlight, effect: Effect.Effect<void>): void => {
      const fiber = run(effect)
      entry.fiber = fiber
      inflight.add(entry)
      fiber.addObserver(() => {
        entry.fiber = undefined
        // In flight until its response has ended, after its record's write (ADR 0037).
        usageLog.afterWrite(() => {
          inflight.remove(entry)
          release(entry)
          const snapshot = entry.snapshot
          if (--snapshot.users === 0 && snapshot.retired) run(providers.release(snapshot.providers))
          if (idle !== undefined && inflight.size === 0) Deferred.doneUnsafe(idle, Exit.void)
        })
      })
      res.on("close", () => {
        if (!res.writableEnded) fiber.interruptUnsafe()
      })
    }

    /** Ends what the request held: its place under the tenant's concurrency cap and its body's bytes. */
    const release = (entry: InFlight): void => {
      const tenant = entry.tenant
      if (tenant === undefined) return
      entry.tenant = undefined
      limits.leave(tenant)
      if (entry.buffered > 0) {
        buffers.give(tenant.name, entry.buffered)
        entry.buffered = 0
      }
    }

    /** Counted, and logged as one line per window however many come (a key guesser cannot flood the log). */
    const authFailed = (): void => {
      telemetry.authFailed()
      authFailures++
      const now = deadlines.now()
      if (now - authWarnedAt < AUTH_WARN_EVERY_MS) return
      const failures = authFailures
      authFailures = 0
      authWarnedAt = now
      run(
        Effect.logWarning("requests without a valid API key").pipe(
          Effect.annotateLogs({ failures, window_s: AUTH_WARN_EVERY_MS / 1000 }),
        ),
      )
    }

    const handle = (req: IncomingMessage, res: ServerResponse, endpoint: Endpoint): void => {
      const api = endpointApi(endpoint)
      // The configuration the request runs under, from its start to its end.
      const snapshot = current
      const principal = snapshot.authenticate(req.headers)
      if (principal === undefined) {
        writeError(res, renderError(api, new Unauthenticated({ message: "invalid or missing API key" })))
        return authFailed()
      }
      const id = randomUUID()
      // Only a request that sends `traceparent` pays for reading it; without a tracer nothing else is made.
      const caller = req.headers.traceparent === undefined ? undefined : callerContext(req.headers)
      const trace =
        tracer === undefined
          ? undefined
          : new RequestTrace(tracer, endpoint, id, principal.tenant.name, principal.keyId, caller)
      const info: RequestInfo = { id, startMs: deadlines.now(), endpoint, api, principal, trace, caller }
      const entry: InFlight = {
        fiber: undefined,
        shutdown: false,
        listIndex: -1,
        tenant: undefined,
        buffered: 0,
        snapshot,
      }
      snapshot.users++
      const { pipeline } = snapshot
      if (draining) return start(res, entry, pipeline.refuse(info, res, entry))
      // What the headers decide is refused before a byte of the body is read (ADR 0049).
      const tenant = principal.tenant
      const early = limits.enter(tenant, endpoint)
      if (early === undefined) return readBody(info, req, res, entry, tenant)
      if (early._tag !== "Queued") return start(res, entry, pipeline.handle(info, req, res, early, entry))
      // Waits for a place under the concurrency caps before its body is read (ADR 0057).
      const stopWaiting = (): void => {
        early.cancel()
        res.off("close", gone)
        queued.delete(drained)
      }
      const gone = () => {
        stopWaiting()
        start(res, entry, pipeline.handle(info, req, res, new RateLimited(CLIENT_LEFT_QUEUE), entry))
      }
      const drained = () => {
        stopWaiting()
        start(res, entry, pipeline.refuse(info, res, entry))
      }
      res.once("close", gone)
      queued.add(drained)
      early.resume = (refusal) => {
        res.off("close", gone)
        queued.delete(drained)
        if (refusal !== undefined) return start(res, entry, pipeline.handle(info, req, res, refusal, entry))
        if (draining) {
          limits.leave(tenant)
          return start(res, entry, pipeline.refuse(info, res, entry))
        }
        readBody(info, req, res, entry, tenant)
      }
    }

    /** Reads the body of a request counted in flight under its tenant (`leave` when its record is written). */
    const readBody = (
      info: RequestInfo,
      req: IncomingMessage,
      res: ServerResponse,
      entry: InFlight,
      tenant: TenantConfig,
    ): void => {
      const { pipeline } = entry.snapshot
      entry.tenant = tenant
      const take = (bytes: number): boolean => {
        if (!buffers.take(tenant.name, bytes)) return false
        entry.buffered += bytes
        return true
      }
      // A body that finishes arriving once the drain has begun is refused like a new request.
      const server = entry.snapshot.config.server
      collectBody(
        req,
        server.maxBodyBytes,
        server.bodyTimeoutMs,
        take,
        (body) =>
          start(
            res,
            entry,
            draining ? pipeline.refuse(info, res, entry) : pipeline.handle(info, req, res, body, entry),
          ),
        // A client waiting on `expect: 100-continue` is told to send only once the body will be read (ADR 0049).
        expectsContinue(req) ? () => res.writeContinue() : undefined,
      )
    }

    return { handle, drain, draining: () => draining }
  }),
)
