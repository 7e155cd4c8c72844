import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Config } from "../config/Config.js"
import { LiveConfig } from "../config/LiveConfig.js"
import { Reload } from "../ops/Reload.js"
import { Store } from "../limits/Store.js"
import { OpenRequests } from "../ops/OpenRequests.js"
import { Breakers } from "../reliability/Breakers.js"
import { makeAdminAuth, readAdminToken, WWW_AUTHENTICATE, type AdminAuth } from "./auth.js"
import { makeKeyHandlers } from "./keys.js"
import { consoleRoutes } from "./console.js"
import { parseSeriesQuery, parseUsageQuery, usageFormat } from "./params.js"
import { csvFilename, usageCsv } from "./csv.js"
import { seriesBody } from "./series.js"
import { configKeys, tenantView, viewBudgets, type ViewKey } from "./tenants.js"
import { KeyStore } from "../keys/KeyStore.js"
import { isLive } from "../keys/table.js"
import { UsageIndex } from "./UsageIndex.js"
import type { TenantConfig } from "../config/model.js"

/**
 * The admin API (`/admin/*`, SPEC "HTTP API"): tenants, usage totals and
 * breakers, behind the bearer token of `admin.token_env`. When that variable
 * is unset or empty there are no routes, so `/admin/*` answers the same 404
 * as every other unknown path does.
 */
export class AdminApi extends Context.Service<
  AdminApi,
  {
    /** Routes to add to the non-proxy router (`HttpRouter.addAll`); empty when admin is off. */
    readonly routes: ReadonlyArray<HttpRouter.Route<never, never>>
  }
>()("tollgate/admin/AdminApi") {}

const NO_STORE = { "cache-control": "no-store" }

const json = (body: unknown, status = 200) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: NO_STORE })

/** An admin error: `{"error":{"type":…,"message":…}}` (plus `param` for a bad query parameter). */
const failure = (status: number, type: string, message: string, extra: Record<string, string> = {}) =>
  json({ error: { type, message, ...extra } }, status)

const iso = (ms: number): string | null => (ms === 0 ? null : new Date(ms).toISOString())

