/**
 * fast-check generators of JSON texts for the fast paths' property tests (skim.ts's readers against
 * JSON.parse): values whose objects may repeat a key, rendered with spaces and tabs between tokens, and
 * the byte edits and text bytes that try the readers' edges.
 */
import fc from "fast-check"

/**
 * A JSON value whose objects are lists of members, so a key may repeat (JSON.parse keeps the last), rendered
 * with the spaces and tabs `pad` puts between tokens.
 */
export type Value =
  null | boolean | number | string | { readonly members: ReadonlyArray<[string, Value]> } | Array<Value>

export const render = (value: Value, pad: () => string): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value))
    return `[${pad()}${value.map((v) => `${render(v, pad)}${pad()}`).join(`,${pad()}`)}]`
  return `{${pad()}${value.members.map(([k, v]) => `${JSON.stringify(k)}${pad()}:${pad()}${render(v, pad)}${pad()}`).join(`,${pad()}`)}}`
}

export const awkward = fc.constantFrom(
  '"',
  "\\",
  "/",
  "\n",
  "\t",
  "\u0000",
  "\u001f",
  "\u007f",
  "é",
  "€",
  "😀",
  "\ud800",
  "\u2028",
)
export const texts = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 6 }) },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.oneof(awkward, fc.string({ maxLength: 4 })), { maxLength: 5 })
      .map((p) => p.join("")),
  },
)
export const scalar: fc.Arbitrary<Value> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  texts,
)
export const anyValue: fc.Arbitrary<Value> = fc.letrec<{ value: Value }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(tie("value"), { maxLength: 3 }),
    fc
      .array(fc.tuple(fc.constantFrom("a", "content", "type", "delta", "x y"), tie("value")), {
        maxLength: 3,
      })
      .map((members) => ({ members })),
  ),
})).value

/** A member that may be missing, repeated, or hold another kind of value than usual. */
export const member = (key: string, usual: fc.Arbitrary<Value>): fc.Arbitrary<Array<[string, Value]>> =>
  fc.oneof(
    { weight: 6, arbitrary: usual.map((v): Array<[string, Value]> => [[key, v]]) },
    { weight: 2, arbitrary: fc.constant<Array<[string, Value]>>([]) },
    {
      weight: 1,
      arbitrary: fc.tuple(usual, usual).map(([a, b]): Array<[string, Value]> => [
        [key, a],
        [key, b],
      ]),
    },
    { weight: 1, arbitrary: anyValue.map((v): Array<[string, Value]> => [[key, v]]) },
  )

export const members = (...parts: Array<fc.Arbitrary<Array<[string, Value]>>>): fc.Arbitrary<Value> =>
  fc.tuple(...parts).map((lists) => ({ members: lists.flat() }))

export const pads = fc.oneof(
  { weight: 3, arbitrary: fc.constant(() => "") },
  {
    weight: 1,
    arbitrary: fc.array(fc.constantFrom("", " ", "\t", "  "), { minLength: 1, maxLength: 8 }).map((list) => {
      let k = 0
      return () => list[k++ % list.length]!
    }),
  },
)

/** `event` with the byte at `at` (modulo its length) replaced by `byte`, `byte` inserted there, or it deleted. */
export const edited = (
  event: Buffer,
  at: number,
  edit: "replace" | "insert" | "delete",
  byte: string,
): Buffer => {
  const i = at % event.length
  const b = Buffer.from(byte)
  if (edit === "replace") return Buffer.concat([event.subarray(0, i), b, event.subarray(i + 1)])
  if (edit === "insert") return Buffer.concat([event.subarray(0, i), b, event.subarray(i)])
  return Buffer.concat([event.subarray(0, i), event.subarray(i + 1)])
}

/** `event` with the JSON string `"text"` in it holding `bytes` instead (raw, any bytes at all). */
export const withTextBytes = (event: string, text: string, bytes: ReadonlyArray<number>): Buffer => {
  const quoted = `"${text}"`
  const at = event.indexOf(quoted)
  return Buffer.concat([
    Buffer.from(event.slice(0, at + 1)),
    Buffer.from(bytes),
    Buffer.from(event.slice(at + quoted.length - 1)),
  ])
}

/**
 * Byte sequences that are not well-formed UTF-8: stray continuations, overlong forms, encoded surrogates,
 * past U+10FFFF, cut short (before the closing quote), bytes no UTF-8 has.
 */
export const MALFORMED_UTF8: ReadonlyArray<ReadonlyArray<number>> = [
  [0x80],
  [0xbf],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0x80],
  [0xe0, 0x9f, 0xbf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf0, 0x80, 0x80, 0x80],
  [0xf0, 0x8f, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xff],
  [0xc3],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0x61, 0xc3, 0x28],
]

/** Text bytes: well-formed characters of every length, malformed sequences, and single bytes from 0x80 up. */
export const textBytes: fc.Arbitrary<Array<number>> = fc
  .array(
    fc.oneof(
      { weight: 4, arbitrary: fc.string({ unit: "grapheme", maxLength: 3 }).map((t) => [...Buffer.from(t)]) },
      { weight: 1, arbitrary: fc.constantFrom(...MALFORMED_UTF8).map((b) => [...b]) },
      { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((b) => [b]) },
      { weight: 1, arbitrary: fc.constantFrom([0x61], [0x5c, 0x6e], [0x5c, 0x75, 0x30, 0x30, 0x65, 0x39]) },
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.flat())
  // A quote or a backslash on its own would end or break the string: the escapes above stand for them.
  .filter(
    (bytes) => !bytes.some((b, i) => (b === 0x22 || b === 0x5c) && !(b === 0x5c && i + 1 < bytes.length)),
  )
