/**
 * JSON text pieces for the lines written once per request (the usage record,
 * the request log line), built by concatenation: the same text
 * `JSON.stringify` gives, without an object built to be stringified and
 * without a call into the engine for a string that needs no escape.
 */

/** Characters `JSON.stringify` escapes (control characters, `"`, `\`) or checks (surrogates). */
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/

/** `JSON.stringify(s)`. */
export const jsonString = (s: string): string => (NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`)

/** `JSON.stringify(s)` of a string or null. */
export const jsonNullable = (s: string | null): string => (s === null ? "null" : jsonString(s))

/** `JSON.stringify(n)`: non-finite numbers are `null`. */
export const jsonNumber = (n: number): string => (Number.isFinite(n) ? `${n}` : "null")

/** Largest time `toISOString` writes as `YYYY-MM-DDTHH:MM:SS.mmmZ` (the end of year 9999). */
const LAST_FOUR_DIGIT_YEAR_MS = 253402300799999

let secondStart = Number.NaN
/** `YYYY-MM-DDTHH:MM:SS.` of `secondStart`. */
let secondPrefix = ""

/**
 * `new Date(ms).toISOString()`, reusing the date and time of the last
 * second asked for (lines come in bursts within one second).
 */
export const isoTime = (ms: number): string => {
  if (!Number.isInteger(ms) || ms < 0 || ms > LAST_FOUR_DIGIT_YEAR_MS) return new Date(ms).toISOString()
  const millis = ms % 1000
  const start = ms - millis
  if (start !== secondStart) {
    secondPrefix = new Date(start).toISOString().slice(0, 20)
    secondStart = start
  }
  return secondPrefix + (millis < 10 ? "00" : millis < 100 ? "0" : "") + millis + "Z"
}

let parsedPrefix = ""
let parsedStart = 0

const digit = (s: string, i: number): number => {
  const d = s.charCodeAt(i) - 48
  return d >= 0 && d <= 9 ? d : -1
}

/**
 * `Date.parse(ts)`, without the engine's date parser for a
 * `YYYY-MM-DDTHH:MM:SS.mmmZ` in the same second as the last one parsed.
 */
export const parseIsoTime = (ts: string): number => {
  if (ts.length === 24 && ts.charCodeAt(23) === 90 /* Z */) {
    const a = digit(ts, 20)
    const b = digit(ts, 21)
    const c = digit(ts, 22)
    if (a >= 0 && b >= 0 && c >= 0) {
      const millis = a * 100 + b * 10 + c
      if (parsedPrefix !== "" && ts.startsWith(parsedPrefix)) return parsedStart + millis
      const parsed = Date.parse(ts)
      // Only a time in the form toISOString writes (so every millisecond of its second parses the same way).
      if (!Number.isNaN(parsed) && new Date(parsed).toISOString() === ts) {
        parsedPrefix = ts.slice(0, 20)
        parsedStart = parsed - millis
      }
      return parsed
    }
  }
  return Date.parse(ts)
}
