import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Effect } from "effect"
import type { TollgateConfig } from "../config/model.js"
import { makeAuthenticator } from "../gateway/auth.js"
import type { KeyLookup } from "../keys/KeyStore.js"
import { pathApi, type ApiFormat } from "../domain/endpoint.js"
import { EndpointNotFound, RouteNotFound, Unauthenticated } from "../domain/errors.js"
import { Metrics } from "../ops/Metrics.js"
import type { TelemetryService } from "../ops/Telemetry.js"
import { renderError } from "../domain/errors.js"

/**
 * Everything that is not a proxy endpoint: health, readiness, metrics and
 * the model list, as routes of an `effect/http` router (ergonomics where
 * speed does not matter; ARCHITECTURE.md).
 */

const errorResponse = (api: ApiFormat, error: Unauthenticated | RouteNotFound | EndpointNotFound) => {
  const rendered = renderError(api, error)
  return HttpServerResponse.text(rendered.body, {
    status: rendered.status,
    headers: rendered.headers,
    contentType: "application/json",
  })
}

/** A route as one model, in the format of the SDK that asks. */
const modelObject = (anthropic: boolean, id: string) =>
  anthropic
    ? { type: "model", id, display_name: id, created_at: "1970-01-01T00:00:00Z" }
    : { id, object: "model", created: 0, owned_by: "tollgate" }

/**
 * The model endpoints: the routes a key may use (`GET /v1/models`) or one of
 * them (`GET /v1/models/{route}`), in the format of the SDK that asks
 * (`anthropic-version` present: Anthropic). A route the key may not use is
 * not found, as it is absent from the list.
 */
const models = (current: () => TollgateConfig, telemetry: TelemetryService, keys: KeyLookup) => {
  // One authenticator per configuration (a reload makes a new one).
  let built:
    | { readonly config: TollgateConfig; readonly authenticate: ReturnType<typeof makeAuthenticator> }
    | undefined
  return Effect.gen(function* () {
    const config = current()
    if (built?.config !== config) built = { config, authenticate: makeAuthenticator(config, keys) }
    const authenticate = built.authenticate
    const request = yield* HttpServerRequest.HttpServerRequest
    const anthropic = request.headers["anthropic-version"] !== undefined
    const principal = authenticate(request.headers)
    if (principal === undefined) {
      telemetry.authFailed()
      return errorResponse(
        anthropic ? "anthropic" : "openai",
        new Unauthenticated({ message: "invalid or missing API key" }),
      )
    }
    const allowed = principal.tenant.routes
    const names = [...config.routes.keys()].filter((name) => allowed === "*" || allowed.includes(name))
    const one = routeOfPath(request.url)
    if (one !== undefined) {
      if (!names.includes(one)) {
        return errorResponse(
          anthropic ? "anthropic" : "openai",
          new RouteNotFound({ message: `model "${one}" is not a route of this gateway` }),
        )
      }
      return HttpServerResponse.jsonUnsafe(modelObject(anthropic, one))
    }
    if (anthropic) {
      return HttpServerResponse.jsonUnsafe({
        data: names.map((id) => modelObject(true, id)),
        has_more: false,
        first_id: names[0] ?? null,
        last_id: names[names.length - 1] ?? null,
      })
    }
    return HttpServerResponse.jsonUnsafe({ object: "list", data: names.map((id) => modelObject(false, id)) })
  })
}

/** The route name of `/v1/models/{route}` (percent-decoded), or undefined for the list. */
const routeOfPath = (url: string): string | undefined => {
  const q = url.indexOf("?")
  const path = q < 0 ? url : url.slice(0, q)
  const prefix = "/v1/models/"
  if (!path.startsWith(prefix) || path.length === prefix.length) return undefined
  try {
    return decodeURIComponent(path.slice(prefix.length))
  } catch {
    return path.slice(prefix.length)
  }
}

/** The Prometheus exposition of this gateway (src/ops/Metrics.ts). */
const metrics = ({ scrape, contentType }: Metrics["Service"]) =>
  Effect.map(scrape, (text) => HttpServerResponse.text(text, { contentType }))

/** Readiness as reported by the parts that can be unready (the store, draining). */
export interface Readiness {
  readonly draining: () => boolean
  readonly storeOk: Effect.Effect<boolean>
  /** True while the usage file refuses writes and its backlog is full (ADR 0070): not ready. */
  readonly usageLogFull: () => boolean
}

/** The routes of the non-proxy endpoints (the admin API adds its own, src/admin). */
export const makeRoutes = (
  /** The running configuration (it changes on reload). */
  config: () => TollgateConfig,
  readiness: Readiness,
  metricsService: Metrics["Service"],
  /** The runtime keys (`src/keys/KeyStore.ts`): they may list models too. */
  keys: KeyLookup,
) => [
  HttpRouter.route("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" })),
  HttpRouter.route(
    "GET",
    "/readyz",
    Effect.suspend(() =>
      readiness.draining()
        ? Effect.succeed(HttpServerResponse.jsonUnsafe({ status: "draining" }, { status: 503 }))
        : Effect.map(readiness.storeOk, (ok) => {
            const store = ok ? "ok" : "unavailable"
            return readiness.usageLogFull()
              ? HttpServerResponse.jsonUnsafe(
                  { status: "not_ready", store, usage_log: "full" },
                  { status: 503 },
                )
              : HttpServerResponse.jsonUnsafe({ status: "ready", store })
          }),
    ),
  ),
  HttpRouter.route("GET", "/v1/models", models(config, metricsService.telemetry, keys)),
  HttpRouter.route("GET", "/v1/models/:route", models(config, metricsService.telemetry, keys)),
  HttpRouter.route("GET", "/metrics", metrics(metricsService)),
]

/**
 * What a path no route serves gets: 404 `not_found_error` in the format of
 * the API the path belongs to (`/v1/messages…` Anthropic, else OpenAI), with
 * no `model_not_found` code (it is not an unknown model).
 */
export const notFound = Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
  const q = request.url.indexOf("?")
  const path = q < 0 ? request.url : request.url.slice(0, q)
  return errorResponse(
    pathApi(path),
    new EndpointNotFound({ message: `no such endpoint: ${request.method} ${path.slice(0, 200)}` }),
  )
})
