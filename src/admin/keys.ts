/**
 * The key endpoints of the admin API (SPEC "Keys at runtime, reload",
 * ADR 0050): `POST /admin/keys` makes a runtime key and shows its secret
 * once, `GET /admin/keys` lists config and runtime keys without secrets,
 * `DELETE /admin/keys/{tenant}/{id}` revokes a runtime key.
 */
import { ByteSize, Clock, Effect, Result, Schema } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { LiveConfig } from "../config/LiveConfig.js"
import type { BudgetConfig, KeyBudgets, TenantConfig } from "../config/model.js"
import { Name } from "../config/primitives.js"
import { parseErrorProblems } from "../config/problems.js"
import { KeyBudgets as KeyBudgetsSchema, parseOptions } from "../config/schema.js"
import { generateKey, hashKey } from "../keys/keys.js"
import { KeyStore, type KeyStoreService, type RuntimeKey } from "../keys/KeyStore.js"
import { parseInstant } from "./params.js"

const NO_STORE = { "cache-control": "no-store" }

const json = (body: unknown, status = 200) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: NO_STORE })

/** An admin error: `{"error":{"type":…,"message":…}}` (plus `param` for a bad field or parameter). */
const failure = (status: number, type: string, message: string, extra: Record<string, string> = {}) =>
  json({ error: { type, message, ...extra } }, status)

const invalid = (param: string, message: string) => failure(400, "invalid_request_error", message, { param })

/** Longest key id accepted here, in characters (config ids have no bound; a request's should). */
export const MAX_ID_LENGTH = 128

/** Largest `POST /admin/keys` body read, bytes. */
const MAX_BODY_BYTES = 16 * 1024

const FIELDS = new Set(["tenant", "id", "expires_at", "budgets"])

const isName = Schema.is(Name)

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())

/** One budget as the admin API shows it (null: none). */
export const budgetView = (config: BudgetConfig | undefined) =>
  config === undefined
    ? null
    : {
        limit_micro_usd: config.limitMicroUsd,
        limit_usd: config.limitMicroUsd / 1_000_000,
        mode: config.mode,
      }

const keyBudgetsView = (budgets: KeyBudgets) => ({
  day: budgetView(budgets.day),
  week: budgetView(budgets.week),
  month: budgetView(budgets.month),
})

/** A key as `GET /admin/keys` and `DELETE` show it. */
export interface KeyView {
  readonly id: string
  readonly tenant: string
  readonly source: "config" | "runtime"
  readonly created_at: string | null
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly last_used_at: string | null
  readonly budgets: ReturnType<typeof keyBudgetsView>
}

const runtimeView = (keys: KeyStoreService, key: RuntimeKey): KeyView => ({
  id: key.id,
  tenant: key.tenant,
  source: "runtime",
  created_at: iso(key.createdAt),
  expires_at: iso(key.expiresAt),
  revoked_at: iso(key.revokedAt),
  last_used_at: iso(keys.lastUsed(key.tenant, key.id)),
  budgets: keyBudgetsView(key.budgets),
})

const configViews = (keys: KeyStoreService, tenant: TenantConfig): Array<KeyView> =>
  tenant.keys.map((key) => ({
    id: key.id,
    tenant: tenant.name,
    source: "config",
    created_at: null,
    expires_at: null,
    revoked_at: null,
    last_used_at: iso(keys.lastUsed(tenant.name, key.id)),
    budgets: keyBudgetsView(key.budgets),
  }))

/** A checked `POST /admin/keys` body, or the 400 to answer. */
type CreateBody =
  | {
      readonly tenant: string
      readonly id: string
      readonly expiresAt: number | null
      readonly budgets: KeyBudgets
    }
  | HttpServerResponse.HttpServerResponse

const decodeBudgets = Schema.decodeUnknownResult(KeyBudgetsSchema)

/** `budgets` of a create body: `{day?, week?, month?}`, each `{limit_usd, mode}` as in the config; or the 400. */
const parseBudgets = (value: unknown): KeyBudgets | HttpServerResponse.HttpServerResponse => {
  if (value === undefined || value === null) return { day: undefined, week: undefined, month: undefined }
  const decoded = decodeBudgets(value, parseOptions)
  if (Result.isFailure(decoded)) {
    const problems = parseErrorProblems(decoded.failure, ["budgets"])
    return invalid("budgets", problems.join("; "))
  }
  const { day, week, month } = decoded.success
  return { day, week, month }
}