const makeHandlers = Effect.gen(function* () {
  const live = yield* LiveConfig
  const reloader = yield* Reload
  const store = yield* Store
  const openRequests = yield* OpenRequests
  const breakers = yield* Breakers
  const index = yield* UsageIndex
  const keyStore = yield* KeyStore

  const view = (tenant: TenantConfig, now: number) =>
    Effect.gen(function* () {
      // Config keys, then the live runtime keys of the tenant: each with its budgets and their spend.
      const runtime = (yield* keyStore.list(tenant.name)).filter((key) => isLive(key, now))
      const keys = [
        ...configKeys(tenant),
        ...runtime.map((key): ViewKey => ({ id: key.id, source: "runtime", budgets: key.budgets })),
      ]
      return yield* store.tenantState(tenant.name, now, viewBudgets(tenant, keys, now)).pipe(
        Effect.map((state) => tenantView(tenant, state, openRequests.bound(tenant.name), now, keys)),
        Effect.catch((error) =>
          Effect.succeed(tenantView(tenant, error.message, openRequests.bound(tenant.name), now, keys)),
        ),
      )
    })

  const tenants = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const views = yield* Effect.forEach(live.get().tenants.values(), (tenant) => view(tenant, now), {
      concurrency: 16,
    })
    return json({ tenants: views })
  })

  const tenant = Effect.gen(function* () {
    const { name } = yield* HttpRouter.params
    const found = name === undefined ? undefined : live.get().tenants.get(name)
    if (found === undefined)
      return failure(404, "not_found_error", `no tenant ${JSON.stringify(name ?? "")} in the config`)
    return json(yield* view(found, yield* Clock.currentTimeMillis))
  })

  // Whose records the usage answers hold: the fleet's (the usage database) or this copy's (its file).
  const source = {
    "x-tollgate-usage-source": (yield* Config).usageDatabase === undefined ? "file" : "database",
  }
  const sourced = (response: HttpServerResponse.HttpServerResponse) =>
    HttpServerResponse.setHeaders(response, source)

  const usage = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const params = new URL(request.url, "http://admin").searchParams
    const parsed = parseUsageQuery(params)
    if (Result.isFailure(parsed)) {
      return failure(400, "invalid_request_error", parsed.failure.message, { param: parsed.failure.param })
    }
    const query = parsed.success
    const answered = yield* Effect.result(index.query(query))
    if (Result.isFailure(answered)) return failure(503, "api_error", answered.failure.message)
    const result = answered.success
    if (usageFormat(params) === "csv") {
      return HttpServerResponse.text(usageCsv(result), {
        contentType: "text/csv; charset=utf-8",
        headers: {
          ...NO_STORE,
          ...source,
          "content-disposition": `attachment; filename="${csvFilename(query)}"`,
        },
      })
    }
    return sourced(
      json({
        tenant: query.tenant ?? null,
        since: query.since === undefined ? null : new Date(query.since).toISOString(),
        until: query.until === undefined ? null : new Date(query.until).toISOString(),
        group_by: query.groupBy ?? null,
        totals: result.totals,
        ...(result.groups === undefined ? {} : { groups: result.groups }),
      }),
    )
  })

  /** `GET /admin/usage/series`: requests, errors, cost and tokens per UTC minute, hour or day. */
  const usageSeries = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const parsed = parseSeriesQuery(new URL(request.url, "http://admin").searchParams)
    if (Result.isFailure(parsed)) {
      return failure(400, "invalid_request_error", parsed.failure.message, { param: parsed.failure.param })
    }
    return yield* index.series(parsed.success).pipe(
      Effect.map((series) => sourced(json(seriesBody(series)))),
      Effect.catchTag("TooManyBuckets", (error) =>
        Effect.succeed(failure(400, "invalid_request_error", error.message, { param: error.param })),
      ),
      Effect.catchTag("UsageUnavailable", (error) =>
        Effect.succeed(failure(503, "api_error", error.message)),
      ),
    )
  })

  const breakerList = Effect.sync(() =>
    json({
      breakers: breakers.view().map((b) => ({
        tenant: b.tenant,
        provider: b.provider,
        model: b.model,
        region: b.region === "" ? null : b.region,
        state: b.state,
        failure_ratio: b.failureRatio,
        attempts: b.attempts,
        testable_at: iso(b.testableAt),
        cooldown_until: iso(b.cooldownUntil),
      })),
    }),
  )

  /** `POST /admin/reload`: what SIGHUP does (ADR 0052). */
  const reload = Effect.map(reloader.reload("admin"), (outcome) =>
    outcome.ok
      ? json({ status: "reloaded", warnings: outcome.warnings })
      : json({ status: "refused", problems: outcome.problems }, 422),
  )

  return { tenants, tenant, usage, usageSeries, breakerList, reload }
})

const guarded =
  (auth: AdminAuth) =>
  <E, R>(handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      auth.check(request.headers)
        ? handler
        : Effect.succeed(
            HttpServerResponse.jsonUnsafe(
              { error: { type: "authentication_error", message: "missing or wrong admin bearer token" } },
              { status: 401, headers: { ...NO_STORE, "www-authenticate": WWW_AUTHENTICATE } },
            ),
          ),
    )

/**
 * The admin API. The token is read from the env var named by
 * `admin.token_env` through Effect's `Config` when the layer is built, and
 * never logged.
 */
export const layer = Layer.effect(
  AdminApi,
  Effect.gen(function* () {
    const config = yield* Config
    const token = yield* readAdminToken(config.admin.tokenEnv)
    if (Option.isNone(token)) {
      yield* Effect.logInfo("admin API off").pipe(Effect.annotateLogs("token_env", config.admin.tokenEnv))
      return AdminApi.of({ routes: [] })
    }
    const guard = guarded(makeAdminAuth(token.value))
    const handlers = yield* makeHandlers
    const keys = yield* makeKeyHandlers
    return AdminApi.of({
      routes: [
        HttpRouter.route("GET", "/admin/tenants", guard(handlers.tenants)),
        HttpRouter.route("GET", "/admin/tenants/:name", guard(handlers.tenant)),
        HttpRouter.route("GET", "/admin/usage", guard(handlers.usage)),
        HttpRouter.route("GET", "/admin/usage/series", guard(handlers.usageSeries)),
        HttpRouter.route("GET", "/admin/breakers", guard(handlers.breakerList)),
        HttpRouter.route("POST", "/admin/reload", guard(handlers.reload)),
        HttpRouter.route("POST", "/admin/keys", guard(keys.create)),
        HttpRouter.route("GET", "/admin/keys", guard(keys.list)),
        HttpRouter.route("DELETE", "/admin/keys/:tenant/:id", guard(keys.revoke)),
        ...consoleRoutes(),
      ],
    })
  }),
)
