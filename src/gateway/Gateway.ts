import { Cause, Context, Effect, Either, Layer, Runtime } from "effect"
import { randomUUID } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Config } from "../config/Config.js"
import type { RouteConfig } from "../config/model.js"
import { priceFor } from "../config/pricing.js"
import { renderError, streamErrorEvent } from "../http/errorBody.js"
import { estimateInputTokens } from "../limits/estimate.js"
import { makeStreamMeter, type StreamMeter } from "../meter/stream.js"
import { UsageLog } from "../meter/UsageLog.js"
import { type ProviderAdapter } from "../providers/adapter.js"
import { Providers, RELAY_BUFFER_BYTES } from "../providers/Providers.js"
import { sendAttempt, type AttemptResponse } from "./attempt.js"
import { makeAuthenticator } from "./auth.js"
import { RequestContext } from "./context.js"
import { Deadlines } from "./Deadlines.js"
import {
  InternalError,
  InvalidRequest,
  NoUpstreamResponse,
  RouteNotAllowed,
  RouteNotFound,
  Unauthenticated,
  type GatewayError,
  type TargetOutcome,
} from "./errors.js"
import { JsonCollector } from "./jsonCollector.js"
import { parseRequest, readBody } from "./parse.js"
import { relay, type Observer, type RelayEnd } from "./relay.js"
import { endpointApi, type Endpoint, type ParsedRequest } from "./request.js"
import { relayHeaders, writeError } from "./respond.js"

/**
 * The per-request program for the proxy endpoints: auth → parse → route →
 * attempts → relay → usage record. Each request is one fiber, forked on the
 * runtime this layer captured; a client that goes away interrupts it, which
 * aborts the upstream request. The usage record is written on every path,
 * interruption included.
 */
export class Gateway extends Context.Tag("tollgate/Gateway")<
  Gateway,
  { readonly handle: (req: IncomingMessage, res: ServerResponse, endpoint: Endpoint) => void }
>() {}

const noObserver: Observer = () => undefined

const isEventStream = (contentType: string | undefined): boolean =>
  contentType !== undefined && contentType.startsWith("text/event-stream")

