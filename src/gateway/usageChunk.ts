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

const EMPTY_CHOICES = [Buffer.from('"choices":[]'), Buffer.from('"choices": []')]

const hasEmptyChoices = (bytes: Buffer): boolean => EMPTY_CHOICES.some((p) => bytes.indexOf(p) >= 0)

/** The index just past the last event boundary (blank line) in `bytes`, or 0. */
const completeUpTo = (bytes: Buffer): number => {
  const lf = bytes.lastIndexOf("\n\n")
  const crlf = bytes.lastIndexOf("\r\n\r\n")
  const cr = bytes.lastIndexOf("\r\r")
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

/** A fresh filter for one stream. */
export const makeUsageChunkFilter = (): ChunkTransform => {
  let carry: Buffer | undefined
  return {
    push: (chunk) => {
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
