/**
 * A Chat Completions request → an Anthropic Messages request.
 *
 * System and developer messages become `system` (in order, wherever they
 * stand); user, assistant and tool messages become alternating turns, with
 * assistant `tool_calls` as `tool_use` blocks and `role: "tool"` messages as
 * `tool_result` blocks. Fields that change the answer and have no Anthropic
 * equivalent are refused naming the field; the rest of OpenAI's extras are
 * dropped (docs/translation.md lists both).
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { anthropicToolId } from "../ids.js"
import { absent, isBlank, isObject, isRefusal, isString, refuse, type Json } from "../wire.js"
import {
  anthropicRequest,
  anthropicTool,
  maxTokens,
  sampling,
  stopSequences,
  type ChoiceMode,
} from "./anthropicParams.js"
import { AnthropicTurns, textBlock, toolResult } from "./anthropicTurns.js"
import { anthropicImage } from "./images.js"

/**
 * Top-level Chat fields that change the answer and have no Anthropic equivalent: [field, refused when,
 * why].
 */
const REFUSED: ReadonlyArray<readonly [string, (value: unknown) => boolean, string]> = [
  ["n", (v) => !absent(v) && v !== 1, "this target generates one choice only"],
  ["logprobs", (v) => v === true, "this target returns no log probabilities"],
  ["top_logprobs", (v) => !absent(v) && v !== 0, "this target returns no log probabilities"],
  ["audio", (v) => !absent(v), "this target has no audio output"],
  [
    "modalities",
    (v) => Array.isArray(v) && v.some((m) => m !== "text"),
    "this target answers with text only",
  ],
  ["functions", (v) => !absent(v), "legacy function calling cannot be translated; use tools"],
  ["function_call", (v) => !absent(v), "legacy function calling cannot be translated; use tool_choice"],
  ["logit_bias", (v) => isObject(v) && Object.keys(v).length > 0, "token ids differ between models"],
  ["web_search_options", (v) => !absent(v), "built-in web search cannot be translated"],
  ["moderation", (v) => !absent(v), "OpenAI moderation cannot be translated"],
  [
    "response_format",
    (v) => !absent(v) && !(isObject(v) && v["type"] === "text"),
    "structured output cannot be translated to this target",
  ],
]

/** Texts of a system/developer/tool message's content: a string or text parts. */
const texts = (content: unknown, field: string): Array<string> | InvalidRequest => {
  if (isString(content)) return isBlank(content) ? [] : [content]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of text parts")
  const out: Array<string> = []
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j]
    if (!isObject(part) || part["type"] !== "text" || !isString(part["text"]))
      return refuse(`${field}[${j}]`, "only text parts are allowed here")
    if (!isBlank(part["text"])) out.push(part["text"])
  }
  return out
}