export const layer = Layer.effect(
  Gateway,
  Effect.gen(function* () {
    const config = yield* Config
    const providers = yield* Providers
    const deadlines = yield* Deadlines
    const usageLog = yield* UsageLog
    const authenticate = makeAuthenticator(config)
    const run = Runtime.runFork(yield* Effect.runtime<never>())

    const record = (ctx: RequestContext) =>
      Effect.suspend(() => {
        if (ctx.recorded) return Effect.void
        ctx.recorded = true
        return usageLog.append(ctx.toRecord(deadlines.now()))
      })

    const resolveRoute = (
      ctx: RequestContext,
      request: ParsedRequest,
    ): Either.Either<RouteConfig, GatewayError> => {
      const route = config.routes.get(request.model)
      if (route === undefined) {
        return Either.left(
          new RouteNotFound({ message: `model "${request.model}" is not a route of this gateway` }),
        )
      }
      const allowed = ctx.principal.tenant.routes
      if (allowed !== "*" && !allowed.includes(route.name))
        return Either.left(new RouteNotAllowed({ route: route.name }))
      if (route.api !== ctx.api) {
        return Either.left(
          new InvalidRequest({
            message: `model "${route.name}" speaks the ${route.api} API; send it to ${route.api === "anthropic" ? "/v1/messages" : "/v1/chat/completions"}`,
          }),
        )
      }
      return Either.right(route)
    }

    /** Commits `response` to the client and relays it to the end, then records and ends the response. */
    const serveResponse = Effect.fnUntraced(function* (
      ctx: RequestContext,
      adapter: ProviderAdapter,
      response: AttemptResponse,
      res: ServerResponse,
    ) {
      ctx.status = response.status
      const ok = response.status >= 200 && response.status < 300
      const sse = ok && isEventStream(response.headers["content-type"])
      let meter: StreamMeter | undefined
      let json: JsonCollector | undefined
      let observe = noObserver
      if (sse) {
        const m = (meter = makeStreamMeter(adapter.api))
        // The meter's accumulator is the request's usage, so an interrupted relay still records what arrived.
        ctx.usage = m.usage
        observe = (chunk) => {
          m.push(chunk)
          return m.failure
        }
      } else if (ok) {
        const j = (json = new JsonCollector())
        observe = (chunk) => {
          j.push(chunk)
          return undefined
        }
      }
      res.writeHead(response.status, relayHeaders(ctx, response.headers))
      ctx.committed = true
      const end: RelayEnd = yield* relay(deadlines, response, res, observe)
      if (meter !== undefined) {
        meter.end()
        if (meter.inbandError !== undefined) ctx.error = `upstream_error: ${meter.inbandError.type}`
      } else if (json !== undefined && end._tag === "Complete") {
        json.foldInto(adapter.api, ctx.usage)
      }
      const failed = end._tag !== "Complete" || (meter !== undefined && !meter.finished)
      if (failed) {
        ctx.incomplete = true
        ctx.error ??=
          end._tag === "UpstreamFailed"
            ? end.reason
            : end._tag === "ClientStalled"
              ? "client_stalled"
              : "stream_ended_early"
        if (!sse) {
          yield* record(ctx)
          res.destroy()
          return
        }
        if (end._tag !== "ClientStalled")
          res.write(streamErrorEvent(adapter.api, "api_error", `upstream stream failed: ${ctx.error}`))
      } else if (ok && !ctx.usage.reported) {
        ctx.usageEstimated = true
        ctx.usage.inputTokens = ctx.inputEstimate
      }
      yield* record(ctx)
      res.end()
    })

    /**
     * The attempt loop. Only the first usable target is tried for now; the
     * reliability rules (retry, fallback, budgets, breakers) plug in here.
     */
    const tryTargets = Effect.fnUntraced(function* (
      ctx: RequestContext,
      request: ParsedRequest,
      route: RouteConfig,
      res: ServerResponse,
    ) {
      const outcomes: Array<TargetOutcome> = []
      const maxAttempts = 1
      for (const target of route.targets) {
        if (ctx.attempts >= maxAttempts) break
        const adapter = providers.get(target.provider)
        if (!adapter.serves(request.endpoint)) {
          outcomes.push({ ...target, outcome: "skipped", reason: `does not serve ${request.endpoint}` })
          continue
        }
        ctx.attempts++
        const upstream = adapter.build(request, target.model)
        const dispatcher = adapter.dispatcher(route.timeouts.connectMs)
        const result = yield* Effect.either(
          sendAttempt(deadlines, dispatcher, upstream, route.timeouts, RELAY_BUFFER_BYTES),
        )
        if (Either.isLeft(result)) {
          outcomes.push({ ...target, outcome: "failed", reason: result.left.reason })
          continue
        }
        ctx.target = target
        ctx.price = priceFor(config.prices, adapter.config, target.model)
        return yield* serveResponse(ctx, adapter, result.right, res)
      }
      return yield* new NoUpstreamResponse({
        message: "no target of the route produced a response",
        targets: outcomes,
      })
    })

    const serve = Effect.fnUntraced(function* (
      ctx: RequestContext,
      req: IncomingMessage,
      res: ServerResponse,
    ) {
      const raw = yield* readBody(req, config.server.maxBodyBytes)
      const request = parseRequest(ctx.endpoint, raw, req.headers)
      if (request instanceof InvalidRequest) return yield* request
      ctx.request = request
      const route = yield* resolveRoute(ctx, request)
      ctx.route = route
      ctx.inputEstimate = estimateInputTokens(request.json)
      return yield* tryTargets(ctx, request, route, res)
    })

    const fail = (ctx: RequestContext, res: ServerResponse, error: GatewayError) =>
      Effect.suspend(() => {
        const rendered = renderError(ctx.api, error)
        if (ctx.committed) {
          res.destroy()
          return record(ctx)
        }
        ctx.status = rendered.status
        ctx.error ??= error._tag
        return Effect.zipRight(
          record(ctx),
          Effect.sync(() => writeError(res, rendered, ctx)),
        )
      })

    const program = (ctx: RequestContext, req: IncomingMessage, res: ServerResponse) =>
      serve(ctx, req, res).pipe(
        Effect.catchAll((error) => fail(ctx, res, error)),
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.logError("request failed inside Tollgate", Cause.pretty(cause)).pipe(
              Effect.annotateLogs("request_id", ctx.requestId),
            ),
            fail(ctx, res, new InternalError({ message: "internal error" })),
          ),
        ),
        Effect.ensuring(
          Effect.suspend(() => {
            if (ctx.recorded) return Effect.void
            ctx.incomplete = ctx.committed
            ctx.error ??= "client_disconnected"
            if (!ctx.committed) ctx.status = 499
            return record(ctx)
          }),
        ),
      )

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
      const fiber = run(program(ctx, req, res))
      res.on("close", () => {
        if (!res.writableEnded) fiber.unsafeInterruptAsFork(fiber.id())
      })
    }

    return { handle }
  }),
)
