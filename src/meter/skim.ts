/**
 * A strict JSON reader over bytes for the stream meters' fast paths (ADR
 * 0075): it walks one value without building it, checks it is JSON that
 * `JSON.parse` accepts, and hands the caller the few fields a meter reads.
 * Anything it is not sure of (a line break, an escape in a key, a string
 * to count with bytes that are not well-formed UTF-8 or an escaped
 * surrogate, a value nested too deep) makes it decline with -1, and the
 * caller parses the event as before.
 *
 * Whitespace between tokens is the space and the tab only: a CR or LF ends
 * the SSE line the JSON came in.
 */

const QUOTE = 0x22
const BACKSLASH = 0x5c
/** Deeper values are declined (the reference parser has no such limit, the fast path only gives up). */
const MAX_DEPTH = 32

/** `b[i]` is a space or a tab: the index of the first byte after them. */
export const skipSpace = (b: Uint8Array, i: number): number => {
  let c = b[i]
  while (c === 0x20 || c === 0x09) c = b[++i]
  return i
}

const isHex = (c: number | undefined): boolean =>
  c !== undefined && ((c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66))

const hexValue = (c: number): number => (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x61 + 10)

/** The length of the escape at `i` (its backslash), or -1 if JSON has no such escape. */
const escapeLength = (b: Uint8Array, i: number): number => {
  const c = b[i + 1]
  if (c === 0x75) return isHex(b[i + 2]) && isHex(b[i + 3]) && isHex(b[i + 4]) && isHex(b[i + 5]) ? 6 : -1
  return c === QUOTE ||
    c === BACKSLASH ||
    c === 0x2f ||
    c === 0x62 ||
    c === 0x66 ||
    c === 0x6e ||
    c === 0x72 ||
    c === 0x74
    ? 2
    : -1
}

/**
 * The string at `i` (its opening quote): the index after its closing quote,
 * or -1. Bytes from 0x80 up are taken as they come (the SSE parser decodes
 * the line, replacing what is not UTF-8, and any text is a valid string).
 */
export const skipString = (b: Uint8Array, i: number): number => {
  const n = b.length
  for (i++; i < n; i++) {
    const c = b[i]!
    if (c === QUOTE) return i + 1
    if (c === BACKSLASH) {
      const length = escapeLength(b, i)
      if (length < 0) return -1
      i += length - 1
    } else if (c < 0x20) return -1
  }
  return -1
}

/** Where `stringBytes` leaves the decoded string's UTF-8 length. */
export interface Counted {
  bytes: number
}

/**
 * The length of the well-formed UTF-8 sequence that starts with `c` (≥ 0x80) at `i`, or -1: a stray
 * continuation byte, an overlong form, an encoded surrogate, a code point past U+10FFFF or a sequence cut
 * short. Such bytes decode to U+FFFD, whose length is not theirs: the caller declines them.
 */
const utf8Length = (b: Uint8Array, i: number, c: number): number => {
  const c1 = b[i + 1]
  if (c1 === undefined) return -1
  if (c >= 0xc2 && c <= 0xdf) return c1 >= 0x80 && c1 <= 0xbf ? 2 : -1
  if (c >= 0xe0 && c <= 0xef) {
    const low = c === 0xe0 ? 0xa0 : 0x80
    const high = c === 0xed ? 0x9f : 0xbf
    if (c1 < low || c1 > high) return -1
    const c2 = b[i + 2]
    return c2 !== undefined && c2 >= 0x80 && c2 <= 0xbf ? 3 : -1
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const low = c === 0xf0 ? 0x90 : 0x80
    const high = c === 0xf4 ? 0x8f : 0xbf
    if (c1 < low || c1 > high) return -1
    const c2 = b[i + 2]
    const c3 = b[i + 3]
    return c2 !== undefined && c2 >= 0x80 && c2 <= 0xbf && c3 !== undefined && c3 >= 0x80 && c3 <= 0xbf
      ? 4
      : -1
  }
  return -1
}

/**
 * The string at `i` (its opening quote), counted: the index after its
 * closing quote with the UTF-8 length of its decoded value in `out.bytes`
 * (what `Buffer.byteLength(JSON.parse(…))` gives), or -1. Text outside ASCII
 * counts as its bytes when they are well-formed UTF-8 (decoding keeps them
 * as they are); anything else declines, as does an escaped surrogate (its
 * byte count depends on what surrounds it: the parser counts those).
 */
