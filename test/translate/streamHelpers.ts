/** Helpers of the stream translator tests: run a translator over chunks, read the client's events, compare runs. */
import { makeSseParser } from "../../src/meter/sse.js"
import { makeStreamTranslator, type Wire } from "../../src/translate/index.js"
import type { Script } from "./upstream.js"

export type Json = Record<string, any>

/** Runs a translator over `chunks` and returns the client's whole output. */
export const run = (
  from: Wire,
  to: Wire,
  chunks: ReadonlyArray<string | Uint8Array>,
  includeUsage = true,
): string => {
  const translator = makeStreamTranslator(from, to, { model: "client-model", includeUsage })
  let out = ""
  for (const chunk of chunks)
    out += translator.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)?.toString("utf8") ?? ""
  return out + (translator.end()?.toString("utf8") ?? "")
}

/** The client's events: [event name or "message", parsed data or the raw data]. */
export const events = (text: string): Array<[string, Json | string]> => {
  const out: Array<[string, Json | string]> = []
  const parser = makeSseParser((event, data) => {
    try {
      out.push([event, JSON.parse(data)])
    } catch {
      out.push([event, data])
    }
  })
  parser.push(Buffer.from(text))
  parser.end()
  return out
}

/** Output with the made-up ids and timestamps replaced, to compare two runs. */
export const normalized = (text: string) =>
  text
    .replace(/(chatcmpl-|msg_|resp_|fc_|call_)[A-Za-z0-9]{24}/g, "$1ID")
    .replace(/"(created|created_at)":\d+/g, '"$1":0')

export const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

export const script: Script = {
  parts: [
    { kind: "text", pieces: ["Hel", "lo ", "🌍"] },
    {
      kind: "tool",
      id: "toolu_1",
      name: "weather",
      input: { city: "Oslo" },
      pieces: ['{"ci', 'ty":"Oslo"}'],
    },
  ],
  stop: "tool_use",
  usage: { input: 10, output: 7, cacheRead: 4, cacheWrite: 2 },
}
