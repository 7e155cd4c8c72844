import { Cause, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Config } from "../config/Config.js"
import type { RouteConfig } from "../config/model.js"
import { renderError, streamErrorEvent } from "../domain/errors.js"
import { Limits } from "../limits/Limits.js"
import { logRequest, writeRequestLine } from "../ops/logger.js"
import { IndexedList } from "../ops/IndexedList.js"
import { andThen, type Leftover } from "../ops/leftover.js"
import { OpenRequests } from "../ops/OpenRequests.js"
import { Telemetry } from "../ops/Telemetry.js"
import { UsageLog } from "../meter/UsageLog.js"
import { Providers } from "../providers/Providers.js"
import { Breakers } from "../reliability/Breakers.js"
import { RetryBudget } from "../reliability/RetryBudget.js"
import { makeAuthenticator } from "./auth.js"
import { cancelPending } from "./attempt.js"
import { RequestContext } from "./context.js"
import { makePriceBook, planAdmission, type Plan } from "./admission.js"
import { Deadlines } from "./Deadlines.js"
import {
  BodyTooLarge,
  Draining,
  InternalError,
  InvalidRequest,
  RouteNotAllowed,
  RouteNotFound,
  Unauthenticated,
  errorCode,
  type GatewayError,
} from "../domain/errors.js"
import { collectBody, parseRequest } from "./parse.js"
import { endpointApi, type Endpoint } from "../domain/endpoint.js"
import type { ParsedRequest } from "../domain/request.js"
import { writeError } from "./respond.js"
import { makeRunRoute } from "./runRoute.js"
import { floorStreamedOutput, makeServeResponse } from "./serveResponse.js"

