/**
 * Client keys: the secret a client sends (`tg_` + 32 base62 characters) and the SHA-256 hash
 * the config stores. Randomness is `crypto.randomBytes` (a CSPRNG), never Effect's `Random`.
 */
import { createHash, randomBytes } from "node:crypto"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const base36 = "0123456789abcdefghijklmnopqrstuvwxyz"

/** Prefix of every client key. */
export const keyPrefix = "tg_"

/** Characters after the prefix: 32 base62 characters ≈ 190 bits. */
export const keyLength = 32

/** The shape of a key made by {@link generateKey}. */
export const keyPattern = /^tg_[0-9A-Za-z]{32}$/

/**
 * `length` characters drawn uniformly from `alphabet`. A byte is used only when it is below the
 * largest multiple of the alphabet size (rejection sampling), so `byte % size` has no bias.
 */
export const randomString = (alphabet: string, length: number): string => {
  const size = alphabet.length
  const limit = 256 - (256 % size)
  let out = ""
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= limit) continue
      out += alphabet[byte % size]
      if (out.length === length) break
    }
  }
  return out
}

/** A new client key: `tg_` + 32 uniformly random base62 characters. */
export const generateKey = (): string => keyPrefix + randomString(base62, keyLength)

/** A default key id: `key-` + 8 random lower-case base36 characters. */
export const generateKeyId = (): string => `key-${randomString(base36, 8)}`

/** Lower-case hex SHA-256 of a key secret (UTF-8), as stored under a tenant's `keys`. */
export const hashKey = (secret: string): string => createHash("sha256").update(secret, "utf8").digest("hex")
