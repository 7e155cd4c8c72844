/**
 * The admin bearer token: read once from the env var that `admin.token_env`
 * names, kept `Redacted`, compared in constant time.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { Config as EffectConfig, Effect, Option, Redacted } from "effect"

/** Checks the `authorization` header of an admin request. */
export interface AdminAuth {
  /** True when the header is `Bearer <the admin token>`. */
  readonly check: (headers: Readonly<Record<string, string | undefined>>) => boolean
}

const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest()

const BEARER = /^Bearer +(\S+) *$/i

/**
 * The check for `token`. Both sides are hashed to SHA-256 first, so the
 * comparison takes the same time whatever the length or content of the
 * presented token.
 */
export const makeAdminAuth = (token: Redacted.Redacted<string>): AdminAuth => {
  const expected = digest(Redacted.value(token))
  return {
    check: (headers) => {
      const header = headers["authorization"]
      if (typeof header !== "string") return false
      const presented = BEARER.exec(header)?.[1]
      return presented !== undefined && timingSafeEqual(digest(presented), expected)
    },
  }
}

/**
 * The admin token from the env var `name` (through Effect's `ConfigProvider`);
 * `None` when the variable is unset or empty: the admin API is off.
 */
export const readAdminToken = (name: string): Effect.Effect<Option.Option<Redacted.Redacted<string>>> =>
  EffectConfig.option(EffectConfig.Redacted(name)).pipe(
    Effect.map(Option.filter((token) => Redacted.value(token).length > 0)),
    Effect.orElseSucceed(() => Option.none()),
  )

/** The `www-authenticate` value of a 401 from the admin API. */
export const WWW_AUTHENTICATE = 'Bearer realm="tollgate-admin"'