/**
 * The per-request program for the proxy endpoints: auth → parse → route →
 * attempts → relay → usage record. Each request is one fiber, forked on the
 * runtime this layer captured; a client that goes away interrupts it, which
 * aborts the upstream request. The usage record is written on every path,
 * interruption included.
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

export const layer = Layer.effect(
  Gateway,
  Effect.gen(function* () {
    const config = yield* Config
    const providers = yield* Providers
    const deadlines = yield* Deadlines
    const usageLog = yield* UsageLog
    const breakers = yield* Breakers
    const retryBudget = yield* RetryBudget
    const limits = yield* Limits
    const telemetry = yield* Telemetry
    const openRequests = yield* OpenRequests
    const price = makePriceBook(config)
    const authenticate = makeAuthenticator(config)
    // Request fibers run with the services this layer was built with (the Clock included, so TestClock
    // drives their time in tests).
    const run = Effect.runForkWith(yield* Effect.context<never>())

    /**
     * Queues the usage record (written with the others of this event-loop
     * turn, ADR 0037) and its log line, and hands `then` to run once the
     * record is in the file (the metrics count the request as the line is
     * built). Leaves the line through Effect's logger when the JSON log
     * writer is not in use.
     */
    const queueRecord = (ctx: RequestContext, then: (() => void) | undefined): Leftover => {
      const now = deadlines.now()
      const line = ctx.toRecord(now)
      const failed = usageLog.queue(line)
      if (then !== undefined) usageLog.afterWrite(then)
      telemetry.requestDone(ctx)
      return writeRequestLine(line, now) ? failed : andThen(failed, logRequest(line))
    }

    /**
     * Settles the admission, then appends the usage record, once per
     * request (a record in the file means its spend is settled), and runs
     * `then` — the end of the response — once the record is in the file
     * (ADR 0037: the records of one event-loop turn are written together).
     * Uninterruptible from the moment it claims the record: a client that
     * leaves while the settle is on its way to Redis must not lose it, and
     * the end of the response is handed over in the same step. With the
     * memory store, claiming, settling and queueing are one step of the
     * fiber (ADR 0035).
     */
    const record = (ctx: RequestContext, then?: () => void): Effect.Effect<void> =>
      Effect.uninterruptible(
        Effect.suspend(() => {
          if (ctx.recorded) {
            if (then !== undefined) usageLog.afterWrite(then)
            return Effect.void
          }
          ctx.recorded = true
          const admission = ctx.admission
          let settling: Leftover
          if (admission !== undefined) {
            openRequests.done(ctx)
            settling = limits.settle(admission, ctx.cost(), ctx.settledTokens())
          }
          if (settling === undefined) return queueRecord(ctx, then) ?? Effect.void
          // Even a defect in the store call cannot cost the record or the end of the response.
          return Effect.ensuring(
            settling,
            Effect.suspend(() => queueRecord(ctx, then) ?? Effect.void),
          )
        }),
      )

    /**
     * Stops what the request still waits on and closes what it holds: the
     * attempt or relay in progress (aborting the upstream request), a held
     * error response, an unused breaker permit, and an open stream — whose
     * record, if not yet written, charges at least what streamed. Idempotent;
     * the finalizer runs it, and so does a failure before it writes the record.
     */
    const closeRequest = (ctx: RequestContext): void => {
      cancelPending(ctx)
      release(ctx)
      const meter = ctx.openStream
      if (meter !== undefined) {
        ctx.openStream = undefined
        telemetry.streamClosed()
        if (!ctx.recorded) floorStreamedOutput(meter, ctx.request?.maxTokens)
      }
    }

    const resolveRoute = (ctx: RequestContext, request: ParsedRequest): RouteConfig | GatewayError => {
      const route = config.routes.get(request.model)
      if (route === undefined)
        return new RouteNotFound({ message: `model "${request.model}" is not a route of this gateway` })
      const allowed = ctx.principal.tenant.routes
      if (allowed !== "*" && !allowed.includes(route.name)) return new RouteNotAllowed({ route: route.name })
      if (route.api !== ctx.api) {
        return new InvalidRequest({
          message: `model "${route.name}" speaks the ${route.api} API; send it to ${route.api === "anthropic" ? "/v1/messages" : "/v1/chat/completions"}`,
        })
      }
      return route
    }

    /**
     * Parse, route and admission plan, in a plain function so the parsed body
     * is garbage once it returns (the request fiber never holds it).
     */
    const planRequest = (ctx: RequestContext, body: Buffer, req: IncomingMessage): Plan | GatewayError => {
      const parsed = parseRequest(ctx.endpoint, body, req.headers)
      if (parsed instanceof InvalidRequest) return parsed
      const request = parsed.request
      ctx.request = request
      const route = resolveRoute(ctx, request)
      if (route instanceof Error) return route
      ctx.route = route
      return planAdmission(config, price, ctx, request, parsed.json, route, req.headers)
    }

    const serveResponse = makeServeResponse(deadlines, limits, telemetry, record)
    const { run: runRoute, release } = makeRunRoute({
      price,
      providers,
      deadlines,
      breakers,
      retryBudget,
      telemetry,
      serveResponse,
    })

    const serve = Effect.fnUntraced(function* (
      ctx: RequestContext,
      req: IncomingMessage,
      res: ServerResponse,
      body: Buffer | BodyTooLarge | InvalidRequest,
    ) {
      if (!Buffer.isBuffer(body)) return yield* body
      const plan = planRequest(ctx, body, req)
      if (plan instanceof Error) return yield* Effect.fail(plan)
      const request = ctx.request!
      const route = ctx.route!
      // Uninterruptible up to the assignment: an admission that happened is settled, even if the client left.
      yield* Effect.uninterruptible(
        Effect.map(
          limits.admit({
            tenant: ctx.principal.tenant,
            tokenCost: plan.tokenCost,
            reserve: plan.reserve,
            sessionId: plan.sessionId,
          }),
          (admission) => {
            ctx.admission = admission
            openRequests.admitted(ctx)
          },
        ),
      )
      if (request.endpoint === "/v1/messages/count_tokens") {
        // Forwarded to the first direct Anthropic target only (Vertex has no count_tokens here).
        const direct = route.targets.find((t) => providers.get(t.provider).serves(request.endpoint))
        if (direct === undefined) {
          return yield* new RouteNotFound({
            message: `model "${route.name}" has no direct Anthropic target for count_tokens`,
          })
        }
        return yield* runRoute(ctx, request, { ...route, targets: [direct] }, res)
      }
      return yield* runRoute(ctx, request, route, res)
    })

    const fail = (ctx: RequestContext, res: ServerResponse, error: GatewayError) =>
      Effect.suspend(() => {
        // A failure inside a committed stream: the record below charges at least what streamed.
        closeRequest(ctx)
        const rendered = renderError(ctx.api, error)
        if (!ctx.committed && (res.destroyed || res.socket?.destroyed === true)) {
          // The client went away before any answer (for example mid-upload): nobody gets the error.
          ctx.status = 499
          ctx.error ??= "client_disconnected"
          return record(ctx)
        }
        if (ctx.committed) {
          // A failure inside Tollgate after the first byte: the response is cut short (the record says so),
          // and a stream still gets its error event.
          ctx.incomplete = true
          ctx.error ??= errorCode(error)
          // Already recorded: the end of the response was handed over with the record; it stays as it is.
          if (ctx.recorded) return Effect.void
          if (ctx.eventStream) {
            return record(ctx, () => {
              if (!res.writableEnded && !res.destroyed)
                res.end(streamErrorEvent(ctx.api, "api_error", "internal error"))
            })
          }
          return record(ctx, () => res.destroy())
        }
        ctx.status = rendered.status
        ctx.error ??= errorCode(error)
        return record(ctx, () => writeError(res, rendered, ctx))
      })

    /** A new request while draining: 503 with `connection: close`, and its usage record. */
    const refuse = (ctx: RequestContext, res: ServerResponse) => fail(ctx, res, new Draining())

    const program = (
      ctx: RequestContext,
      req: IncomingMessage,
      res: ServerResponse,
      body: Buffer | BodyTooLarge | InvalidRequest,
    ) =>
      serve(ctx, req, res, body).pipe(
        // One handler for expected errors and defects (interruption skips it and runs the finalizer below).
        Effect.catchCause((cause) => {
          const failure = Cause.findErrorOption(cause)
          if (Option.isSome(failure)) return fail(ctx, res, failure.value)
          return Effect.andThen(
            Effect.logError("request failed inside Tollgate", Cause.pretty(cause)).pipe(
              Effect.annotateLogs("request_id", ctx.requestId),
            ),
            fail(ctx, res, new InternalError({ message: "internal error" })),
          )
        }),
        // The request's one finalizer: releases what the attempt loop held, closes an open stream, and
        // writes the record of a request that ended without one (interrupted by a disconnect or the drain).
        Effect.ensuring(
          Effect.suspend(() => {
            // Interrupted while waiting on an attempt or the relay: this aborts the upstream request.
            closeRequest(ctx)
            // Interrupted by the drain after the record was claimed but before the response ended.
            if (ctx.recorded)
              return shutdown.has(ctx) ? record(ctx, () => endForShutdown(ctx, res)) : Effect.void
            ctx.incomplete = ctx.committed
            ctx.error ??= shutdown.has(ctx) ? "shutdown" : "client_disconnected"
            // A drain that cut a request before its response answers 503 (endForShutdown); a client that left, 499.
            if (!ctx.committed) ctx.status = shutdown.has(ctx) ? 503 : 499
            return record(ctx, shutdown.has(ctx) ? () => endForShutdown(ctx, res) : undefined)
          }),
        ),
      )

    /** Requests in flight (each with its fiber): what a drain waits for. */
    const inflight = new IndexedList<RequestContext>()
    /** Requests the drain interrupted after `shutdown_grace`. */
    const shutdown = new WeakSet<RequestContext>()
    let draining = false
    let idle: Deferred.Deferred<void> | undefined

    /** A stream still open when the grace ran out gets the error event; any other response is cut. */
    const endForShutdown = (ctx: RequestContext, res: ServerResponse): void => {
      if (res.writableEnded || res.destroyed) return
      if (ctx.committed && ctx.eventStream) {
        res.end(
          streamErrorEvent(ctx.api, "overloaded_error", "Tollgate is shutting down; the stream was ended"),
        )
      } else if (ctx.committed) res.destroy()
      else writeError(res, renderError(ctx.api, new Draining()), ctx)
    }

    /**
     * Stops taking proxy requests (503 `overloaded_error`, `connection:
     * close`; /readyz reports draining), lets open requests finish for up to
     * `graceMs`, then ends the rest — streams with an error event — after
     * their usage records are written.
     */
    const drain = (graceMs: number) =>
      Effect.gen(function* () {
        draining = true
        if (inflight.size === 0) return
        const done = (idle = yield* Deferred.make<void>())
        // Finalizers run uninterruptibly: the wait must be interruptible for the timeout to end it.
        const finished = yield* Effect.interruptible(Deferred.await(done)).pipe(
          Effect.timeoutOption(Duration.millis(graceMs)),
        )
        if (Option.isSome(finished)) return
        const remaining = inflight.snapshot()
        for (const ctx of remaining) shutdown.add(ctx)
        yield* Fiber.interruptAll(remaining.flatMap((ctx) => (ctx.fiber === undefined ? [] : [ctx.fiber])))
        // Their records are written and their responses ended on the next check phase (ADR 0037): wait for
        // that write, not for every request in flight (refusals keep arriving until the server closes).
        yield* Effect.callback<void>((resume) => usageLog.afterWrite(() => resume(Effect.void)))
      })

    const handle = (req: IncomingMessage, res: ServerResponse, endpoint: Endpoint): void => {
      const api = endpointApi(endpoint)
      const principal = authenticate(req.headers)
      if (principal === undefined) {
        writeError(
          res,
          renderError(api, new Unauthenticated({ message: "invalid or missing API key" })),
          undefined,
        )
        return
      }
      const ctx = new RequestContext(randomUUID(), deadlines.now(), endpoint, api, principal)
      if (draining) return start(ctx, res, refuse(ctx, res))
      // A body that finishes arriving once the drain has begun is refused like a new request.
      collectBody(req, config.server.maxBodyBytes, (body) =>
        start(ctx, res, draining ? refuse(ctx, res) : program(ctx, req, res, body)),
      )
    }

    /** Forks the request's fiber: tracked for the drain, interrupted when the client goes away. */
    const start = (ctx: RequestContext, res: ServerResponse, effect: Effect.Effect<void>): void => {
      const fiber = run(effect)
      ctx.fiber = fiber
      inflight.add(ctx)
      fiber.addObserver(() => {
        ctx.fiber = undefined
        // In flight until its response has ended, after its record's write (ADR 0037).
        usageLog.afterWrite(() => {
          inflight.remove(ctx)
          if (idle !== undefined && inflight.size === 0) Deferred.doneUnsafe(idle, Exit.void)
        })
      })
      res.on("close", () => {
        if (!res.writableEnded) fiber.interruptUnsafe()
      })
    }

    return { handle, drain, draining: () => draining }
  }),
)
