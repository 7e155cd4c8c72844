import { hash } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import type { KeyBudgets, TenantConfig, TollgateConfig } from "../config/model.js"
import type { KeyLookup } from "../keys/KeyStore.js"

/** Who sent a request: the tenant and which of its keys, with the key's own budgets. */
export interface Principal {
  readonly tenant: TenantConfig
  readonly keyId: string
  readonly keyBudgets: KeyBudgets
}

/** The client key from `x-api-key`, else from `authorization: Bearer …`. */
export const clientKey = (headers: IncomingHttpHeaders): string | undefined => {
  const apiKey = headers["x-api-key"]
  if (typeof apiKey === "string" && apiKey.length > 0) return apiKey
  const authorization = headers["authorization"]
  if (typeof authorization === "string" && authorization.length > 7) {
    const scheme = authorization.slice(0, 7).toLowerCase()
    if (scheme === "bearer ") return authorization.slice(7).trim()
  }
  return undefined
}

/**
 * Maps a client key to its principal by SHA-256: the config holds only
 * hashes, and a lookup by hash reveals nothing about the secret's bytes.
 * A config key wins; else a live runtime key of `keys` (not revoked, not
 * expired) whose tenant is in `config`. A key that authenticates is noted
 * as used (in memory; `keys` writes it in batches). Pure over its two
 * arguments: a config reload builds a new one over the same `keys`.
 */
export const makeAuthenticator = (config: TollgateConfig, keys: KeyLookup) => {
  const byHash = new Map<string, Principal>()
  for (const tenant of config.tenants.values()) {
    for (const key of tenant.keys) byHash.set(key.sha256, { tenant, keyId: key.id, keyBudgets: key.budgets })
  }
  return (headers: IncomingHttpHeaders): Principal | undefined => {
    const key = clientKey(headers)
    if (key === undefined) return undefined
    const sha256 = hash("sha256", key, "hex")
    let principal = byHash.get(sha256)
    if (principal === undefined) {
      const runtime = keys.find(sha256)
      const tenant = runtime === undefined ? undefined : config.tenants.get(runtime.tenant)
      if (tenant === undefined) return undefined
      principal = { tenant, keyId: runtime!.id, keyBudgets: runtime!.budgets }
    }
    keys.used(principal.tenant.name, principal.keyId)
    return principal
  }
}
