/**
 * Leaf schemas of the configuration files. Each one fails with a single
 * operator-facing message (the `path: message` lines of `config validate`),
 * never with Effect's internal type names.
 *
 * Every leaf decodes from `unknown` and also carries its check on the encoded side: a struct
 * that renames its keys (`Schema.encodeKeys`) checks its encoded form before renaming, so the
 * problem is reported under the key of the file, together with the struct's other problems.
 */
import { Effect, Result, Schema, SchemaIssue, SchemaParser, SchemaTransformation } from "effect"

/**
 * Decodes `unknown` with a plain function into a value of `to`: `Result.succeed(value)` or
 * `Result.fail(message)`; the same function is the check on the encoded side.
 */
const leaf = <To extends Schema.Codec<unknown, unknown>>(
  to: To,
  decode: (u: unknown) => Result.Result<To["Encoded"], string>,
) => {
  const fail = (message: string) => Effect.fail(new SchemaIssue.InvalidValue({ message }))
  return Schema.Unknown.check(
    Schema.makeFilter((u) =>
      Result.match(decode(u), { onFailure: (message) => message, onSuccess: () => true }),
    ),
  ).pipe(
    Schema.decodeTo(
      to,
      SchemaTransformation.transformEffect({
        decode: (u: unknown) => Result.match(decode(u), { onFailure: fail, onSuccess: Effect.succeed }),
        encode: (a: To["Encoded"]) => Effect.succeed<unknown>(a),
      }),
    ),
  )
}

/** `schema` (one without transformations) whose every failure reports exactly `message`. */
export const says = <A>(message: string, schema: Schema.Codec<A, A>) => {
  const is = SchemaParser.is(schema)
  return leaf(schema, (u) => (is(u) ? Result.succeed(u) : Result.fail(message)))
}

const durationProblem = "must be a duration with a unit, e.g. 250ms, 5s, 10m or 1h"

const durationPattern = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/
const msPerUnit: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

const parseDuration = (u: unknown): number | undefined => {
  if (typeof u !== "string") return undefined
  const match = durationPattern.exec(u.trim())
  return match === null ? undefined : Math.round(Number(match[1]) * msPerUnit[match[2]!]!)
}

/** A duration string with a unit (`250ms`, `5s`, `10m`, `1h`) → integer milliseconds (≥ 0). */
export const Duration = leaf(Schema.Number, (u) =>
  Result.fromNullishOr(parseDuration(u), () => durationProblem),
)

/** Like {@link Duration}, but 0 is refused. */
export const PositiveDuration = leaf(Schema.Number, (u) => {
  const ms = parseDuration(u)
  if (ms === undefined) return Result.fail(durationProblem)
  return ms > 0 ? Result.succeed(ms) : Result.fail("must be longer than 0ms")
})

/** Largest amount accepted anywhere in the config: 1e9 USD, so micro-USD stay safe integers. */
const maxUsd = 1e9

/**
 * A non-negative decimal number of USD → integer micro-USD. `Math.round(usd * 1e6)` is the
 * only floating-point step in Tollgate's money handling.
 */
export const UsdToMicro = leaf(Schema.Number, (u) =>
  typeof u === "number" && Number.isFinite(u) && u >= 0 && u <= maxUsd
    ? Result.succeed(Math.round(u * 1e6))
    : Result.fail("must be a non-negative number of USD, e.g. 5 or 0.25"),
)

/** An integer ≥ 1. */
export const PositiveInt = says("must be a positive integer", Schema.Int.check(Schema.isGreaterThan(0)))

/** A number in [0, ∞). */
export const NonNegativeNumber = says(
  "must be a number ≥ 0",
  Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)),
)

/** A ratio in (0, 1]. */
export const Ratio = says(
  "must be a number greater than 0 and at most 1",
  Schema.Number.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(1)),
)

/** A non-empty string without surrounding whitespace. */
export const Name = says(
  "must be a non-empty string without leading or trailing spaces",
  Schema.String.check(Schema.isMinLength(1), Schema.isPattern(/^\S(.*\S)?$/)),
)

/** An environment variable name (`[A-Za-z_][A-Za-z0-9_]*`). */
export const EnvVarName = says(
  "must be an environment variable name (letters, digits and _)",
  Schema.String.check(Schema.isPattern(/^[A-Za-z_][A-Za-z0-9_]*$/)),
)

