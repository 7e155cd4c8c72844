/**
 * The translation layer between the three client wire formats — Anthropic
 * Messages, OpenAI Chat Completions and OpenAI Responses — for routes with
 * `translate: true` (SPEC "Translation between API formats";
 * docs/translation.md). Pure, synchronous functions: the gateway calls them
 * per request, per response and per stream chunk.
 *
 * Translated pairs (client → upstream): Chat → Messages, Messages → Chat,
 * Responses → Messages; responses travel the other way.
 */
import type { InvalidRequest } from "../domain/errors.js"
import { chatToMessages } from "./request/chatToMessages.js"
import { messagesToChat } from "./request/messagesToChat.js"
import { responsesToMessages } from "./request/responsesToMessages.js"
import * as json from "./response/json.js"
import { jsonBuffer, parseObject, unsupportedPair, type Json, type Wire } from "./wire.js"

export type { Wire } from "./wire.js"
export { translateErrorBody } from "./errors.js"
export { makeStreamTranslator, type StreamTranslator } from "./stream/index.js"
export { DEFAULT_MAX_TOKENS } from "./request/anthropicParams.js"

/**
 * The client's body (parsed JSON object) in `from`'s format → the upstream
 * body in `to`'s format, with `model`. What cannot be translated: an
 * InvalidRequest whose message names the field (e.g. "previous_response_id: …").
 * Any pair but Chat → Messages, Messages → Chat and Responses → Messages is refused.
 */
export const translateRequest = (
  from: Wire,
  to: Wire,
  body: Readonly<Record<string, unknown>>,
  model: string,
): Record<string, unknown> | InvalidRequest => {
  if (to === "/v1/messages" && from === "/v1/chat/completions") return chatToMessages(body, model)
  if (to === "/v1/messages" && from === "/v1/responses") return responsesToMessages(body, model)
  if (to === "/v1/chat/completions" && from === "/v1/messages") return messagesToChat(body, model)
  return unsupportedPair(from, to)
}

/** The JSON translator of each upstream → client pair. */
const RESPONSES: ReadonlyArray<readonly [Wire, Wire, (body: Json, model: string) => Json | undefined]> = [
  ["/v1/messages", "/v1/chat/completions", json.messagesToChat],
  ["/v1/chat/completions", "/v1/messages", json.chatToMessages],
  ["/v1/messages", "/v1/responses", json.messagesToResponses],
]

/**
 * A 2xx JSON response body of the upstream (`from`) → the client's format
 * (`to`); undefined when the body is not a valid response of `from` (the
 * gateway then treats it as a malformed upstream answer). `model`: what the
 * client sees. The same format on both sides passes through unchanged.
 */
export const translateResponse = (
  from: Wire,
  to: Wire,
  body: Uint8Array,
  options: { model: string },
): Buffer | undefined => {
  const parsed = parseObject(body)
  if (parsed === undefined) return undefined
  if (from === to) return Buffer.from(body)
  for (const [upstream, client, translate] of RESPONSES)
    if (upstream === from && client === to) {
      const translated = translate(parsed, options.model)
      return translated === undefined ? undefined : jsonBuffer(translated)
    }
  return undefined
}
