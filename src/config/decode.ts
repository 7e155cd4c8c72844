/**
 * Parsed YAML → {@link TollgateConfig}: every section decoded on its own (so one bad section
 * does not hide problems in another), the price table loaded, the cross-section checks run,
 * and all problems reported together.
 */
import { bedrockBaseUrl, vertexBaseUrl } from "../domain/providerDefaults.js"
import * as NodePath from "node:path"
import { readFileSync } from "node:fs"
import { totalmem } from "node:os"
import { Effect, Result, Schema } from "effect"
import {
  checkBudgetPrices,
  checkKeyHashes,
  checkProviderEnv,
  checkRoutes,
  checkTenants,
  checkUnpricedTargets,
  readEnv,
} from "./checks.js"
import { decodeNamed, salvageProvider, salvageRoute, salvageTenant, viewsOf } from "./entries.js"
import type { RouteView } from "./checks.js"
import type {
  PriceEntry,
  ProviderConfig,
  RouteConfig,
  RouteStrategy,
  TargetConfig,
  TenantConfig,
  TollgateConfig,
} from "./model.js"
import { resolveTargets } from "./targets.js"
import { decodePriceTable } from "./pricing.js"
import { ConfigInvalid, formatPath, parseErrorProblems } from "./problems.js"
import * as S from "./schema.js"
import { describeYamlError, readYamlFile, type YamlDocument, type YamlFileError } from "./yamlFile.js"

/** `serve` refuses unset provider key env vars; `validate` only warns about them. */
export type LoadMode = "serve" | "validate"

export interface DecodeOptions {
  /** Path of the config file; relative paths in it resolve against its folder. */
  readonly path: string
  readonly mode: LoadMode
  /** The price file's content (`{ prices: [...] }` or just the list); when given, `pricing.file` is not read. */
  readonly prices?: unknown
  /** Working directory: absent `usage.file` resolves against it, and absent `pricing.file` falls back to it (ADR 0051). Default `process.cwd()`. */
  readonly cwd?: string
}

/** A decoded config and the warnings to log (each one line, `path: message`). */
export interface Loaded {
  readonly config: TollgateConfig
  readonly warnings: ReadonlyArray<string>
}

/** Default `usage.file`, relative to the working directory. */
export const defaultUsageFile = "data/usage.jsonl"
/** Absent `pricing.file`: this name beside the config file first (ADR 0051)… */
export const pricingBesideConfig = "pricing.yaml"
/** …then this path in the working directory (ADR 0001). */
export const defaultPricingFile = "config/pricing.yaml"

/** Top-level keys of `tollgate.yaml`, in the order the docs list them. */
const topLevelKeys = [
  "server",
  "admin",
  "store",
  "usage",
  "keys",
  "pricing",
  "reservation",
  "retry",
  "breaker",
  "timeouts",
  "sessions",
  "telemetry",
  "providers",
  "aliases",
  "routes",
  "tenants",
] as const

/** What an absent or empty section decodes from (`{}` unless listed). */
const emptySections: Partial<Record<(typeof topLevelKeys)[number], unknown>> = { store: { kind: "memory" } }

const isMapping = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Decodes a parsed config (what `yaml` gives for `tollgate.yaml`) exactly as `loadConfig` does
 * after reading the file: all sections, the price table (read from `pricing.file` unless
 * `options.prices` is given), the cross-checks and the provider env vars.
 */