/** 64 hex characters, any case → lower case. */
export const Sha256Hex = leaf(Schema.String, (u) =>
  typeof u === "string" && /^[0-9a-fA-F]{64}$/.test(u)
    ? Result.succeed(u.toLowerCase())
    : Result.fail("must be 64 hex characters"),
)

/** An `http://` or `https://` URL → the same string without trailing slashes. */
export const BaseUrl = leaf(Schema.String, (u) => {
  const problem = Result.fail("must be an http:// or https:// URL, e.g. https://api.anthropic.com")
  if (typeof u !== "string" || !URL.canParse(u)) return problem
  const { protocol } = new URL(u)
  return protocol === "http:" || protocol === "https:" ? Result.succeed(u.replace(/\/+$/, "")) : problem
})

/**
 * An OTLP/HTTP collector root: an `http://` or `https://` URL without
 * credentials, query or fragment (`/v1/traces` is appended to it; a token goes
 * in `OTEL_EXPORTER_OTLP_HEADERS`), without trailing slashes.
 */
export const CollectorUrl = leaf(Schema.String, (u) => {
  const problem = Result.fail(
    "must be an http:// or https:// URL without credentials, query or fragment, e.g. http://127.0.0.1:4318 (a collector token goes in OTEL_EXPORTER_OTLP_HEADERS)",
  )
  if (typeof u !== "string" || !URL.canParse(u)) return problem
  const url = new URL(u)
  if (url.protocol !== "http:" && url.protocol !== "https:") return problem
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "" || /[?#]/.test(u))
    return problem
  return Result.succeed(u.replace(/\/+$/, ""))
})

/** A `redis://` or `rediss://` URL. */
export const RedisUrl = leaf(Schema.String, (u) =>
  typeof u === "string" && URL.canParse(u) && /^rediss?:$/.test(new URL(u).protocol)
    ? Result.succeed(u)
    : Result.fail("must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379/0"),
)

/** A listen address. `host` carries no brackets (`::1` for `[::1]:8080`), as `net.Server#listen` wants it. */
export interface ListenAddress {
  readonly host: string
  readonly port: number
}

const ListenAddress = Schema.Struct({ host: Schema.String, port: Schema.Number })

/** `host:port` or `[ipv6]:port`, port 0..65535 (0 picks a free port). */
export const Listen = leaf(ListenAddress, (u) => {
  const match = typeof u === "string" ? /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(u) : null
  const port = match === null ? NaN : Number(match[3])
  return match !== null && port <= 65535
    ? Result.succeed<ListenAddress>({ host: match[1] ?? match[2]!, port })
    : Result.fail("must be host:port with a port from 0 to 65535, e.g. 127.0.0.1:8080 or [::1]:8080")
})

const isMapping = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A tagged union decoded by hand: the `field` value picks the member schema, so an unknown value
 * reports `field: unknown <what> "x"` and member errors keep their own paths.
 */
export const discriminated = <const Members extends Record<string, Schema.Decoder<unknown>>>(
  field: string,
  what: string,
  members: Members,
) => {
  const isTag = (tag: unknown): tag is keyof Members => typeof tag === "string" && Object.hasOwn(members, tag)
  const expected = Object.keys(members).join(", ")
  return Schema.Unknown.pipe(
    Schema.decodeTo(
      Schema.toType(Schema.Union(Object.values(members) as Array<Members[keyof Members]>)),
      SchemaTransformation.transformEffect({
        decode: (u: unknown, options) => {
          if (!isMapping(u)) {
            return Effect.fail(new SchemaIssue.InvalidValue({ message: `must be a mapping with a ${field}` }))
          }
          const tag = u[field]
          if (tag === undefined) {
            return Effect.fail(new SchemaIssue.Pointer([field], new SchemaIssue.MissingKey(undefined)))
          }
          if (!isTag(tag)) {
            const message = `unknown ${what} ${JSON.stringify(tag)} (expected one of: ${expected})`
            return Effect.fail(new SchemaIssue.Pointer([field], new SchemaIssue.InvalidValue({ message })))
          }
          return SchemaParser.decodeUnknownEffect(members[tag])(u, options)
        },
        encode: (a) => Effect.succeed<unknown>(a),
      }),
    ),
  )
}
