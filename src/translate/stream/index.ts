/**
 * Picks the stream translator of an upstream/client pair.
 */
import { dataEvent, namedEvent, type StreamTranslator } from "./base.js"
import { ChatToMessagesStream } from "./chatToMessages.js"
import { MessagesToChatStream } from "./messagesToChat.js"
import { MessagesToResponsesStream } from "./messagesToResponses.js"
import type { Wire } from "../wire.js"

export type { StreamTranslator } from "./base.js"

const toBuffer = (chunk: Uint8Array): Buffer =>
  Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)

/** The same format on both sides: the bytes as they are. */
const passThrough = (): StreamTranslator => ({ push: toBuffer, end: () => undefined })

/** A pair with no translator: one in-band error in the client's format, then nothing. */
const refusing = (from: Wire, to: Wire): StreamTranslator => {
  let said = false
  const say = (): Buffer | undefined => {
    if (said) return undefined
    said = true
    const message = `a ${from} stream cannot be translated to ${to}`
    return Buffer.from(
      to === "/v1/messages"
        ? namedEvent("error", { type: "error", error: { type: "api_error", message } })
        : to === "/v1/responses"
          ? namedEvent("error", {
              type: "error",
              code: "api_error",
              message,
              param: null,
              sequence_number: 0,
            })
          : dataEvent({ error: { type: "api_error", message, code: null } }),
      "utf8",
    )
  }
  return { push: say, end: say }
}

/**
 * A translator of the upstream's (`from`) SSE stream into the client's (`to`)
 * stream format. `includeUsage`: the client asked for usage in the stream
 * (Chat: `stream_options.include_usage`; the other formats always carry it).
 * `model`: what the client sees.
 */
export const makeStreamTranslator = (
  from: Wire,
  to: Wire,
  options: { model: string; includeUsage: boolean },
): StreamTranslator => {
  if (from === to) return passThrough()
  if (from === "/v1/messages" && to === "/v1/chat/completions")
    return new MessagesToChatStream(options.model, options.includeUsage)
  if (from === "/v1/chat/completions" && to === "/v1/messages") return new ChatToMessagesStream(options.model)
  if (from === "/v1/messages" && to === "/v1/responses") return new MessagesToResponsesStream(options.model)
  return refusing(from, to)
}