export const decodeConfig = Effect.fn("Config.decode")(function* (raw: unknown, options: DecodeOptions) {
  const problems: Array<string> = []
  const warnings: Array<string> = []
  const cwd = options.cwd ?? process.cwd()
  const configPath = NodePath.resolve(cwd, options.path)
  const root = raw === null || raw === undefined ? {} : raw
  if (!isMapping(root))
    return yield* new ConfigInvalid({ problems: [`${configPath}: must be a mapping of sections`] })
  for (const key of Object.keys(root)) {
    if (!(topLevelKeys as ReadonlyArray<string>).includes(key)) {
      problems.push(`${formatPath([key])}: unknown key (expected one of: ${topLevelKeys.join(", ")})`)
    }
  }

  /** A section's decoded value; when it is invalid, its problems are pushed and its defaults returned. */
  const section = <A>(name: (typeof topLevelKeys)[number], schema: Schema.Decoder<A>): A => {
    const empty = emptySections[name] ?? {}
    const decoded = Schema.decodeUnknownResult(schema)(root[name] ?? empty, S.parseOptions)
    if (Result.isSuccess(decoded)) return decoded.success
    problems.push(...parseErrorProblems(decoded.failure, [name]))
    return Schema.decodeUnknownSync(schema)(empty)
  }

  const server = section("server", S.ServerSection)
  const admin = section("admin", S.AdminSection)
  const store = section("store", S.StoreSection)
  const usage = section("usage", S.UsageSection)
  const keys = section("keys", S.KeysSection)
  const pricing = section("pricing", S.PricingSection)
  const reservation = section("reservation", S.ReservationSection)
  const retry = section("retry", S.RetrySection)
  const breaker = section("breaker", S.BreakerSection)
  const timeouts = section("timeouts", S.TimeoutsSection)
  const sessions = section("sessions", S.SessionsSection)
  const telemetry = section("telemetry", S.TelemetrySection)
  const providerFiles = decodeNamed("providers", root.providers, S.Provider, salvageProvider, problems)
  const aliasFiles = decodeNamed("aliases", root.aliases, S.Alias, () => undefined, problems)
  const routeFiles = decodeNamed("routes", root.routes, S.Route, salvageRoute, problems)
  const tenantFiles = decodeNamed("tenants", root.tenants, S.Tenant, salvageTenant, problems)

  const providers = mapValues(providerFiles.decoded, toProvider)
  /** Targets resolved against `aliases:` (ADR 0073), per route, failed entries `undefined`. */
  const resolved = new Map<string, Array<TargetConfig | undefined>>()
  const resolve = (name: string, strategy: RouteStrategy, files: ReadonlyArray<S.TargetFile>) => {
    const targets = resolveTargets(name, strategy, files, aliasFiles.decoded, aliasFiles.names, problems)
    resolved.set(name, targets)
    return targets
  }
  const routes = mapValues(routeFiles.decoded, (name, route): RouteConfig => {
    const strategy = route.strategy ?? "ordered"
    return {
      name,
      api: route.api,
      translate: route.translate ?? false,
      retry: { ...retry, maxAttempts: route.retry?.maxAttempts ?? retry.maxAttempts },
      timeouts: { ...timeouts, ...route.timeouts },
      targets: resolve(name, strategy, route.targets).filter((t) => t !== undefined),
      strategy,
      sticky: route.sticky ?? false,
    }
  })
  const salvagedRoutes = mapValues(routeFiles.salvaged, (name, route): RouteView => ({
    name,
    api: route.api,
    translate: route.translate,
    targets: resolve(name, route.strategy, route.targets),
  }))
  const aliases = mapValues(aliasFiles.decoded, (_name, alias) => ({
    provider: alias.provider,
    model: alias.model,
  }))
  const tenants = mapValues(tenantFiles.decoded, toTenant)
  if (store.kind === "redis" && store.cluster && !/^\/?0?$/.test(new URL(store.url).pathname))
    problems.push(
      "store.url: a Redis Cluster has only database 0: leave the database number out with store.cluster: true",
    )
  if (breaker.shared && store.kind !== "redis")
    problems.push(
      "breaker.shared: needs store.kind: redis (the copies share their breakers through the limit store's Redis)",
    )
  if (server.maxBufferedBytes !== undefined && server.maxBufferedBytes < 2 * server.maxBodyBytes) {
    problems.push(
      `${formatPath(["server", "max_buffered_bytes"])}: must be at least twice server.max_body_bytes (${2 * server.maxBodyBytes}): one tenant may hold half of it, and a body of the largest size must fit`,
    )
  }
  for (const [name, route] of routeFiles.decoded) {
    if (route.retry?.budgetRatio !== undefined) {
      warnings.push(
        `${formatPath(["routes", name, "retry", "budget_ratio"])}: ignored: the retry budget is shared by the whole process and uses retry.budget_ratio (ADR 0008)`,
      )
    }
  }

  const configDir = NodePath.dirname(configPath)
  const usageFile = resolveFile(usage.file, configDir, defaultUsageFile, cwd)
  // Runtime keys of the memory store: beside the usage file unless the config names a file.
  const keysFile =
    keys.file === undefined
      ? NodePath.join(NodePath.dirname(usageFile), "keys.jsonl")
      : NodePath.resolve(configDir, keys.file)
  // An absent pricing.file is looked for beside the config, then in the working directory's config/ (ADR 0051).
  const pricingFiles =
    pricing.file === undefined
      ? [
          ...new Set([
            NodePath.join(configDir, pricingBesideConfig),
            NodePath.resolve(cwd, defaultPricingFile),
          ]),
        ]
      : [NodePath.resolve(configDir, pricing.file)]
  const { file: pricingFile, prices } = yield* loadPrices(
    options.prices,
    pricingFiles,
    { configPath, explicit: pricing.file !== undefined },
    problems,
    warnings,
  )

  const providerViews = viewsOf(providerFiles.names, providers, providerFiles.salvaged)
  const tenantViews = viewsOf(tenantFiles.names, tenants, tenantFiles.salvaged)
  problems.push(
    ...checkRoutes(
      viewsOf(
        routeFiles.names,
        mapValues(routes, (name, route): RouteView => ({ ...route, targets: resolved.get(name)! })),
        salvagedRoutes,
      ).values(),
      providerViews,
      providerFiles.names,
    ),
  )
  for (const [name, alias] of aliasFiles.decoded) {
    if (!providerFiles.names.has(alias.provider))
      problems.push(`${formatPath(["aliases", name, "provider"])}: unknown provider "${alias.provider}"`)
  }
  problems.push(...checkTenants(tenantViews.values(), routeFiles.names))
  problems.push(...checkKeyHashes(tenantViews.values()))
  if (prices !== undefined)
    problems.push(...checkBudgetPrices(tenants, routes, providers, prices, pricingFile))
  const envProblems = yield* checkProviderEnv(providers)
  if (usage.database !== undefined && (yield* readEnv(usage.database.urlEnv)) === undefined)
    envProblems.push(
      `${formatPath(["usage", "database", "url_env"])}: environment variable ${usage.database.urlEnv} is unset or empty`,
    )
  ;(options.mode === "serve" ? problems : warnings).push(...envProblems)
  // No silent $0: a target without a price would be metered at cost 0.
  if (prices !== undefined) warnings.push(...checkUnpricedTargets(routes, providers, prices, pricingFile))
  if (routeFiles.names.size === 0)
    warnings.push("routes: none configured: the gateway will refuse every request (no route to serve it)")
  if (tenantFiles.names.size === 0)
    warnings.push("tenants: none configured: the gateway will refuse every request (no tenant holds a key)")

  if (problems.length > 0 || prices === undefined) return yield* new ConfigInvalid({ problems })
  const config: TollgateConfig = {
    path: configPath,
    server: {
      host: server.listen.host,
      port: server.listen.port,
      shutdownGraceMs: server.shutdownGraceMs,
      maxBodyBytes: server.maxBodyBytes,
      // The default is never less than two bodies of the largest size (one tenant may hold half).
      maxBufferedBytes:
        server.maxBufferedBytes ?? Math.max(defaultMaxBufferedBytes(), 2 * server.maxBodyBytes),
      bodyTimeoutMs: server.bodyTimeoutMs,
      maxConnections: server.maxConnections,
      ...(server.maxConcurrentRequests === undefined
        ? {}
        : { maxConcurrentRequests: server.maxConcurrentRequests }),
    },
    admin,
    store,
    usageFile,
    usageDatabase: usage.database,
    usageBacklogMaxBytes: usage.backlogMaxBytes,
    keysFile,
    pricingFile,
    reservation,
    retry,
    breaker,
    timeouts,
    sessions,
    telemetry: {
      otlpEndpoint: telemetry.otlpEndpoint,
      otlpProtocol: telemetry.otlpProtocol,
      serviceName: telemetry.serviceName,
      sampleRatio: telemetry.sampleRatio,
    },
    providers,
    aliases,
    routes,
    tenants,
    prices,
  }
  return { config, warnings } satisfies Loaded
})

