import { hasHardBudget } from "../limits/admission.js"
import type { UsageBacklogCounts } from "../ops/UsageBacklog.js"
import { UsageLogFull } from "../domain/errors.js"
import { Cause, Effect, Exit, Option, type Random } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { RouteConfig, TollgateConfig } from "../config/model.js"
import {
  Draining,
  errorCode,
  InternalError,
  InvalidRequest,
  renderError,
  RouteNotAllowed,
  RouteNotFound,
  streamErrorEvent,
  type GatewayError,
} from "../domain/errors.js"
import type { ParsedRequest } from "../domain/request.js"
import type { Limits } from "../limits/Limits.js"
import type { ResponseOwner } from "../limits/Store.js"
import type { Meter } from "../meter/Meter.js"
import type { UsageLog } from "../meter/UsageLog.js"
import { logRequestLine } from "../ops/logger.js"
import type { OpenRequests } from "../ops/OpenRequests.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import { targetClient, type ProviderView } from "../providers/Providers.js"
import type { Breakers } from "../reliability/Breakers.js"
import type { Deadlines } from "../reliability/Deadlines.js"
import type { RetryBudget } from "../reliability/RetryBudget.js"
import { makePriceBook, overspendExcess, planAdmission } from "./admission.js"
import { makeAttempts } from "./attempts.js"
import { makeRouting } from "./routing.js"
import { parseRequest } from "./parse.js"
import { writeError } from "./respond.js"
import { translationsFor, untranslatable } from "./translation.js"
import { floorStreamedOutput, makeServe, type Relayed } from "./serve.js"
import {
  costOf,
  makeProgress,
  overheadMs,
  settledTokens,
  usageRecord,
  type Ending,
  type Progress,
  type RequestInfo,
} from "./stages.js"

export interface PipelineDeps {
  readonly config: TollgateConfig
  readonly providers: ProviderView
  readonly deadlines: Deadlines["Service"]
  readonly usageLog: UsageLog["Service"]
  readonly breakers: Breakers["Service"]
  readonly retryBudget: RetryBudget["Service"]
  readonly limits: Limits["Service"]
  readonly telemetry: TelemetryService
  readonly openRequests: OpenRequests["Service"]
  readonly meters: Meter["Service"]
  /** The usage records held in memory while the usage file refuses writes (ADR 0070). */
  readonly usageBacklog: Readonly<UsageBacklogCounts>
  /** Weighted routes' picks (the layer's `Random`: seeded in tests). */
  readonly random: Random.Random
}

/** Why a request ended early: the drain ended it (`shutdown`), or the client went away. */
export interface Interruption {
  readonly shutdown: boolean
}

/**
 * The per-request program (ARCHITECTURE.md "One request"): plan → admit →
 * attempts → relay, each stage a value, in one `Scope` per request (a child
 * scope per attempt holds its response and breaker permit). Its exit — a
 * response, a refusal, a failure, or an interruption by a client that left
 * or by the drain — is finished the same way, uninterruptibly: the
 * admission is settled, then the usage record built from the stage values
 * is queued, and the response ends once the record is in the file.
 */
