/**
 * Checks that span sections of the config: route targets against providers, tenants against
 * routes, key hashes across tenants, budgets against the price table, key env vars.
 * Each returns `path: message` lines. They also run on the salvaged parts of entries that
 * failed to decode, so one broken entry does not hide the problems of the others.
 */
import { Config, Effect, Option } from "effect"
import type {
  ApiFormat,
  KeyConfig,
  PriceEntry,
  ProviderConfig,
  ProviderKind,
  RouteConfig,
  TenantConfig,
} from "./model.js"
import { priceFor } from "./pricing.js"
import { formatPath } from "./problems.js"

/** Most targets a route may have. */
export const maxTargets = 10

/** Which provider kinds serve each client API. */
export const kindsForApi: Record<ApiFormat, ReadonlyArray<ProviderKind>> = {
  anthropic: ["anthropic", "vertex", "bedrock"],
  openai: ["openai", "ollama", "azure", "gemini"],
}

/** The API a target speaks: its provider's, but a Vertex provider serves `gemini-…` models in the OpenAI format. */
export const targetApi = (kind: ProviderKind, model: string): ApiFormat =>
  kind === "vertex" && model.startsWith("gemini-")
    ? "openai"
    : kindsForApi.anthropic.includes(kind)
      ? "anthropic"
      : "openai"

/** What the route checks read of a route: a decoded route, or the salvaged part of a broken one. */
export interface RouteView extends Pick<RouteConfig, "name" | "api" | "translate"> {
  /** Resolved targets in file order; `undefined` where an entry could not be resolved (its problem is known). */
  readonly targets: ReadonlyArray<RouteConfig["targets"][number] | undefined>
}

/** What the route checks read of a provider. */
export type ProviderView = Pick<ProviderConfig, "name" | "kind">

/** What the tenant checks read of a tenant; keys that did not decode are `undefined` (indexes kept). */
export interface TenantView {
  readonly name: string
  readonly routes: TenantConfig["routes"]
  readonly keys: ReadonlyArray<KeyConfig | undefined>
}

/**
 * Target count, unknown providers and providers of the wrong API, per route. `providerNames`
 * holds every name under `providers`, so a provider that failed to decode is not also "unknown".
 */
export const checkRoutes = (
  routes: Iterable<RouteView>,
  providers: ReadonlyMap<string, ProviderView>,
  providerNames: ReadonlySet<string>,
): Array<string> => {
  const problems: Array<string> = []
  for (const route of routes) {
    const count = route.targets.length
    if (count === 0 || count > maxTargets) {
      const path = formatPath(["routes", route.name, "targets"])
      problems.push(`${path}: must have 1 to ${maxTargets} targets, has ${count}`)
    }
    route.targets.forEach((target, index) => {
      if (target === undefined) return
      const path = formatPath(["routes", route.name, "targets", index, "provider"])
      const provider = providers.get(target.provider)
      if (provider === undefined) {
        // An alias's unknown provider is its own problem (`aliases.NAME.provider`).
        if (!providerNames.has(target.provider) && target.alias === undefined)
          problems.push(`${path}: unknown provider "${target.provider}"`)
      } else if (!route.translate && targetApi(provider.kind, target.model) !== route.api) {
        const allowed = kindsForApi[route.api].join(", ")
        const gemini =
          provider.kind === "vertex" && target.model.startsWith("gemini-")
            ? ` (model "${target.model}" is a Gemini model)`
            : ""
        problems.push(
          `${path}: provider "${provider.name}" is kind ${provider.kind}${gemini}; an ${route.api} route takes only ${allowed} providers (or set translate: true)`,
        )
      }
    })
  }
  return problems
}

/** Unknown routes in a tenant's `routes` (`routeNames`: every name under `routes`), duplicate key ids in a tenant. */
export const checkTenants = (
  tenants: Iterable<TenantView>,
  routeNames: ReadonlySet<string>,
): Array<string> => {
  const problems: Array<string> = []
  for (const tenant of tenants) {
    if (tenant.routes !== "*") {
      tenant.routes.forEach((name, index) => {
        if (!routeNames.has(name)) {
          problems.push(`${formatPath(["tenants", tenant.name, "routes", index])}: unknown route "${name}"`)
        }
      })
    }
    const ids = new Map<string, number>()
    tenant.keys.forEach((key, index) => {
      if (key === undefined) return
      const first = ids.get(key.id)
      if (first === undefined) ids.set(key.id, index)
      else {
        const path = formatPath(["tenants", tenant.name, "keys", index, "id"])
        problems.push(`${path}: duplicate key id "${key.id}", first at keys[${first}]`)
      }
    })
  }
  return problems
}

