import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Effect } from "effect"
import type { TollgateConfig } from "../config/model.js"
import { makeAuthenticator } from "../gateway/auth.js"
import { RouteNotFound, Unauthenticated } from "../domain/errors.js"
import { Metrics } from "../ops/Metrics.js"
import { renderError } from "../domain/errors.js"

/**
 * Everything that is not a proxy endpoint: health, readiness, metrics and
 * the model list, as routes of an `effect/http` router (ergonomics where
 * speed does not matter; ARCHITECTURE.md).
 */

const errorResponse = (api: "anthropic" | "openai", error: Unauthenticated | RouteNotFound) => {
  const rendered = renderError(api, error)
  return HttpServerResponse.text(rendered.body, {
    status: rendered.status,
    headers: rendered.headers,
    contentType: "application/json",
  })
}

/** The routes a key may use, in the list format of the SDK that asks (`anthropic-version` present: Anthropic). */
const models = (config: TollgateConfig) => {
  const authenticate = makeAuthenticator(config)
  return Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const anthropic = request.headers["anthropic-version"] !== undefined
    const principal = authenticate(request.headers)
    if (principal === undefined) {
      return errorResponse(
        anthropic ? "anthropic" : "openai",
        new Unauthenticated({ message: "invalid or missing API key" }),
      )
    }
    const allowed = principal.tenant.routes
    const names = [...config.routes.keys()].filter((name) => allowed === "*" || allowed.includes(name))
    if (anthropic) {
      return HttpServerResponse.jsonUnsafe({
        data: names.map((id) => ({
          type: "model",
          id,
          display_name: id,
          created_at: "1970-01-01T00:00:00Z",
        })),
        has_more: false,
        first_id: names[0] ?? null,
        last_id: names[names.length - 1] ?? null,
      })
    }
    return HttpServerResponse.jsonUnsafe({
      object: "list",
      data: names.map((id) => ({ id, object: "model", created: 0, owned_by: "tollgate" })),
    })
  })
}

/** The Prometheus exposition of this gateway (src/ops/Metrics.ts). */
const metrics = ({ scrape, contentType }: Metrics["Service"]) =>
  Effect.map(scrape, (text) => HttpServerResponse.text(text, { contentType }))

/** Readiness as reported by the parts that can be unready (the store, draining). */
export interface Readiness {
  readonly draining: () => boolean
  readonly storeOk: Effect.Effect<boolean>
}

/** The routes of the non-proxy endpoints (the admin API adds its own, src/admin). */
export const makeRoutes = (
  config: TollgateConfig,
  readiness: Readiness,
  metricsService: Metrics["Service"],
) => [
  HttpRouter.route("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" })),
  HttpRouter.route(
    "GET",
    "/readyz",
    Effect.suspend(() =>
      readiness.draining()
        ? Effect.succeed(HttpServerResponse.jsonUnsafe({ status: "draining" }, { status: 503 }))
        : Effect.map(readiness.storeOk, (ok) =>
            HttpServerResponse.jsonUnsafe({ status: "ready", store: ok ? "ok" : "unavailable" }),
          ),
    ),
  ),
  HttpRouter.route("GET", "/v1/models", models(config)),
  HttpRouter.route("GET", "/metrics", metrics(metricsService)),
]

/** What a path no route serves gets: 404 in the OpenAI error format. */
export const notFound = Effect.succeed(
  errorResponse("openai", new RouteNotFound({ message: "no such endpoint" })),
)