/**
 * `server.max_buffered_bytes` when the config leaves it out: 1/16 of the
 * memory this process may use (its cgroup's limit when it has one, else the
 * machine's), between 64 MiB and 1 GiB.
 */
export const defaultMaxBufferedBytes = (): number => {
  const total = totalmem()
  const constrained = process.constrainedMemory()
  const available = constrained > 0 && constrained < total ? constrained : total
  return Math.min(1024 * MIB, Math.max(64 * MIB, Math.floor(available / 16)))
}
const MIB = 1024 * 1024

const mapValues = <A, B>(map: ReadonlyMap<string, A>, f: (name: string, a: A) => B): ReadonlyMap<string, B> =>
  new Map([...map].map(([name, a]) => [name, f(name, a)]))

const toProvider = (name: string, file: S.ProviderFile): ProviderConfig => {
  switch (file.kind) {
    case "vertex":
      return {
        name,
        kind: "vertex",
        project: file.project,
        region: file.region,
        baseUrl: file.baseUrl ?? vertexBaseUrl(file.region),
        accessTokenEnv: file.accessTokenEnv,
      }
    case "bedrock":
      return {
        name,
        kind: "bedrock",
        region: file.region,
        baseUrl: file.baseUrl ?? bedrockBaseUrl(file.region),
      }
    case "anthropic":
    case "openai":
    case "ollama":
    case "azure":
    case "gemini":
      return { name, ...file }
  }
}

