import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type { TollgateConfig } from "../config/model.js"
import { makeAuthenticator } from "../gateway/auth.js"
import { RouteNotFound, Unauthenticated } from "../gateway/errors.js"
import { Metrics } from "../ops/Metrics.js"
import { renderError } from "./errorBody.js"

/**
 * Everything that is not a proxy endpoint: health, readiness and the model
 * list, through an @effect/platform router (ergonomics where speed does not
 * matter; ARCHITECTURE.md).
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
      return yield* HttpServerResponse.json({
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
    return yield* HttpServerResponse.json({
      object: "list",
      data: names.map((id) => ({ id, object: "model", created: 0, owned_by: "tollgate" })),
    })
  })
}

/** The Prometheus exposition of this gateway (src/ops/Metrics.ts). */
const metrics = Effect.flatMap(Metrics, ({ scrape, contentType }) =>
  Effect.map(scrape, (text) => HttpServerResponse.text(text, { contentType })),
)

/** Readiness as reported by the parts that can be unready (the store, draining). */
export interface Readiness {
  readonly draining: () => boolean
  readonly storeOk: Effect.Effect<boolean>
}

/** `admin`: the admin API's routes (src/admin; empty when admin is off). */
export const makeRouter = (
  config: TollgateConfig,
  readiness: Readiness,
  admin: HttpRouter.HttpRouter = HttpRouter.empty,
) =>
  HttpRouter.empty.pipe(
    HttpRouter.get("/healthz", HttpServerResponse.json({ status: "ok" })),
    HttpRouter.get(
      "/readyz",
      Effect.suspend(() =>
        readiness.draining()
          ? HttpServerResponse.json({ status: "draining" }, { status: 503 })
          : Effect.flatMap(readiness.storeOk, (ok) =>
              HttpServerResponse.json({ status: "ready", store: ok ? "ok" : "unavailable" }),
            ),
      ),
    ),
    HttpRouter.get("/v1/models", models(config)),
    HttpRouter.get("/metrics", metrics),
    HttpRouter.concat(admin),
    Effect.catchTag("RouteNotFound", () =>
      Effect.succeed(errorResponse("openai", new RouteNotFound({ message: "no such endpoint" }))),
    ),
  )
