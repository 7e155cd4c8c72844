/**
 * The SHA-256 and HMAC-SHA-256 that AWS's SigV4 signer is given (its `sha256` option), in place of
 * `@smithy/hash-node`'s `Hash`. Same digests; the difference is the HMAC key: smithy's `Hash` turns every
 * key into a Buffer, and on Node 24 `createHmac` with a Buffer key costs about 12 µs against 2 µs with a
 * string or a `KeyObject` (the key-object check it makes is slow for plain buffers). A signature takes
 * five HMACs, so each Bedrock request paid some 50 µs of CPU for it; here a string key stays a string and
 * a buffer key (the signing key, which the signer keeps for the day) becomes a `KeyObject` once.
 */
import { createHash, createHmac, createSecretKey, type Hash, type Hmac, type KeyObject } from "node:crypto"

/** What the signer hands a hash: text, bytes or an ArrayBuffer. */
type SourceData = string | ArrayBuffer | ArrayBufferView

const keyObjects = new WeakMap<object, KeyObject>()

const bytesOf = (data: ArrayBuffer | ArrayBufferView): Uint8Array =>
  ArrayBuffer.isView(data)
    ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : new Uint8Array(data)

const hmacKey = (secret: SourceData): string | KeyObject => {
  if (typeof secret === "string") return secret
  let key = keyObjects.get(secret)
  if (key === undefined) {
    key = createSecretKey(bytesOf(secret))
    keyObjects.set(secret, key)
  }
  return key
}

/** SHA-256, or HMAC-SHA-256 keyed by `secret`: the `HashConstructor` shape AWS's signer takes. */
export class Sha256 {
  private hash: Hash | Hmac

  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh()
  }

  update(data: SourceData, encoding?: "utf8" | "ascii" | "latin1"): void {
    if (typeof data === "string") this.hash.update(data, encoding ?? "utf8")
    else this.hash.update(bytesOf(data))
  }

  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.hash.digest())
  }

  reset(): void {
    this.hash = this.fresh()
  }

  private fresh(): Hash | Hmac {
    // As smithy's: no secret, or an empty string, is a plain SHA-256.
    return this.secret === undefined || this.secret === ""
      ? createHash("sha256")
      : createHmac("sha256", hmacKey(this.secret))
  }
}