/** A key hash that appears twice anywhere (in one tenant or across tenants). */
export const checkKeyHashes = (tenants: Iterable<TenantView>): Array<string> => {
  const problems: Array<string> = []
  const seen = new Map<string, string>()
  for (const tenant of tenants) {
    tenant.keys.forEach((key, index) => {
      if (key === undefined) return
      const path = formatPath(["tenants", tenant.name, "keys", index, "sha256"])
      const first = seen.get(key.sha256)
      if (first === undefined) seen.set(key.sha256, path)
      else problems.push(`${path}: duplicate key hash, also at ${first}`)
    })
  }
  return problems
}

const hasAny = (budgets: object): boolean => Object.values(budgets).some((b) => b !== undefined)

/** Where a tenant's first budget is: its own `budgets`, else the first key's with any; undefined: none. */
const budgetPathOf = (tenant: TenantConfig): ReadonlyArray<string | number> | undefined => {
  if (hasAny(tenant.budgets)) return ["tenants", tenant.name, "budgets"]
  const index = tenant.keys.findIndex((key) => hasAny(key.budgets))
  return index < 0 ? undefined : ["tenants", tenant.name, "keys", index, "budgets"]
}

/** A tenant with a budget (its own or a key's) whose routes reach a target that has no price. */
export const checkBudgetPrices = (
  tenants: ReadonlyMap<string, TenantConfig>,
  routes: ReadonlyMap<string, RouteConfig>,
  providers: ReadonlyMap<string, ProviderConfig>,
  prices: ReadonlyArray<PriceEntry>,
  pricingFile: string,
): Array<string> => {
  const problems: Array<string> = []
  for (const tenant of tenants.values()) {
    const budgetPath = budgetPathOf(tenant)
    if (budgetPath === undefined) continue
    const names = tenant.routes === "*" ? [...routes.keys()] : tenant.routes
    for (const name of names) {
      routes.get(name)?.targets.forEach((target, index) => {
        const provider = providers.get(target.provider)
        if (provider === undefined || priceFor(prices, provider, target.model) !== undefined) return
        const where = formatPath(["routes", name, "targets", index])
        problems.push(
          `${formatPath(budgetPath)}: ${where} (provider "${provider.name}", model "${target.model}") has no price in ${pricingFile}`,
        )
      })
    }
  }
  return problems
}

/**
 * Route targets with no price (a warning): their requests would be recorded at cost 0, and
 * counted in `tollgate_unpriced_requests_total`. Ollama targets cost 0 by default and never
 * show here. A tenant with a budget that reaches one is an error ({@link checkBudgetPrices}).
 */
export const checkUnpricedTargets = (
  routes: ReadonlyMap<string, RouteConfig>,
  providers: ReadonlyMap<string, ProviderConfig>,
  prices: ReadonlyArray<PriceEntry>,
  pricingFile: string,
): Array<string> => {
  const warnings: Array<string> = []
  for (const route of routes.values()) {
    route.targets.forEach((target, index) => {
      const provider = providers.get(target.provider)
      if (provider === undefined || priceFor(prices, provider, target.model) !== undefined) return
      warnings.push(
        `${formatPath(["routes", route.name, "targets", index])}: provider "${provider.name}" model "${target.model}" has no price in ${pricingFile}: its requests will be recorded at cost 0 (add a row for it to the price table)`,
      )
    })
  }
  return warnings
}

/** The value of env var `name` from Effect's `Config`; `undefined` when unset, empty or blank. */
export const readEnv = (name: string): Effect.Effect<string | undefined> =>
  Config.option(Config.String(name)).pipe(
    Effect.map(Option.getOrUndefined),
    Effect.map((value) => (value === undefined || value.trim() === "" ? undefined : value)),
    Effect.orElseSucceed(() => undefined),
  )

/** The env var that carries a provider's credential, and its key in the file; none for Ollama and ADC Vertex. */
const credentialEnv = (provider: ProviderConfig): { key: string; env: string } | undefined => {
  switch (provider.kind) {
    case "anthropic":
    case "openai":
    case "azure":
    case "gemini":
      return { key: "api_key_env", env: provider.apiKeyEnv }
    case "vertex":
      return provider.accessTokenEnv === undefined
        ? undefined
        : { key: "access_token_env", env: provider.accessTokenEnv }
    case "ollama":
    case "bedrock":
      return undefined
  }
}

/** Providers whose credential env var is unset or empty (a warning in `validate`, an error in `serve`). */
export const checkProviderEnv = (
  providers: ReadonlyMap<string, ProviderConfig>,
): Effect.Effect<Array<string>> =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    for (const provider of providers.values()) {
      const credential = credentialEnv(provider)
      if (credential === undefined || (yield* readEnv(credential.env)) !== undefined) continue
      const path = formatPath(["providers", provider.name, credential.key])
      problems.push(`${path}: environment variable ${credential.env} is unset or empty`)
    }
    return problems
  })
