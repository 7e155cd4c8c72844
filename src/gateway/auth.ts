import { hash } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import type { TenantConfig, TollgateConfig } from "../config/model.js"

/** Who sent a request: the tenant and which of its keys. */
export interface Principal {
  readonly tenant: TenantConfig
  readonly keyId: string
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
 */
export const makeAuthenticator = (config: TollgateConfig) => {
  const byHash = new Map<string, Principal>()
  for (const tenant of config.tenants.values()) {
    for (const key of tenant.keys) byHash.set(key.sha256, { tenant, keyId: key.id })
  }
  return (headers: IncomingHttpHeaders): Principal | undefined => {
    const key = clientKey(headers)
    if (key === undefined) return undefined
    return byHash.get(hash("sha256", key, "hex"))
  }
}
