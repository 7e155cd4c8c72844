/**
 * Client keys made at run time (`POST /admin/keys`, SPEC "Keys at runtime,
 * reload"), and the last-use time of every key (ADR 0050).
 *
 * The request path reads a map kept current in memory: {@link KeyLookup.find}
 * and {@link KeyLookup.used} are synchronous and do no I/O. The store behind
 * it is Redis with `store.kind: redis` (shared by every copy; a copy sees
 * another copy's change within 250 ms by polling a version counter) or, with
 * the memory store, an append-only JSONL file (`keys.file`) replayed at start.
 * Neither holds a secret: only SHA-256 hashes.
 *
 * Time is the layer's `Clock`: creation times, expiry and last use.
 */
import { Context, Layer } from "effect"
import type { TollgateConfig } from "../config/model.js"
import { makeFileKeys } from "./fileKeys.js"
import type { KeyStoreService, KeyStoreUnavailable } from "./model.js"
import { makeRedisKeys } from "./redisKeys.js"

export * from "./model.js"

export class KeyStore extends Context.Service<KeyStore, KeyStoreService>()("tollgate/keys/KeyStore") {}

/**
 * The key store of `config`: Redis at `store.url` when `store.kind` is
 * `redis`, else the file `keysFile`. Scoped: closing it writes the last-use
 * times not yet written. It builds also when Redis is down (no runtime key is
 * known until it answers); an unreadable keys file fails it.
 */
export const layer = (
  config: Pick<TollgateConfig, "store" | "keysFile">,
): Layer.Layer<KeyStore, KeyStoreUnavailable> =>
  Layer.effect(
    KeyStore,
    config.store.kind === "redis"
      ? makeRedisKeys(config.store.url, { cluster: config.store.cluster })
      : makeFileKeys(config.keysFile),
  )
