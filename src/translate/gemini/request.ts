/**
 * A Chat Completions request → a Gemini `generateContent` request body (the
 * model goes in the URL, so `model` is ignored).
 *
 * System and developer messages become `systemInstruction` (one text part
 * each, in order, wherever they stand); user messages become `user` turns,
 * assistant messages `model` turns (tool calls as `functionCall` parts), and
 * each run of tool messages one `user` turn of `functionResponse` parts.
 * Images must be `data:` URLs (Gemini takes inline data, not links). The
 * top-level fields are an allow-list: anything else that is given is refused
 * naming the field, as is whatever changes the answer and has no Gemini form.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { absent, isObject, isRefusal, isString, parseArguments, refuse, type Json } from "../wire.js"
import { generationConfig, toolConfig, tools } from "./requestParams.js"
import { signatureOfId } from "./signatures.js"

/** Top-level Chat fields the translation reads. */
const TRANSLATED = new Set([
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "stop",
  "seed",
  "presence_penalty",
  "frequency_penalty",
  "response_format",
  "reasoning_effort",
  "tools",
  "tool_choice",
])

/** Top-level Chat fields that do not change the answer: dropped. */
const IGNORED = new Set([
  "model",
  "stream",
  "stream_options",
  "user",
  "store",
  "metadata",
  "parallel_tool_calls",
  "service_tier",
])

/** Top-level Chat fields with no Gemini form: [field, refused when, why] (allowed otherwise). */
const REFUSED: ReadonlyArray<readonly [string, (value: unknown) => boolean, string]> = [
  ["n", (v) => !absent(v) && v !== 1, "this target generates one choice only"],
  ["logprobs", (v) => !absent(v) && v !== false, "this target returns no log probabilities"],
  ["top_logprobs", (v) => !absent(v) && v !== 0, "this target returns no log probabilities"],
  [
    "logit_bias",
    (v) => !(absent(v) || (isObject(v) && Object.keys(v).length === 0)),
    "token ids differ between models",
  ],
  ["audio", (v) => !absent(v), "this target has no audio output"],
  [
    "modalities",
    (v) => !absent(v) && !(Array.isArray(v) && v.every((m) => m === "text")),
    "this target answers with text only",
  ],
  ["prediction", (v) => !absent(v), "predicted outputs cannot be translated"],
  ["web_search_options", (v) => !absent(v), "built-in web search cannot be translated"],
  ["functions", (v) => !absent(v), "legacy function calling cannot be translated; use tools"],
  ["function_call", (v) => !absent(v), "legacy function calling cannot be translated; use tool_choice"],
]

const REFUSABLE = new Set(REFUSED.map(([field]) => field))

/** The first top-level field that is refused or unknown (given and not null), as a refusal. */
const refusedField = (body: Readonly<Json>): InvalidRequest | undefined => {
  for (const [field, refused, why] of REFUSED) if (refused(body[field])) return refuse(field, why)
  for (const [field, value] of Object.entries(body))
    if (!absent(value) && !TRANSLATED.has(field) && !IGNORED.has(field) && !REFUSABLE.has(field))
      return refuse(field, "unknown field; it cannot be translated to this target")
  return undefined
}

/** The texts of a content that may hold text only (`kinds`: the part types read as text). */
const texts = (
  content: unknown,
  field: string,
  kinds: ReadonlyArray<string> = ["text"],
): Array<string> | InvalidRequest => {
  if (isString(content)) return content === "" ? [] : [content]
  if (absent(content)) return []
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of text parts")
  const out: Array<string> = []
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j]
    const type = isObject(part) ? part["type"] : undefined
    const text = isObject(part) && isString(type) && kinds.includes(type) ? part[type] : undefined
    if (!isString(text))
      return refuse(`${field}[${j}]`, `only ${kinds.join(" or ")} parts can be translated here`)
    if (text !== "") out.push(text)
  }
  return out
}

/** The `inlineData` part of a Chat image URL, which must be a base64 `data:` URL. */
const inlineImage = (image: unknown, field: string): Json | InvalidRequest => {
  const url = isObject(image) ? image["url"] : undefined
  if (!isString(url) || !url.startsWith("data:"))
    return refuse(field, "Gemini needs inline data: send the image as a base64 data: URL, not a link")
  // Not a regex: the data may be megabytes long.
  const comma = url.indexOf(",")
  const params = comma < 0 ? [] : url.slice(5, comma).toLowerCase().split(";")
  const mimeType = params[0] ?? ""
  if (comma < 0 || !params.includes("base64") || mimeType === "")
    return refuse(field, "a data: URL must be base64 with a media type (data:image/png;base64,…)")
  return {
    inlineData: { mimeType: mimeType === "image/jpg" ? "image/jpeg" : mimeType, data: url.slice(comma + 1) },
  }
}

/** The parts of a user message's content: text and inline images. */
const userParts = (content: unknown, field: string): Array<Json> | InvalidRequest => {
  if (isString(content)) return content === "" ? [] : [{ text: content }]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of content parts")
  const out: Array<Json> = []
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j]
    const at = `${field}[${j}]`
    if (!isObject(part)) return refuse(at, "must be a content part")
    if (part["type"] === "text" && isString(part["text"])) {
      if (part["text"] !== "") out.push({ text: part["text"] })
    } else if (part["type"] === "image_url") {
      const image = inlineImage(part["image_url"], `${at}.image_url`)
      if (isRefusal(image)) return image
      out.push(image)
    } else
      return refuse(
        `${at}.type`,
        `content parts of type ${JSON.stringify(part["type"])} cannot be translated`,
      )
  }
  return out
}

