import { NodeHttpServer } from "@effect/platform-node"
import { Context, Data, Effect, Layer, Scope } from "effect"
import { HttpRouter } from "effect/http"
import { createServer, type IncomingMessage, type Server as NodeServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { UsageBacklog } from "../ops/UsageBacklog.js"
import { Config } from "../config/Config.js"
import { LiveConfig } from "../config/LiveConfig.js"
import { Reload } from "../ops/Reload.js"
import { AdminApi } from "../admin/AdminApi.js"
import { Gateway } from "../gateway/Gateway.js"
import { KeyStore } from "../keys/KeyStore.js"
import { Limits } from "../limits/Limits.js"
import type { Endpoint } from "../domain/endpoint.js"
import { Metrics } from "../ops/Metrics.js"
import { onClientError } from "./clientError.js"
import { makeRoutes, notFound } from "./routes.js"

/** The server could not listen (address in use, permission). */
export class ListenError extends Data.TaggedError("ListenError")<{ readonly message: string }> {}

/** The running HTTP server. */
export class Server extends Context.Service<
  Server,
  {
    /** `http://HOST:PORT` with the real port (config may say port 0). */
    readonly url: string
    readonly port: number
  }
>()("tollgate/Server") {}

const proxyEndpoint = (method: string | undefined, url: string | undefined): Endpoint | undefined => {
  if (method !== "POST" || url === undefined) return undefined
  const q = url.indexOf("?")
  const path = q < 0 ? url : url.slice(0, q)
  switch (path) {
    case "/v1/messages":
    case "/v1/messages/count_tokens":
    case "/v1/chat/completions":
    case "/v1/responses":
    case "/v1/embeddings":
      return path
    default:
      return undefined
  }
}

const formatHost = (host: string): string => (host.includes(":") ? `[${host}]` : host)

/**
 * One `node:http` server: the proxy endpoints go straight to the Gateway's
 * handler (the hot path); everything else to the `effect/http` router.
 */
export const layer = Layer.effect(
  Server,
  Effect.gen(function* () {
    const config = yield* Config
    const live = yield* LiveConfig
    const reloader = yield* Reload
    const gateway = yield* Gateway
    const limits = yield* Limits
    const admin = yield* AdminApi
    const router = yield* HttpRouter.make
    const metrics = yield* Metrics
    const keys = yield* KeyStore
    const backlog = yield* UsageBacklog
    yield* router.addAll(
      makeRoutes(
        live.get,
        { draining: gateway.draining, storeOk: limits.checkStore, usageLogFull: () => backlog.full },
        metrics,
        keys,
      ),
    )
    yield* router.addAll(admin.routes)
    const app = router.asHttpEffect().pipe(Effect.catch(() => notFound))
    const other = yield* NodeHttpServer.makeHandler(app, { scope: yield* Scope.Scope })
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      const endpoint = proxyEndpoint(req.method, req.url)
      if (endpoint !== undefined) gateway.handle(req, res, endpoint)
      else other(req, res)
    }
    const { bodyTimeoutMs, maxConnections } = config.server
    const server: NodeServer = createServer(
      {
        keepAliveTimeout: 65_000,
        // `server.body_timeout` bounds a slow upload (it holds memory): the proxy endpoints answer 408 when the
        // body has not arrived in time (src/gateway/parse.ts); the headers get the same time, and Node's own
        // deadline for the whole request is a backstop a little later. Responses are not limited by them.
        requestTimeout: bodyTimeoutMs + Math.min(60_000, bodyTimeoutMs) + 5_000,
        headersTimeout: Math.min(60_000, bodyTimeoutMs),
        connectionsCheckingInterval: Math.max(250, Math.min(5_000, Math.floor(bodyTimeoutMs / 10))),
      },
      handler,
    )
    // `server.max_connections`: past it, a new connection is closed as it is accepted (counted).
    server.maxConnections = maxConnections
    const telemetry = metrics.telemetry
    server.on("drop", () => telemetry.connectionDropped())
    server.on("clientError", onClientError)
    // `expect: 100-continue`: the proxy endpoints send the 100 only when they will read the body (a request
    // refused from its headers gets its answer instead, and its upload is never sent); the rest at once.
    server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
      if (proxyEndpoint(req.method, req.url) === undefined) res.writeContinue()
      handler(req, res)
    })
    const address = yield* Effect.acquireRelease(
      Effect.callback<AddressInfo, ListenError>((resume) => {
        const onError = (error: Error) => resume(Effect.fail(new ListenError({ message: error.message })))
        server.once("error", onError)
        server.listen(config.server.port, config.server.host, () => {
          server.off("error", onError)
          resume(Effect.succeed(server.address() as AddressInfo))
        })
      }),
      // Shutdown (SIGTERM, Ctrl-C): keep answering while open requests drain — /readyz says draining and new
      // proxy requests get 503 — then close every connection.
      () =>
        Effect.andThen(
          gateway.drain(config.server.shutdownGraceMs),
          Effect.callback<void>((resume) => {
            server.close(() => resume(Effect.void))
            server.closeAllConnections()
          }),
        ),
    )
    // Every part of the request path has registered for reloads: a SIGHUP that came during start applies now.
    reloader.markReady()
    return { url: `http://${formatHost(address.address)}:${address.port}`, port: address.port }
  }),
)