/** Blocks of a user message's content: text and images. */
const userBlocks = (content: unknown, field: string): Array<Json> | InvalidRequest => {
  if (isString(content)) return isBlank(content) ? [] : [textBlock(content)]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of content parts")
  const out: Array<Json> = []
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j]
    const at = `${field}[${j}]`
    if (!isObject(part)) return refuse(at, "must be a content part")
    if (part["type"] === "text" && isString(part["text"])) {
      if (!isBlank(part["text"])) out.push(textBlock(part["text"]))
    } else if (part["type"] === "image_url") {
      const url = isObject(part["image_url"]) ? part["image_url"]["url"] : undefined
      const image = anthropicImage(url, `${at}.image_url.url`)
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

/**
 * Blocks of an assistant message: its text (and refusal), then its tool calls as `tool_use` (labelled in
 * `turns`).
 */
const assistantBlocks = (
  message: Json,
  field: string,
  turns: AnthropicTurns,
): Array<Json> | InvalidRequest => {
  if (!absent(message["audio"])) return refuse(`${field}.audio`, "audio cannot be translated")
  if (!absent(message["function_call"]))
    return refuse(`${field}.function_call`, "legacy function calls cannot be translated; use tool_calls")
  const out: Array<Json> = []
  const content = message["content"]
  if (isString(content)) {
    if (!isBlank(content)) out.push(textBlock(content))
  } else if (Array.isArray(content)) {
    for (let j = 0; j < content.length; j++) {
      const part: unknown = content[j]
      const text = !isObject(part) ? undefined : part["type"] === "refusal" ? part["refusal"] : part["text"]
      if (!isObject(part) || !isString(text))
        return refuse(`${field}.content[${j}]`, "must be a text or refusal part")
      if (!isBlank(text)) out.push(textBlock(text))
    }
  } else if (!absent(content)) return refuse(`${field}.content`, "must be a string, content parts or null")
  if (isString(message["refusal"]) && !isBlank(message["refusal"])) out.push(textBlock(message["refusal"]))
  const calls = message["tool_calls"]
  if (absent(calls)) return out
  if (!Array.isArray(calls)) return refuse(`${field}.tool_calls`, "must be an array")
  for (let k = 0; k < calls.length; k++) {
    const call: unknown = calls[k]
    const at = `${field}.tool_calls[${k}]`
    if (!isObject(call) || call["type"] !== "function" || !isObject(call["function"]))
      return refuse(at, "only function tool calls can be translated")
    const fn = call["function"]
    const block = turns.toolUse(
      { id: call["id"], name: fn["name"], arguments: fn["arguments"] },
      { id: `${at}.id`, name: `${at}.function.name`, arguments: `${at}.function.arguments` },
    )
    if (isRefusal(block)) return block
    out.push(block)
  }
  return out
}

/** The tool choice of Chat `tool_choice`. */
const choiceMode = (choice: unknown): ChoiceMode | undefined | InvalidRequest => {
  if (absent(choice)) return undefined
  if (choice === "auto" || choice === "none" || choice === "required") return choice
  if (isObject(choice) && choice["type"] === "function" && isObject(choice["function"])) {
    const name = choice["function"]["name"]
    if (isString(name) && name !== "") return { name }
  }
  return refuse("tool_choice", "only auto, none, required or a named function can be translated")
}

/** The Anthropic tools of Chat `tools`. */
const tools = (value: unknown): Array<Json> | InvalidRequest => {
  if (absent(value)) return []
  if (!Array.isArray(value)) return refuse("tools", "must be an array")
  const out: Array<Json> = []
  for (let i = 0; i < value.length; i++) {
    const tool: unknown = value[i]
    if (!isObject(tool) || tool["type"] !== "function" || !isObject(tool["function"]))
      return refuse(`tools[${i}].type`, "only function tools can be translated")
    const fn = tool["function"]
    const translated = anthropicTool(
      {
        name: fn["name"],
        description: fn["description"],
        parameters: fn["parameters"],
        strict: fn["strict"],
      },
      `tools[${i}].function`,
    )
    if (isRefusal(translated)) return translated
    out.push(translated)
  }
  return out
}

/** The Anthropic Messages request of a Chat Completions request, for upstream model `model`. */
export const chatToMessages = (body: Readonly<Json>, model: string): Json | InvalidRequest => {
  for (const [field, refused, why] of REFUSED) if (refused(body[field])) return refuse(field, why)
  const messages = body["messages"]
  if (!Array.isArray(messages) || messages.length === 0)
    return refuse("messages", "must be a non-empty array")
  const system: Array<string> = []
  const turns = new AnthropicTurns("messages")
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i]
    const field = `messages[${i}]`
    if (!isObject(message)) return refuse(field, "must be an object")
    const role = message["role"]
    if (role === "system" || role === "developer") {
      const parts = texts(message["content"], `${field}.content`)
      if (isRefusal(parts)) return parts
      system.push(...parts)
    } else if (role === "user") {
      const blocks = userBlocks(message["content"], `${field}.content`)
      if (isRefusal(blocks)) return blocks
      turns.add("user", blocks)
    } else if (role === "assistant") {
      const blocks = assistantBlocks(message, field, turns)
      if (isRefusal(blocks)) return blocks
      turns.add("assistant", blocks)
    } else if (role === "tool") {
      const id = message["tool_call_id"]
      if (!isString(id) || id === "") return refuse(`${field}.tool_call_id`, "must be a non-empty string")
      const content = message["content"]
      const parts = texts(content, `${field}.content`)
      if (isRefusal(parts)) return parts
      // A blank result has no Anthropic text block: the result goes without content.
      const result = isString(content) ? (isBlank(content) ? [] : content) : parts.map(textBlock)
      turns.addToolResult(toolResult(anthropicToolId(id), result), `${field}.tool_call_id`)
    } else if (role === "function")
      return refuse(`${field}.role`, "legacy function messages cannot be translated; use tool messages")
    else return refuse(`${field}.role`, `unknown role ${JSON.stringify(role)}`)
  }
  const conversation = turns.finish()
  if (isRefusal(conversation)) return conversation

  const limitField = absent(body["max_completion_tokens"]) ? "max_tokens" : "max_completion_tokens"
  const limit = maxTokens(body[limitField], limitField)
  if (isRefusal(limit)) return limit
  const params = sampling(body)
  if (isRefusal(params)) return params
  const stop = stopSequences(body["stop"])
  if (isRefusal(stop)) return stop
  const toolList = tools(body["tools"])
  if (isRefusal(toolList)) return toolList
  const mode = choiceMode(body["tool_choice"])
  if (isRefusal(mode)) return mode

  return anthropicRequest(body, {
    model,
    maxTokens: limit,
    messages: conversation,
    system,
    sampling: params,
    stopSequences: stop,
    tools: toolList,
    choice: mode,
  })
}