export const stringBytes = (b: Uint8Array, i: number, out: Counted): number => {
  const n = b.length
  let bytes = 0
  for (i++; i < n; i++) {
    const c = b[i]!
    if (c === QUOTE) {
      out.bytes = bytes
      return i + 1
    }
    if (c === BACKSLASH) {
      const length = escapeLength(b, i)
      if (length < 0) return -1
      if (length === 6) {
        const unit =
          (hexValue(b[i + 2]!) << 12) |
          (hexValue(b[i + 3]!) << 8) |
          (hexValue(b[i + 4]!) << 4) |
          hexValue(b[i + 5]!)
        if (unit >= 0xd800 && unit <= 0xdfff) return -1
        bytes += unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3
      } else bytes += 1
      i += length - 1
    } else if (c >= 0x80) {
      const length = utf8Length(b, i, c)
      if (length < 0) return -1
      bytes += length
      i += length - 1
    } else if (c < 0x20) return -1
    else bytes += 1
  }
  return -1
}

const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39

/** The number at `i`, in JSON's grammar: the index after it, or -1. */
export const skipNumber = (b: Uint8Array, i: number): number => {
  if (b[i] === 0x2d) i++
  if (b[i] === 0x30) i++
  else if (isDigit(b[i])) while (isDigit(b[i])) i++
  else return -1
  if (b[i] === 0x2e) {
    i++
    if (!isDigit(b[i])) return -1
    while (isDigit(b[i])) i++
  }
  if (b[i] === 0x65 || b[i] === 0x45) {
    i++
    if (b[i] === 0x2b || b[i] === 0x2d) i++
    if (!isDigit(b[i])) return -1
    while (isDigit(b[i])) i++
  }
  return i
}

const NULL = [0x6e, 0x75, 0x6c, 0x6c]
const TRUE = [0x74, 0x72, 0x75, 0x65]
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65]

const skipWord = (b: Uint8Array, i: number, word: ReadonlyArray<number>): number => {
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return -1
  return i + word.length
}

/** `null` at `i`: the index after it, or -1. */
export const skipNull = (b: Uint8Array, i: number): number => skipWord(b, i, NULL)

/** Any JSON value at `i` (no space before it): the index after it, or -1. */
export const skipValue = (b: Uint8Array, i: number, depth = 0): number => {
  const c = b[i]
  if (c === QUOTE) return skipString(b, i)
  if (c === 0x7b || c === 0x5b) {
    if (depth >= MAX_DEPTH) return -1
    const close = c === 0x7b ? 0x7d : 0x5d
    i = skipSpace(b, i + 1)
    if (b[i] === close) return i + 1
    for (;;) {
      if (c === 0x7b) {
        if (b[i] !== QUOTE) return -1
        i = skipString(b, i)
        if (i < 0) return -1
        i = skipSpace(b, i)
        if (b[i] !== 0x3a) return -1
        i = skipSpace(b, i + 1)
      }
      i = skipValue(b, i, depth + 1)
      if (i < 0) return -1
      i = skipSpace(b, i)
      if (b[i] === close) return i + 1
      if (b[i] !== 0x2c) return -1
      i = skipSpace(b, i + 1)
    }
  }
  if (c === 0x6e) return skipWord(b, i, NULL)
  if (c === 0x74) return skipWord(b, i, TRUE)
  if (c === 0x66) return skipWord(b, i, FALSE)
  return skipNumber(b, i)
}

/** Where `readKey` leaves the end of the key it read. */
export interface Key {
  /** The index after the key's closing quote. */
  end: number
}

/** Names as bytes, for `readKey`. */
export const names = (...list: ReadonlyArray<string>): ReadonlyArray<Uint8Array> =>
  list.map((name) => new Uint8Array(Buffer.from(name, "latin1")))

/**
 * The key at `i` (its opening quote): its index in `known`, `known.length`
 * for any other key, or -1 (an escape in it: it could spell a known name,
 * so the caller declines; or no closing quote). `out.end` is the index after
 * its closing quote.
 */
export const readKey = (b: Uint8Array, i: number, known: ReadonlyArray<Uint8Array>, out: Key): number => {
  const start = i + 1
  const n = b.length
  let end = start
  for (; end < n; end++) {
    const c = b[end]!
    if (c === QUOTE) break
    if (c === BACKSLASH || c < 0x20) return -1
  }
  if (end >= n) return -1
  out.end = end + 1
  const length = end - start
  for (let k = 0; k < known.length; k++) {
    const name = known[k]!
    if (name.length !== length) continue
    let same = true
    for (let j = 0; j < length; j++) {
      if (b[start + j] !== name[j]) {
        same = false
        break
      }
    }
    if (same) return k
  }
  return known.length
}