export const makePipeline = (deps: PipelineDeps) => {
  const { config, providers, deadlines, usageLog, limits, telemetry, openRequests, random } = deps
  const price = makePriceBook(config)
  const attempts = makeAttempts(deps)
  const routing = makeRouting({ limits, telemetry, random })
  const serve = makeServe({ deadlines, meters: deps.meters, limits, telemetry, price })

  const resolveRoute = (info: RequestInfo, request: ParsedRequest): RouteConfig | GatewayError => {
    const route = config.routes.get(request.model)
    if (route === undefined)
      return new RouteNotFound({ message: `model "${request.model}" is not a route of this gateway` })
    const allowed = info.principal.tenant.routes
    if (allowed !== "*" && !allowed.includes(route.name)) return new RouteNotAllowed({ route: route.name })
    if (!route.translate && route.api !== info.api) {
      return new InvalidRequest({
        message: `model "${route.name}" speaks the ${route.api} API; send it to ${route.api === "anthropic" ? "/v1/messages" : "/v1/chat/completions, /v1/responses or /v1/embeddings"}`,
      })
    }
    return route
  }

  /**
   * Parse, route and plan, in a plain function so the parsed body is
   * garbage once it returns (the request fiber never holds it).
   */
  const plan = (info: RequestInfo, progress: Progress, body: Buffer, req: IncomingMessage) => {
    try {
      return planUnsafe(info, progress, body, req)
    } catch (error) {
      // A body nested deeper than the stack (the estimate and the session hash walk it): the client's error.
      if (error instanceof RangeError) {
        progress.request = undefined
        return new InvalidRequest({ message: "the request body is nested too deeply" })
      }
      throw error
    }
  }

  /** Routes with a target whose client may refuse a request (Gemini's translation), by route. */
  const refusing = new WeakMap<RouteConfig, boolean>()
  const refusingTargets = (route: RouteConfig): boolean => {
    let found = refusing.get(route)
    if (found === undefined) {
      found = route.targets.some((t) => targetClient(providers, t).refuse !== undefined)
      refusing.set(route, found)
    }
    return found
  }

  const planUnsafe = (info: RequestInfo, progress: Progress, body: Buffer, req: IncomingMessage) => {
    const parsed = parseRequest(info.endpoint, body, req.headers)
    if (parsed instanceof InvalidRequest) return parsed
    const request = (progress.request = parsed.request)
    const route = resolveRoute(info, request)
    if (route instanceof Error) return route
    progress.route = route
    const p = planAdmission(
      config,
      price,
      info.principal.tenant.name,
      request,
      parsed.json,
      route,
      req.headers,
    )
    if (p instanceof InvalidRequest) return p
    if (route.translate || refusingTargets(route)) {
      const clients = route.targets.map((t) => targetClient(providers, t))
      const header = (name: string) => {
        const value = req.headers[name]
        return typeof value === "string" ? value : undefined
      }
      const translations = route.translate
        ? (progress.translations = translationsFor(request, parsed.json, clients, header))
        : undefined
      const refusal = untranslatable(request, translations, clients)
      if (refusal !== undefined) return refusal
    }
    return (progress.plan = p)
  }

  /**
   * `takeBody` gives the request body once and lets go of it: a generator keeps its arguments (and the
   * effect its call), so a body passed in would stay alive until the response ends, for a stream as long
   * as it streams.
   */
  const run = Effect.fnUntraced(function* (
    info: RequestInfo,
    progress: Progress,
    req: IncomingMessage,
    res: ServerResponse,
    takeBody: () => Buffer | GatewayError,
  ) {
    const p = planBody(info, progress, takeBody(), req)
    if (p instanceof Error) return yield* refused(info, progress, p)
    const request = progress.request!
    const tenant = info.principal.tenant
    // Uninterruptible up to the assignment: an admission that happened is settled (by the finish), even if
    // the client left while it was on its way. (A wait in the tenant's queue, ADR 0057, is interruptible.)
    const queue = tenant.limits.queue
    // The usage file refuses writes and its backlog is full (ADR 0070): a hard budget's spend cannot be
    // proven, so its tenant waits; the others are served, their records counted as dropped.
    if (
      deps.usageBacklog.full &&
      hasHardBudget({ tenant, tokenCost: 0, reserve: 0, sessionId: undefined, key: info.principal })
    )
      return yield* new UsageLogFull()
    yield* Effect.uninterruptible(
      Effect.map(
        limits.admit({
          tenant,
          tokenCost: p.tokenCost,
          reserve: p.reserve,
          sessionId: p.sessionId,
          key: info.principal,
          waitUntil: queue === undefined ? undefined : info.startMs + queue.maxWaitMs,
        }),
        (admission) => {
          progress.admission = admission
          if (info.endpoint !== "/v1/messages/count_tokens") {
            openRequests.admitted(tenant.name, overspendExcess(p))
          }
        },
      ),
    )
    let route = progress.route!
    if (request.endpoint === "/v1/messages/count_tokens") {
      // Forwarded to the first direct Anthropic target only (Vertex has no count_tokens here).
      const direct = route.targets.find((t) => targetClient(providers, t).serves(request.endpoint))
      if (direct === undefined) {
        return yield* new RouteNotFound({
          message: `model "${route.name}" has no direct Anthropic target for count_tokens`,
        })
      }
      route = { ...route, targets: [direct] }
    }
    if (request.previousResponseId !== undefined) {
      const owner = yield* limits.responseOwner(request.previousResponseId)
      if (owner !== undefined) route = yield* ownersTargets(route, tenant.name, owner)
    }
    // Weighted and sticky routes choose their order (ADR 0073); a request narrowed above keeps its targets.
    const order =
      route === progress.route && (route.sticky || route.strategy === "weighted")
        ? yield* routing.order(route, tenant.name, p.sessionId, progress)
        : route.targets
    const chosen = yield* attempts(progress.tally, request, route, info, progress.translations, order)
    if (progress.sticky !== undefined && chosen.served)
      yield* routing.served(route, chosen.target, info, progress)
    // Returned to run after this generator has ended: its frame (everything above) is not held for as long as
    // the response streams. (serve reports the relay's outcome to the attempt's breaker.)
    return serve(info, progress, chosen, res)
  })

  /** The plan of a request body, or why it is refused; the body is not held once it returns. */
  const planBody = (
    info: RequestInfo,
    progress: Progress,
    body: Buffer | GatewayError,
    req: IncomingMessage,
  ) => (Buffer.isBuffer(body) ? plan(info, progress, body, req) : body)

  /**
   * A request refused before admission (bad body, unknown or forbidden
   * route) still counts against the tenant's request limit, so refusals are
   * not free to send; a tenant over its limit gets the 429 instead.
   */
  const refused = (info: RequestInfo, progress: Progress, error: GatewayError) =>
    Effect.andThen(
      Effect.uninterruptible(
        Effect.map(
          limits.admit({ tenant: info.principal.tenant, tokenCost: 0, reserve: 0, sessionId: undefined }),
          (admission) => {
            progress.admission = admission
          },
        ),
      ),
      Effect.fail(error),
    )

  /**
   * A request that continues a Responses response goes only to the provider
   * that made it (ADR 0045); another tenant's response is refused.
   */
  const ownersTargets = (
    route: RouteConfig,
    tenant: string,
    owner: ResponseOwner,
  ): Effect.Effect<RouteConfig, InvalidRequest> => {
    if (owner.tenant !== tenant) {
      return Effect.fail(
        new InvalidRequest({
          message: "previous_response_id: no response with this id was made for this tenant",
        }),
      )
    }
    const targets = route.targets.filter((t) => t.provider === owner.provider)
    if (targets.length === 0) {
      return Effect.fail(
        new InvalidRequest({
          message: `previous_response_id: the response was made by provider "${owner.provider}", which is not a target of model "${route.name}"`,
        }),
      )
    }
    return Effect.succeed(targets.length === route.targets.length ? route : { ...route, targets })
  }

  /** A stream still open when the drain's grace ran out gets the error event; any other response is cut. */
  const endForShutdown = (info: RequestInfo, progress: Progress) => (res: ServerResponse) => {
    if (res.writableEnded || res.destroyed) return
    const committed = progress.committed
    if (committed?.eventStream === true) {
      res.end(
        streamErrorEvent(
          info.endpoint,
          "overloaded_error",
          "Tollgate is shutting down; the stream was ended",
        ),
      )
    } else if (committed !== undefined) res.destroy()
    else writeError(res, renderError(info.api, new Draining()), { info, progress })
  }

  /** How the request ended, and what ends its response, from its exit. */
  const ending = (
    info: RequestInfo,
    progress: Progress,
    res: ServerResponse,
    exit: Exit.Exit<Relayed, GatewayError>,
    interruption: Interruption,
  ): {
    readonly ending: Ending
    readonly end: ((res: ServerResponse) => void) | undefined
    /** A defect (a bug inside Tollgate), to be logged. */
    readonly defect?: Cause.Cause<unknown> | undefined
  } => {
    const committed = progress.committed
    if (Exit.isSuccess(exit)) {
      const relayed = exit.value
      return {
        ending: {
          status: committed!.status,
          error: relayed.error,
          incomplete: relayed.incomplete,
          usageEstimated: relayed.usageEstimated,
        },
        end:
          relayed.end === "destroy" ? destroy : relayed.last === undefined ? endPlain : endWith(relayed.last),
      }
    }
    const cause = exit.cause
    if (Cause.hasInterruptsOnly(cause)) {
      const error = committed?.error ?? (interruption.shutdown ? "shutdown" : "client_disconnected")
      // A drain that cut a request before its response answers 503; a client that left, 499.
      const status = committed?.status ?? (interruption.shutdown ? 503 : 499)
      return {
        ending: { status, error, incomplete: committed !== undefined, usageEstimated: false },
        end: interruption.shutdown ? endForShutdown(info, progress) : undefined,
      }
    }
    const failure = Cause.findErrorOption(cause)
    const defect = Option.isSome(failure) ? undefined : cause
    const error: GatewayError = Option.isSome(failure)
      ? failure.value
      : new InternalError({ message: "internal error" })
    if (committed !== undefined) {
      // A failure inside Tollgate after the first byte: the response is cut short (the record says so),
      // and a stream still gets its error event.
      return {
        ending: {
          status: committed.status,
          error: errorCode(error),
          incomplete: true,
          usageEstimated: false,
        },
        end: committed.eventStream
          ? (r) => {
              if (!r.writableEnded && !r.destroyed)
                r.end(streamErrorEvent(info.endpoint, "api_error", "internal error"))
            }
          : destroy,
        defect,
      }
    }
    if (res.destroyed || res.socket?.destroyed === true) {
      // The client went away before any answer (for example mid-upload): nobody gets the error.
      return {
        ending: { status: 499, error: "client_disconnected", incomplete: false, usageEstimated: false },
        end: undefined,
        defect,
      }
    }
    const rendered = renderError(info.api, error)
    return {
      ending: { status: rendered.status, error: errorCode(error), incomplete: false, usageEstimated: false },
      end: (r) => writeError(r, rendered, { info, progress }),
      defect,
    }
  }

  /**
   * The request's finish (uninterruptible, on every exit): closes an open
   * stream's count, settles the admission, then queues the usage record and
   * its log line and hands the end of the response to run once the record
   * is in the file (ADR 0037: the records of one event-loop turn are
   * written together). A record in the file means its spend is settled.
   */
  const finish = (
    info: RequestInfo,
    progress: Progress,
    res: ServerResponse,
    exit: Exit.Exit<Relayed, GatewayError>,
    interruption: Interruption,
  ) =>
    Effect.suspend(() => {
      noteRefusingBudget(progress, exit)
      const { ending: end, end: endResponse, defect } = ending(info, progress, res, exit, interruption)
      const committed = progress.committed
      if (committed?.meter !== undefined) {
        telemetry.streamClosed()
        // A stream cut short: what streamed may still be charged by the provider (ADR 0029).
        if (!Exit.isSuccess(exit)) floorStreamedOutput(committed.meter, progress.request?.maxTokens)
      }
      const cost = costOf(info, progress, end)
      const admission = progress.admission
      const write = Effect.suspend(() => {
        const now = deadlines.now()
        const record = usageRecord(info, progress, end, cost, now)
        usageLog.queue(record)
        info.trace?.finish(record, committed?.usage)
        if (endResponse !== undefined) usageLog.afterWrite(() => endResponse(res))
        telemetry.requestDone({
          record,
          route: progress.route?.name ?? "",
          committed: committed !== undefined,
          overheadMs: overheadMs(info, progress, now),
          // Served by a target the price table lacks: recorded at cost 0 (count_tokens is free anyway).
          unpriced:
            committed !== undefined &&
            committed.price === undefined &&
            end.status >= 200 &&
            end.status < 300 &&
            info.endpoint !== "/v1/messages/count_tokens",
        })
        // A 502 Tollgate made itself: its line names the targets and their causes, as its body does.
        const failure = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
        const targets =
          Option.isSome(failure) && failure.value._tag === "NoUpstreamResponse"
            ? failure.value.targets
            : undefined
        return logRequestLine(record, now, targets)
      })
      const logged =
        defect === undefined
          ? write
          : Effect.andThen(
              Effect.logError("request failed inside Tollgate", Cause.pretty(defect)).pipe(
                Effect.annotateLogs("request_id", info.id),
              ),
              write,
            )
      if (admission === undefined) return logged
      // Only a planned request was counted open (a refusal is admitted for the request limit alone).
      if (info.endpoint !== "/v1/messages/count_tokens" && progress.plan !== undefined) {
        openRequests.done(info.principal.tenant.name, overspendExcess(progress.plan!))
      }
      // Even a defect in the store call cannot cost the record or the end of the response.
      return Effect.ensuring(limits.settle(admission, cost, settledTokens(progress, end)), logged)
    })

  /**
   * The whole request: `run` in the request's scope, then `finish` on its
   * exit. `interruption` tells an interrupted request why (read at the end).
   */
  const handle = (
    info: RequestInfo,
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer | GatewayError,
    interruption: Interruption,
  ): Effect.Effect<void> => {
    const progress = makeProgress()
    let unread: Buffer | GatewayError | undefined = body
    const takeBody = (): Buffer | GatewayError => {
      const taken = unread!
      unread = undefined
      return taken
    }
    return Effect.onExit(Effect.scoped(Effect.flatten(run(info, progress, req, res, takeBody))), (exit) =>
      finish(info, progress, res, exit, interruption).pipe(Effect.catchCause(finishFailed(res))),
    ).pipe(Effect.matchCauseEffect(IGNORED))
  }

  /** A new request while draining: 503 with `connection: close`, and its usage record. */
  const refuse = (info: RequestInfo, res: ServerResponse, interruption: Interruption): Effect.Effect<void> =>
    finish(info, makeProgress(), res, Exit.fail(new Draining()), interruption)

  return { handle, refuse }
}

const destroy = (res: ServerResponse): void => void res.destroy()

/**
 * `Effect.ignoreCause` without its two closures per call (a request holds them for as long as it is open);
 * one parameter each, or `matchCauseEffect` wraps them in closures of its own.
 */
const IGNORED = { onFailure: (_: unknown) => Effect.void, onSuccess: (_: unknown) => Effect.void }

/** Notes the budget that refused a request (402: the store's or the gate's answer), for its record's `budget`. */
const noteRefusingBudget = (progress: Progress, exit: Exit.Exit<Relayed, GatewayError>): void => {
  if (Exit.isSuccess(exit)) return
  const failure = Cause.findErrorOption(exit.cause)
  if (Option.isSome(failure) && failure.value._tag === "BudgetExceeded")
    progress.budget = failure.value.budget
}

/** A bug in the finish itself: logged, and the response cut rather than left open. */
const finishFailed = (res: ServerResponse) => (cause: Cause.Cause<unknown>) => {
  if (!res.writableEnded) res.destroy()
  return Effect.logError("the end of a request failed inside Tollgate", Cause.pretty(cause))
}
const endPlain = (res: ServerResponse): void => void res.end()
const endWith =
  (last: Buffer) =>
  (res: ServerResponse): void =>
    void res.end(last)