const toTenant = (name: string, file: S.TenantFile): TenantConfig => ({
  name,
  keys: file.keys.map((key) => ({
    id: key.id,
    sha256: key.sha256,
    budgets: { day: key.budgets.day, week: key.budgets.week, month: key.budgets.month },
  })),
  routes: file.routes,
  limits: {
    requestsPerMinute: file.limits.requestsPerMinute,
    tokensPerMinute: file.limits.tokensPerMinute,
    concurrentRequests: file.limits.concurrentRequests,
    ...(file.limits.queue === undefined ? {} : { queue: file.limits.queue }),
  },
  budgets: {
    day: file.budgets.day,
    week: file.budgets.week,
    month: file.budgets.month,
    session: file.budgets.session,
  },
})

/** An explicit path resolves against the config's folder; an absent one (the default) against `cwd` (ADR 0001). */
const resolveFile = (
  explicit: string | undefined,
  configDir: string,
  fallback: string,
  cwd: string,
): string =>
  explicit === undefined ? NodePath.resolve(cwd, fallback) : NodePath.resolve(configDir, explicit)

const isNotFound = (error: YamlFileError): boolean =>
  error.reason === "read" && error.detail.startsWith("ENOENT")

/**
 * The first of `files` that can be read and parsed. With `skipMissing`, a file that does not
 * exist is passed over (`undefined` when none exists); any other failure is the result.
 */
const readFirst = (
  files: ReadonlyArray<string>,
  skipMissing: boolean,
): Effect.Effect<Result.Result<YamlDocument & { readonly file: string }, YamlFileError> | undefined> =>
  Effect.gen(function* () {
    for (const file of files) {
      const read = yield* Effect.result(readYamlFile(file))
      if (Result.isSuccess(read)) return Result.succeed({ ...read.success, file })
      if (!(skipMissing && isNotFound(read.failure))) return Result.fail(read.failure)
    }
    return undefined
  })

/** Whether `other` exists and its bytes differ from `file`'s (unreadable counts as not existing). */
const differs = (file: string, other: string): boolean => {
  try {
    return !readFileSync(file).equals(readFileSync(other))
  } catch {
    return false
  }
}

/**
 * The price table from `inline`, or from the first of `candidates` that exists (several only
 * when `pricing.file` is absent). Problems are pushed and `prices` is `undefined` when it is
 * missing or invalid; a missing one says which paths were tried and how to name the right one.
 */
const loadPrices = (
  inline: unknown,
  candidates: ReadonlyArray<string>,
  from: { readonly configPath: string; readonly explicit: boolean },
  problems: Array<string>,
  warnings: Array<string>,
): Effect.Effect<{ readonly file: string; readonly prices: ReadonlyArray<PriceEntry> | undefined }> =>
  Effect.gen(function* () {
    const howToFix = `set pricing.file in ${from.configPath} to the price table's path (a relative path is read from ${NodePath.dirname(from.configPath)})`
    let file = candidates[0]!
    let raw = inline
    if (inline === undefined) {
      const read = yield* readFirst(candidates, !from.explicit)
      if (read === undefined) {
        problems.push(`pricing.file: not set, and no price table at ${candidates.join(" nor ")}; ${howToFix}`)
        return { file, prices: undefined }
      }
      if (Result.isFailure(read)) {
        const hint = isNotFound(read.failure) ? `; ${howToFix}` : ""
        problems.push(`pricing.file: ${describeYamlError(read.failure)}${hint}`)
        return { file: read.failure.file, prices: undefined }
      }
      file = read.success.file
      warnings.push(...read.success.warnings.map((warning) => `pricing.file: ${file}:${warning}`))
      raw = read.success.value
      // Both defaults exist and differ: the one beside the config wins (ADR 0051), which an older setup may not
      // expect — say so rather than bill from a file nobody meant.
      const other = candidates[1]
      if (!from.explicit && other !== undefined && file === candidates[0] && differs(file, other)) {
        warnings.push(
          `pricing.file: not set; using ${file} (beside the config), while ${other} also exists with other content; set pricing.file to the table you mean`,
        )
      }
    }
    const decoded = decodePriceTable(Array.isArray(raw) ? { prices: raw } : raw, file)
    if (Result.isSuccess(decoded)) return { file, prices: decoded.success }
    problems.push(...decoded.failure)
    return { file, prices: undefined }
  })