/** The conversation built so far: the system texts, the turns, and the name of every tool call by id. */
class Conversation {
  readonly system: Array<Json> = []
  readonly contents: Array<Json> = []
  private readonly calls = new Map<string, string>()
  /** The parts of the last turn when it holds tool results (the next tool message joins it). */
  private results: Array<Json> | undefined = undefined

  turn(role: "user" | "model", parts: Array<Json>): void {
    if (parts.length === 0) return
    this.contents.push({ role, parts })
    this.results = undefined
  }

  /** The assistant message's text and tool calls as a model turn (`field` names the message). */
  assistant(message: Json, field: string): InvalidRequest | undefined {
    if (!absent(message["audio"])) return refuse(`${field}.audio`, "audio cannot be translated")
    if (!absent(message["function_call"]))
      return refuse(`${field}.function_call`, "legacy function calls cannot be translated; use tool_calls")
    const said = texts(message["content"], `${field}.content`, ["text", "refusal"])
    if (isRefusal(said)) return said
    const parts: Array<Json> = said.map((text) => ({ text }))
    if (isString(message["refusal"]) && message["refusal"] !== "") parts.push({ text: message["refusal"] })
    const calls = message["tool_calls"]
    if (!absent(calls)) {
      if (!Array.isArray(calls)) return refuse(`${field}.tool_calls`, "must be an array")
      for (let k = 0; k < calls.length; k++) {
        const call = this.functionCall(calls[k], `${field}.tool_calls[${k}]`)
        if (isRefusal(call)) return call
        parts.push(call)
      }
    }
    this.turn("model", parts)
    return undefined
  }

  /** A tool message as a `functionResponse` part, in the user turn of the tool messages just before it. */
  tool(message: Json, field: string): InvalidRequest | undefined {
    const id = message["tool_call_id"]
    const name = isString(id) ? this.calls.get(id) : undefined
    if (name === undefined)
      return refuse(`${field}.tool_call_id`, "answers no tool call of an earlier assistant message")
    const result = texts(message["content"], `${field}.content`)
    if (isRefusal(result)) return result
    const part = { functionResponse: { name, response: toolResponse(result.join("")) } }
    if (this.results !== undefined) this.results.push(part)
    else {
      const parts = [part]
      this.turn("user", parts)
      this.results = parts
    }
    return undefined
  }

  private functionCall(call: unknown, at: string): Json | InvalidRequest {
    if (!isObject(call) || call["type"] !== "function" || !isObject(call["function"]))
      return refuse(at, "only function tool calls can be translated")
    const fn = call["function"]
    if (!isString(fn["name"]) || fn["name"] === "")
      return refuse(`${at}.function.name`, "must be a non-empty string")
    const args = parseArguments(fn["arguments"])
    if (args === undefined) return refuse(`${at}.function.arguments`, "must be a JSON object")
    const id = isString(call["id"]) && call["id"] !== "" ? call["id"] : undefined
    if (id !== undefined) this.calls.set(id, fn["name"])
    const signature = id === undefined ? undefined : signatureOfId(id)
    const part: Json = { functionCall: { name: fn["name"], args } }
    if (signature !== undefined) part["thoughtSignature"] = signature
    return part
  }
}

/** A tool result as Gemini's `response` object: the JSON object it holds, else `{content: text}`. */
const toolResponse = (text: string): Json => {
  try {
    const parsed: unknown = JSON.parse(text)
    if (isObject(parsed)) return parsed
  } catch {
    // Not JSON: sent as text.
  }
  return { content: text }
}

/** Adds one Chat message to the conversation (`field` names it). */
const addMessage = (
  conversation: Conversation,
  message: unknown,
  field: string,
): InvalidRequest | undefined => {
  if (!isObject(message)) return refuse(field, "must be an object")
  const role = message["role"]
  switch (role) {
    case "system":
    case "developer": {
      const system = texts(message["content"], `${field}.content`)
      if (isRefusal(system)) return system
      conversation.system.push(...system.map((text) => ({ text })))
      return undefined
    }
    case "user": {
      const parts = userParts(message["content"], `${field}.content`)
      if (isRefusal(parts)) return parts
      conversation.turn("user", parts)
      return undefined
    }
    case "assistant":
      return conversation.assistant(message, field)
    case "tool":
      return conversation.tool(message, field)
    case "function":
      return refuse(`${field}.role`, "legacy function messages cannot be translated; use tool messages")
    default:
      return refuse(`${field}.role`, `unknown role ${JSON.stringify(role)}`)
  }
}

/**
 * The Gemini `generateContent` body of a Chat Completions request body. A tool call whose id carries a
 * thought signature (signatures.ts) goes back with it.
 */
export const chatToGemini = (body: Readonly<Record<string, unknown>>): Json | InvalidRequest => {
  const refused = refusedField(body)
  if (refused !== undefined) return refused
  const messages = body["messages"]
  if (!Array.isArray(messages) || messages.length === 0)
    return refuse("messages", "must be a non-empty array")
  const conversation = new Conversation()
  for (let i = 0; i < messages.length; i++) {
    const failed = addMessage(conversation, messages[i], `messages[${i}]`)
    if (failed !== undefined) return failed
  }
  if (conversation.contents.length === 0)
    return refuse("messages", "there is no message with content to send")
  const config = generationConfig(body)
  if (isRefusal(config)) return config
  const declared = tools(body["tools"])
  if (isRefusal(declared)) return declared
  const choice = toolConfig(body["tool_choice"])
  if (isRefusal(choice)) return choice
  const out: Json = { contents: conversation.contents }
  if (conversation.system.length > 0) out["systemInstruction"] = { parts: conversation.system }
  if (config !== undefined) out["generationConfig"] = config
  if (declared !== undefined) {
    out["tools"] = declared
    if (choice !== undefined) out["toolConfig"] = choice
  }
  return out
}
