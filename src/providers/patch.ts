/**
 * Byte-level patches of a client's JSON body. Adapters change one top-level
 * field (the model) or add one, and everything else — unknown fields, key
 * order, number spelling — reaches the provider exactly as the client sent
 * it, without a parse → stringify round trip of the whole body.
 *
 * The body has already been validated by `JSON.parse`, so the scanner may
 * assume well-formed JSON.
 */

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COMMA = 0x2c
const COLON = 0x3a

/** Byte offsets of one top-level member: `keyStart` at its opening quote, `valueEnd` after its value. */
export interface MemberSpan {
  readonly keyStart: number
  readonly valueStart: number
  readonly valueEnd: number
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

const skipSpace = (buf: Uint8Array, i: number): number => {
  while (i < buf.length && isSpace(buf[i]!)) i++
  return i
}

/** Index just past the closing quote of the string that opens at `i`. */
const skipString = (buf: Uint8Array, i: number): number => {
  i++
  while (i < buf.length) {
    const c = buf[i]!
    if (c === BACKSLASH) i += 2
    else if (c === QUOTE) return i + 1
    else i++
  }
  return i
}

/** Index just past the value that starts at `i`. */
const skipValue = (buf: Uint8Array, i: number): number => {
  const c = buf[i]!
  if (c === QUOTE) return skipString(buf, i)
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0
    while (i < buf.length) {
      const d = buf[i]!
      if (d === QUOTE) {
        i = skipString(buf, i)
        continue
      }
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++
      else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
        depth--
        if (depth === 0) return i + 1
      }
      i++
    }
    return i
  }
  while (i < buf.length) {
    const d = buf[i]!
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) return i
    i++
  }
  return i
}

const keyEquals = (buf: Uint8Array, start: number, end: number, key: string): boolean => {
  // start/end include the quotes
  const len = end - start - 2
  let escaped = false
  for (let j = start + 1; j < end - 1; j++) if (buf[j] === BACKSLASH) escaped = true
  if (escaped) return JSON.parse(Buffer.from(buf.subarray(start, end)).toString("utf8")) === key
  if (len !== key.length) return false
  for (let j = 0; j < len; j++) if (buf[start + 1 + j] !== key.charCodeAt(j)) return false
  return true
}

/** Keys to look for with `duplicatedMember`, each with its quoted form as bytes (made once, not per request). */
export interface MemberKeys {
  readonly keys: ReadonlyArray<string>
  readonly quoted: ReadonlyArray<Buffer>
}

/** `keys` ready for `duplicatedMember`. */
export const memberKeys = (keys: ReadonlyArray<string>): MemberKeys => ({
  keys,
  quoted: keys.map((key) => Buffer.from(`"${key}"`, "utf8")),
})

/**
 * The first of `keys` that is a top-level member of the JSON object in `buf`
 * more than once, or undefined. A native search for each quoted key first:
 * the scan only runs when one of them occurs twice anywhere in the body.
 */
export const duplicatedMember = (buf: Buffer, { keys, quoted }: MemberKeys): string | undefined => {
  for (let k = 0; k < keys.length; k++) {
    const needle = quoted[k]!
    const first = buf.indexOf(needle)
    if (first < 0 || buf.indexOf(needle, first + needle.length) < 0) continue
    if (scanMembers(buf, keys[k]!).count > 1) return keys[k]
  }
  return undefined
}

/** Finds the last top-level member named `key` of the JSON object in `buf` (the one `JSON.parse` keeps). */
export const findMember = (buf: Uint8Array, key: string): MemberSpan | undefined => scanMembers(buf, key).last

const scanMembers = (buf: Uint8Array, key: string): { last: MemberSpan | undefined; count: number } => {
  let count = 0
  let i = skipSpace(buf, 0)
  if (buf[i] !== OPEN_BRACE) return { last: undefined, count: 0 }
  i++
  let found: MemberSpan | undefined
  while (i < buf.length) {
    i = skipSpace(buf, i)
    const c = buf[i]
    if (c === CLOSE_BRACE || c === undefined) return { last: found, count }
    if (c === COMMA) {
      i++
      continue
    }
    const keyStart = i
    const keyEnd = skipString(buf, i)
    i = skipSpace(buf, keyEnd)
    if (buf[i] !== COLON) return { last: found, count }
    const valueStart = skipSpace(buf, i + 1)
    const valueEnd = skipValue(buf, valueStart)
    if (keyEquals(buf, keyStart, keyEnd, key)) {
      found = { keyStart, valueStart, valueEnd }
      count++
    }
    i = valueEnd
  }
  return { last: found, count }
}

/**
 * `buf` with bytes `start`..`end` replaced by `text` (UTF-8), in a buffer of its own: the body goes to
 * undici, which holds it until the response ends — a slice of Node's shared allocation pool (64 KiB on
 * Node 24) would keep the whole pool alive for as long as the stream is open.
 */
const splice = (buf: Buffer, start: number, end: number, text: string): Buffer => {
  const insert = text.length === 0 ? 0 : Buffer.byteLength(text)
  const out = Buffer.allocUnsafeSlow(buf.length - (end - start) + insert)
  buf.copy(out, 0, 0, start)
  if (insert > 0) out.write(text, start, "utf8")
  buf.copy(out, start + insert, end)
  return out
}

/**
 * `buf` with the value of top-level `key` replaced by `json` (already encoded), or the member added first
 * when absent. Duplicate members are collapsed into one: parsers disagree on which of two equal keys wins,
 * and the upstream must see exactly the value Tollgate chose.
 */
export const setMember = (buf: Buffer, key: string, json: string): Buffer => {
  const { last: span, count } = scanMembers(buf, key)
  if (count > 1) return setMember(removeMember(buf, key), key, json)
  if (span !== undefined) {
    return splice(buf, span.valueStart, span.valueEnd, json)
  }
  const open = skipSpace(buf, 0)
  const afterOpen = skipSpace(buf, open + 1)
  const empty = buf[afterOpen] === CLOSE_BRACE
  const member = `${JSON.stringify(key)}:${json}${empty ? "" : ","}`
  return splice(buf, open + 1, open + 1, member)
}

/** `buf` without every top-level member named `key`. */
export const removeMember = (buf: Buffer, key: string): Buffer => {
  let out = buf
  for (let span = findMember(out, key); span !== undefined; span = findMember(out, key)) {
    // Remove the member and one adjacent comma (the following one, else the preceding one).
    let end = skipSpace(out, span.valueEnd)
    let start = span.keyStart
    if (out[end] === COMMA) end++
    else {
      let j = start - 1
      while (j > 0 && isSpace(out[j]!)) j--
      if (out[j] === COMMA) start = j
    }
    out = splice(out, start, end, "")
  }
  return out
}
