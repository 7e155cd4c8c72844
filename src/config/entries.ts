/**
 * Decoding the named sections (`providers`, `routes`, `tenants`) entry by entry. An entry that
 * fails still yields a "view" of the parts that did decode, so the cross-section checks can
 * report its other problems in the same run.
 */
import { Option, Result, Schema } from "effect"
import type { ProviderView, RouteView, TenantView } from "./checks.js"
import type { KeyConfig } from "./model.js"
import { parseErrorProblems } from "./problems.js"
import * as S from "./schema.js"

/** The entries of one named section. */
export interface Named<A, V> {
  /** Entries that decoded completely, in file order. */
  readonly decoded: ReadonlyMap<string, A>
  /** What could be read from entries that failed (a subset of the failed names). */
  readonly salvaged: ReadonlyMap<string, V>
  /** Every name present in the file, decoded or not. */
  readonly names: ReadonlySet<string>
}

const isMapping = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const lenient = { errors: "first", onExcessProperty: "ignore" } as const

/**
 * Decodes each entry of section `section` (absent or `null`: no entries) with `schema`,
 * pushing `path: message` problems; `salvage` reads what it can from an entry that failed.
 */
export const decodeNamed = <A, V>(
  section: string,
  raw: unknown,
  schema: Schema.Decoder<A>,
  salvage: (name: string, entry: unknown) => V | undefined,
  problems: Array<string>,
): Named<A, V> => {
  const value = raw ?? {}
  if (!isMapping(value)) {
    problems.push(`${section}: must be a mapping of names to entries`)
    return { decoded: new Map(), salvaged: new Map(), names: new Set() }
  }
  const decoded = new Map<string, A>()
  const salvaged = new Map<string, V>()
  for (const [name, entry] of Object.entries(value)) {
    const result = Schema.decodeUnknownResult(schema)(entry, S.parseOptions)
    if (Result.isSuccess(result)) {
      decoded.set(name, result.success)
      continue
    }
    problems.push(...parseErrorProblems(result.failure, [section, name]))
    const view = salvage(name, entry)
    if (view !== undefined) salvaged.set(name, view)
  }
  return { decoded, salvaged, names: new Set(Object.keys(value)) }
}

/** Decoded models and salvaged views together, in file order. */
export const viewsOf = <V>(names: ReadonlySet<string>, ...maps: ReadonlyArray<ReadonlyMap<string, V>>) => {
  const views = new Map<string, V>()
  for (const name of names) {
    const view = maps.map((map) => map.get(name)).find((found) => found !== undefined)
    if (view !== undefined) views.set(name, view)
  }
  return views
}

const decodeLenient = <A>(schema: Schema.Decoder<A>, u: unknown): A | undefined =>
  Option.getOrUndefined(Schema.decodeUnknownOption(schema)(u, lenient))

const ProviderKindOnly = Schema.Struct({
  kind: Schema.Literals(["anthropic", "openai", "vertex", "ollama", "bedrock", "azure", "gemini"]),
})

/** The kind of a provider entry that failed, if it is a known kind. */
export const salvageProvider = (name: string, entry: unknown): ProviderView | undefined => {
  const found = decodeLenient(ProviderKindOnly, entry)
  return found === undefined ? undefined : { name, kind: found.kind }
}

const RouteTargetsOnly = Schema.Struct({
  api: S.Route.fields.api,
  translate: S.Route.fields.translate,
  strategy: S.Route.fields.strategy,
  targets: S.Route.fields.targets,
})

/** What can be read of a route entry that failed: its api, strategy and targets as written (unresolved). */
export interface RouteSalvage {
  readonly name: string
  readonly api: RouteView["api"]
  readonly translate: boolean
  readonly strategy: "ordered" | "weighted"
  readonly targets: ReadonlyArray<S.TargetFile>
}

/** The api and targets of a route entry that failed, if both are valid. */
export const salvageRoute = (name: string, entry: unknown): RouteSalvage | undefined => {
  const found = decodeLenient(RouteTargetsOnly, entry)
  return found === undefined
    ? undefined
    : {
        name,
        api: found.api,
        translate: found.translate ?? false,
        strategy: found.strategy ?? "ordered",
        targets: found.targets,
      }
}

const TenantRoutesOnly = Schema.Struct({ routes: S.Tenant.fields.routes })

/** The valid route list and the valid keys (by index) of a tenant entry that failed. */
export const salvageTenant = (name: string, entry: unknown): TenantView | undefined => {
  if (!isMapping(entry)) return undefined
  const routes = decodeLenient(TenantRoutesOnly, entry)?.routes ?? []
  const keys: ReadonlyArray<unknown> = Array.isArray(entry.keys) ? entry.keys : []
  return {
    name,
    routes,
    keys: keys.map((key): KeyConfig | undefined => {
      const found = decodeLenient(S.Key, key)
      return found === undefined
        ? undefined
        : {
            id: found.id,
            sha256: found.sha256,
            budgets: { day: found.budgets.day, week: found.budgets.week, month: found.budgets.month },
          }
    }),
  }
}
