import type { ChunkTransform } from "./relay.js"

/**
 * Chat Completions streams: Tollgate asks every upstream for
 * `stream_options.include_usage` (the meter needs the usage), but a client
 * that did not ask for it does not get the usage-only final chunk
 * (`"choices":[]` with a `usage` object) — SPEC "More of the providers'
 * APIs". The filter passes whole events through as they are and drops only
 * that one; a partial event waits for its end (at most MAX_CARRY_BYTES,
 * then it goes through as it is). Only events that contain an empty
 * `choices` array are parsed.
 */

/** Longest partial event held back while waiting for its end; past it the bytes go through unfiltered. */
const MAX_CARRY_BYTES = 64 * 1024

/**
 * `[]`, which both `"choices":[]` and `"choices": []` hold: a chunk without it has no usage-only event (one
 * native search per chunk; a chunk that has it, say in its text, is only parsed).
 */
const EMPTY_ARRAY = Buffer.from("[]")

const hasEmptyChoices = (bytes: Buffer): boolean => bytes.indexOf(EMPTY_ARRAY) >= 0

const LF_LF = Buffer.from("\n\n")
const CRLF_CRLF = Buffer.from("\r\n\r\n")
const CR_CR = Buffer.from("\r\r")
const LF = 0x0a
const CR = 0x0d

/** `bytes` ends with a blank line (`\n\n` or `\r\r`): every event in it is whole. */
const endsWithBlankLine = (bytes: Buffer): boolean => {
  const n = bytes.length
  return (
    n >= 2 && ((bytes[n - 1] === LF && bytes[n - 2] === LF) || (bytes[n - 1] === CR && bytes[n - 2] === CR))
  )
}

/** The index just past the last event boundary (blank line) in `bytes`, or 0. */
const completeUpTo = (bytes: Buffer): number => {
  // Most chunks end with their event's blank line: then nothing of it is left to wait for.
  if (endsWithBlankLine(bytes)) return bytes.length
  const lf = bytes.lastIndexOf(LF_LF)
  const crlf = bytes.lastIndexOf(CRLF_CRLF)
  const cr = bytes.lastIndexOf(CR_CR)
  return Math.max(lf < 0 ? 0 : lf + 2, crlf < 0 ? 0 : crlf + 4, cr < 0 ? 0 : cr + 2)
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The event's data is a chunk with no choices and a usage object. */
const isUsageOnly = (event: string): boolean => {
  const data = event
    .split(/\r\n|\r|\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
    .join("\n")
  try {
    const parsed: unknown = JSON.parse(data)
    return (
      isRecord(parsed) &&
      Array.isArray(parsed["choices"]) &&
      parsed["choices"].length === 0 &&
      isRecord(parsed["usage"])
    )
  } catch {
    return false
  }
}

/** Complete events without the usage-only one. */
const filterEvents = (complete: Buffer): Buffer | undefined => {
  if (!hasEmptyChoices(complete)) return complete
  const text = complete.toString("utf8")
  const events = text.split(/(?<=\r\n\r\n|\n\n|\r\r)/)
  const kept = events.filter((event) => !isUsageOnly(event))
  if (kept.length === events.length) return complete
  return kept.length === 0 ? undefined : Buffer.from(kept.join(""), "utf8")
}

/**
 * A fresh filter for one stream. `usage`: the stream meter's accumulator, which has seen each chunk before
 * the filter does (the relay's observer runs first). Until it has any usage, a chunk of whole events holds no
 * usage-only event — the meter would have folded its usage — so such a chunk goes through as it is, with no
 * search: most chunks of a stream, whose usage comes last. Once it has usage, or when a chunk ends inside an
 * event, every chunk is filtered as without it.
 */
export const makeUsageChunkFilter = (usage?: { readonly reported: boolean }): ChunkTransform => {
  let carry: Buffer | undefined
  return {
    push: (chunk) => {
      if (carry === undefined && usage !== undefined && !usage.reported && endsWithBlankLine(chunk))
        return chunk
      const bytes = carry === undefined ? chunk : Buffer.concat([carry, chunk])
      carry = undefined
      const upTo = completeUpTo(bytes)
      const complete =
        upTo === 0 ? undefined : filterEvents(upTo === bytes.length ? bytes : bytes.subarray(0, upTo))
      if (upTo === bytes.length) return complete
      const rest = bytes.subarray(upTo)
      if (rest.length <= MAX_CARRY_BYTES) {
        carry = Buffer.from(rest)
        return complete
      }
      return complete === undefined ? rest : Buffer.concat([complete, rest])
    },
    end: () => {
      const rest = carry
      carry = undefined
      return rest === undefined ? undefined : filterEvents(rest)
    },
  }
}