const parseCreate = (text: string, now: number): CreateBody => {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return failure(400, "invalid_request_error", "the body must be a JSON object")
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return failure(400, "invalid_request_error", "the body must be a JSON object")
  const fields = body as Record<string, unknown>
  for (const name of Object.keys(fields)) {
    if (!FIELDS.has(name))
      return invalid(name, `unknown field "${name.slice(0, 64)}" (tenant, id, expires_at, budgets)`)
  }
  const { tenant, id, expires_at: expires } = fields
  if (typeof tenant !== "string" || tenant.length === 0)
    return invalid("tenant", "tenant must be a tenant name")
  if (typeof id !== "string" || !isName(id) || id.length > MAX_ID_LENGTH) {
    return invalid(
      "id",
      `id must be a non-empty string of at most ${MAX_ID_LENGTH} characters without leading or trailing spaces`,
    )
  }
  const budgets = parseBudgets(fields.budgets)
  if (HttpServerResponse.isHttpServerResponse(budgets)) return budgets
  if (expires === undefined || expires === null) return { tenant, id, expiresAt: null, budgets }
  const expiresAt = typeof expires === "string" ? parseInstant(expires) : undefined
  if (expiresAt === undefined)
    return invalid("expires_at", "expires_at must be an ISO 8601 time with a zone (2027-01-31T00:00:00Z)")
  if (expiresAt <= now) return invalid("expires_at", "expires_at must be in the future")
  return { tenant, id, expiresAt, budgets }
}

const notFoundTenant = (name: string) =>
  failure(404, "not_found_error", `no tenant ${JSON.stringify(name.slice(0, 200))} in the config`)

/** The handlers of the key endpoints, over the running config (a reload's included) and the key store. */
export const makeKeyHandlers = Effect.gen(function* () {
  const live = yield* LiveConfig
  const keys = yield* KeyStore

  const create = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const text = yield* request.text.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MAX_BODY_BYTES)),
      Effect.option,
    )
    if (text._tag === "None")
      return failure(400, "invalid_request_error", `the body must be JSON of at most ${MAX_BODY_BYTES} bytes`)
    const parsed = parseCreate(text.value, yield* Clock.currentTimeMillis)
    if (HttpServerResponse.isHttpServerResponse(parsed)) return parsed
    const tenant = live.get().tenants.get(parsed.tenant)
    if (tenant === undefined) return notFoundTenant(parsed.tenant)
    if (tenant.keys.some((key) => key.id === parsed.id))
      return failure(
        409,
        "conflict_error",
        `tenant "${tenant.name}" already has a key "${parsed.id}" in the config`,
      )
    const secret = generateKey()
    const sha256 = hashKey(secret)
    return yield* keys
      .create({
        tenant: tenant.name,
        id: parsed.id,
        sha256,
        expiresAt: parsed.expiresAt,
        budgets: parsed.budgets,
      })
      .pipe(
        Effect.map((key) =>
          json(
            {
              id: key.id,
              tenant: key.tenant,
              secret,
              sha256,
              created_at: iso(key.createdAt),
              expires_at: iso(key.expiresAt),
              budgets: keyBudgetsView(key.budgets),
            },
            201,
          ),
        ),
        Effect.catchTags({
          KeyExists: (error) => Effect.succeed(failure(409, "conflict_error", error.message)),
          KeyStoreUnavailable: (error) =>
            Effect.succeed(
              failure(503, "unavailable_error", `the key store is unavailable: ${error.message}`),
            ),
        }),
      )
  })

  const list = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const params = new URL(request.url, "http://admin").searchParams
    for (const name of params.keys()) {
      if (name !== "tenant") return invalid(name, `unknown parameter "${name.slice(0, 64)}" (tenant)`)
    }
    const name = params.get("tenant") ?? undefined
    const config = live.get()
    const runtime = yield* keys.list(name)
    if (name !== undefined && !config.tenants.has(name) && runtime.length === 0) return notFoundTenant(name)
    const byTenant = new Map<string, Array<RuntimeKey>>()
    for (const key of runtime) byTenant.set(key.tenant, [...(byTenant.get(key.tenant) ?? []), key])
    const views: Array<KeyView> = []
    // Tenants in config order, each with its config keys then its runtime keys; then tenants gone from the config.
    for (const tenant of config.tenants.values()) {
      if (name !== undefined && tenant.name !== name) continue
      views.push(...configViews(keys, tenant))
      for (const key of byTenant.get(tenant.name) ?? []) views.push(runtimeView(keys, key))
      byTenant.delete(tenant.name)
    }
    for (const group of byTenant.values()) for (const key of group) views.push(runtimeView(keys, key))
    return json({ keys: views })
  })

  const revoke = Effect.gen(function* () {
    const { tenant = "", id = "" } = yield* HttpRouter.params
    const inConfig =
      live
        .get()
        .tenants.get(tenant)
        ?.keys.some((key) => key.id === id) === true
    // A runtime key made before a config key took its id is still revocable.
    if (inConfig && !(yield* keys.list(tenant)).some((key) => key.id === id)) {
      return failure(
        409,
        "conflict_error",
        `key "${id}" of tenant "${tenant}" is in the config: remove it from the config to revoke it`,
      )
    }
    return yield* keys.revoke(tenant, id).pipe(
      Effect.map((key) => json(runtimeView(keys, key))),
      Effect.catchTags({
        KeyNotFound: (error) => Effect.succeed(failure(404, "not_found_error", error.message)),
        KeyStoreUnavailable: (error) =>
          Effect.succeed(failure(503, "unavailable_error", `the key store is unavailable: ${error.message}`)),
      }),
    )
  })

  return { create, list, revoke }
})
