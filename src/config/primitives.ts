/**
 * Leaf schemas of the configuration files. Each one fails with a single
 * operator-facing message (the `path: message` lines of `config validate`),
 * never with Effect's internal type names.
 */
import { Either, ParseResult, Schema, SchemaAST as AST } from "effect"

/** Annotates a schema so that any failure inside it reports exactly `message`. */
const says = (message: string) => ({ message: () => ({ message, override: true }) })

/** Decodes `unknown` with a plain function: `Right(value)` or `Left(message)`. */
const leaf = <A>(name: string, decode: (u: unknown) => Either.Either<A, string>) =>
  Schema.transformOrFail(Schema.Unknown, Schema.Unknown as Schema.Schema<A>, {
    strict: true,
    decode: (u, _, ast) =>
      Either.match(decode(u), {
        onLeft: (message) => ParseResult.fail(new ParseResult.Type(ast, u, message)),
        onRight: (a) => ParseResult.succeed(a),
      }),
    encode: (a) => ParseResult.succeed(a),
  }).annotations({ identifier: name })

const durationProblem = "must be a duration with a unit, e.g. 250ms, 5s, 10m or 1h"

const durationPattern = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/
const msPerUnit: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

const parseDuration = (u: unknown): number | undefined => {
  if (typeof u !== "string") return undefined
  const match = durationPattern.exec(u.trim())
  return match === null ? undefined : Math.round(Number(match[1]) * msPerUnit[match[2]!]!)
}

/** A duration string with a unit (`250ms`, `5s`, `10m`, `1h`) → integer milliseconds (≥ 0). */
export const Duration = leaf("Duration", (u) => Either.fromNullable(parseDuration(u), () => durationProblem))

/** Like {@link Duration}, but 0 is refused. */
export const PositiveDuration = leaf("PositiveDuration", (u) => {
  const ms = parseDuration(u)
  if (ms === undefined) return Either.left(durationProblem)
  return ms > 0 ? Either.right(ms) : Either.left("must be longer than 0ms")
})

/** Largest amount accepted anywhere in the config: 1e9 USD, so micro-USD stay safe integers. */
const maxUsd = 1e9

/**
 * A non-negative decimal number of USD → integer micro-USD. `Math.round(usd * 1e6)` is the
 * only floating-point step in Tollgate's money handling.
 */
export const UsdToMicro = leaf("Usd", (u) =>
  typeof u === "number" && Number.isFinite(u) && u >= 0 && u <= maxUsd
    ? Either.right(Math.round(u * 1e6))
    : Either.left("must be a non-negative number of USD, e.g. 5 or 0.25"),
)

/** An integer ≥ 1. */
export const PositiveInt = Schema.Int.pipe(Schema.positive()).annotations(says("must be a positive integer"))

/** A number in [0, ∞). */
export const NonNegativeNumber = Schema.Number.pipe(Schema.finite(), Schema.nonNegative()).annotations(
  says("must be a number ≥ 0"),
)

/** A ratio in (0, 1]. */
export const Ratio = Schema.Number.pipe(Schema.greaterThan(0), Schema.lessThanOrEqualTo(1)).annotations(
  says("must be a number greater than 0 and at most 1"),
)

/** A non-empty string without surrounding whitespace. */
export const Name = Schema.String.pipe(Schema.minLength(1), Schema.pattern(/^\S(.*\S)?$/)).annotations(
  says("must be a non-empty string without leading or trailing spaces"),
)

/** An environment variable name (`[A-Za-z_][A-Za-z0-9_]*`). */
export const EnvVarName = Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)).annotations(
  says("must be an environment variable name (letters, digits and _)"),
)

/** 64 hex characters, any case → lower case. */
export const Sha256Hex = leaf("Sha256Hex", (u) =>
  typeof u === "string" && /^[0-9a-fA-F]{64}$/.test(u)
    ? Either.right(u.toLowerCase())
    : Either.left("must be 64 hex characters"),
)

/** An `http://` or `https://` URL → the same string without trailing slashes. */
export const BaseUrl = leaf("BaseUrl", (u) => {
  const problem = Either.left("must be an http:// or https:// URL, e.g. https://api.anthropic.com")
  if (typeof u !== "string" || !URL.canParse(u)) return problem
  const { protocol } = new URL(u)
  return protocol === "http:" || protocol === "https:" ? Either.right(u.replace(/\/+$/, "")) : problem
})

/** A `redis://` or `rediss://` URL. */
export const RedisUrl = leaf("RedisUrl", (u) =>
  typeof u === "string" && URL.canParse(u) && /^rediss?:$/.test(new URL(u).protocol)
    ? Either.right(u)
    : Either.left("must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379/0"),
)

/** A listen address. `host` carries no brackets (`::1` for `[::1]:8080`), as `net.Server#listen` wants it. */
export interface ListenAddress {
  readonly host: string
  readonly port: number
}

/** `host:port` or `[ipv6]:port`, port 0..65535 (0 picks a free port). */
export const Listen = leaf<ListenAddress>("Listen", (u) => {
  const match = typeof u === "string" ? /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(u) : null
  const port = match === null ? NaN : Number(match[3])
  return match !== null && port <= 65535
    ? Either.right({ host: match[1] ?? match[2]!, port })
    : Either.left("must be host:port with a port from 0 to 65535, e.g. 127.0.0.1:8080 or [::1]:8080")
})

/**
 * A tagged union decoded by hand: the `field` value picks the member schema, so an unknown value
 * reports `field: unknown <what> "x"` and member errors keep their own paths.
 */
export const discriminated = <Members extends Record<string, Schema.Schema.AnyNoContext>>(
  field: string,
  what: string,
  members: Members,
) =>
  Schema.transformOrFail(
    Schema.Unknown,
    Schema.Unknown as Schema.Schema<Schema.Schema.Type<Members[keyof Members]>>,
    {
      strict: true,
      decode: (u, options, ast) => {
        if (typeof u !== "object" || u === null || Array.isArray(u)) {
          return ParseResult.fail(new ParseResult.Type(ast, u, `must be a mapping with a ${field}`))
        }
        const tag: unknown = (u as Record<string, unknown>)[field]
        if (tag === undefined) {
          return ParseResult.fail(
            new ParseResult.Pointer(field, u, new ParseResult.Missing(new AST.Type(AST.unknownKeyword))),
          )
        }
        const member = typeof tag === "string" && Object.hasOwn(members, tag) ? members[tag] : undefined
        if (member === undefined) {
          const expected = Object.keys(members).join(", ")
          const problem = `unknown ${what} ${JSON.stringify(tag)} (expected one of: ${expected})`
          return ParseResult.fail(new ParseResult.Pointer(field, u, new ParseResult.Type(ast, tag, problem)))
        }
        return ParseResult.map(
          ParseResult.decodeUnknown(member)(u, options),
          (a) => a as Schema.Schema.Type<Members[keyof Members]>,
        )
      },
      encode: (a) => ParseResult.succeed(a),
    },
  )
