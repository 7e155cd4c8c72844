/**
 * An Anthropic Messages request → a Chat Completions request.
 *
 * `system` becomes the first message; each user turn's `tool_result` blocks
 * become `role: "tool"` messages ahead of the rest of the turn; assistant
 * `tool_use` blocks become `tool_calls`. Thinking blocks in the history are
 * dropped (Chat has no way to send them back). Fields that change the answer
 * and have no Chat equivalent are refused naming the field.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { absent, isObject, isRefusal, isString, refuse, type Json } from "../wire.js"
import { openaiImageUrl } from "./images.js"

/**
 * Top-level Anthropic fields that change the answer and have no Chat equivalent: [field, refused when,
 * why].
 */
const REFUSED: ReadonlyArray<readonly [string, (value: unknown) => boolean, string]> = [
  [
    "thinking",
    (v) => isObject(v) && v["type"] !== "disabled" && v["type"] !== "adaptive",
    "thinking with a token budget cannot be translated; use adaptive or disabled",
  ],
  [
    "output_config",
    (v) => isObject(v) && !absent(v["format"]),
    "structured output cannot be translated to this target",
  ],
  ["mcp_servers", (v) => Array.isArray(v) && v.length > 0, "MCP servers cannot be translated"],
  ["container", (v) => !absent(v), "containers cannot be translated"],
  ["context_management", (v) => !absent(v), "context management cannot be translated"],
]

/** One Chat content part or string of text blocks: a string for a single text, else text parts. */
const textContent = (texts: ReadonlyArray<string>): string | Array<Json> =>
  texts.length === 1 ? (texts[0] as string) : texts.map((text) => ({ type: "text", text }))

/** Texts of `system`, a system message, or a tool result: a string or text blocks (only). */
const texts = (content: unknown, field: string): Array<string> | InvalidRequest => {
  if (isString(content)) return content === "" ? [] : [content]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of text blocks")
  const out: Array<string> = []
  for (let k = 0; k < content.length; k++) {
    const block: unknown = content[k]
    if (!isObject(block) || block["type"] !== "text" || !isString(block["text"]))
      return refuse(`${field}[${k}]`, "only text blocks can be translated here")
    if (block["text"] !== "") out.push(block["text"])
  }
  return out
}

/** Chat messages of a user turn: its tool results as tool messages, then the rest as one user message. */
const userMessages = (content: unknown, field: string): Array<Json> | InvalidRequest => {
  if (isString(content)) return content === "" ? [] : [{ role: "user", content }]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of content blocks")
  const tools: Array<Json> = []
  const parts: Array<Json> = []
  for (let j = 0; j < content.length; j++) {
    const block: unknown = content[j]
    const at = `${field}[${j}]`
    if (!isObject(block)) return refuse(at, "must be a content block")
    if (block["type"] === "text" && isString(block["text"])) {
      if (block["text"] !== "") parts.push({ type: "text", text: block["text"] })
    } else if (block["type"] === "image") {
      const url = openaiImageUrl(block["source"], `${at}.source`)
      if (isRefusal(url)) return url
      parts.push({ type: "image_url", image_url: { url } })
    } else if (block["type"] === "tool_result") {
      if (!isString(block["tool_use_id"]) || block["tool_use_id"] === "")
        return refuse(`${at}.tool_use_id`, "must be a non-empty string")
      const result = absent(block["content"]) ? [] : texts(block["content"], `${at}.content`)
      if (isRefusal(result)) return result
      tools.push({
        role: "tool",
        tool_call_id: block["tool_use_id"],
        content: result.length === 0 ? "" : textContent(result),
      })
    } else
      return refuse(
        `${at}.type`,
        `content blocks of type ${JSON.stringify(block["type"])} cannot be translated`,
      )
  }
  if (parts.length === 0) return tools
  const only = parts.length === 1 ? parts[0] : undefined
  return [...tools, { role: "user", content: only?.["type"] === "text" ? only["text"] : parts }]
}

/** The Chat message of an assistant turn (none when it holds only thinking). */
const assistantMessages = (content: unknown, field: string): Array<Json> | InvalidRequest => {
  if (isString(content)) return content === "" ? [] : [{ role: "assistant", content }]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of content blocks")
  let text = ""
  const calls: Array<Json> = []
  for (let j = 0; j < content.length; j++) {
    const block: unknown = content[j]
    const at = `${field}[${j}]`
    if (!isObject(block)) return refuse(at, "must be a content block")
    const type = block["type"]
    if (type === "text" && isString(block["text"])) text += block["text"]
    else if (type === "tool_use") {
      if (!isString(block["id"]) || block["id"] === "")
        return refuse(`${at}.id`, "must be a non-empty string")
      if (!isString(block["name"]) || block["name"] === "")
        return refuse(`${at}.name`, "must be a non-empty string")
      const args = JSON.stringify(block["input"] ?? {})
      calls.push({ id: block["id"], type: "function", function: { name: block["name"], arguments: args } })
    } else if (type !== "thinking" && type !== "redacted_thinking")
      return refuse(`${at}.type`, `content blocks of type ${JSON.stringify(type)} cannot be translated`)
  }
  if (text === "" && calls.length === 0) return []
  const message: Json = { role: "assistant", content: text === "" ? null : text }
  if (calls.length > 0) message["tool_calls"] = calls
  return [message]
}

/** Chat `tools` of Anthropic `tools`: custom tools only (built-in tools run on Anthropic's side). */
const tools = (value: unknown): Array<Json> | InvalidRequest => {
  if (absent(value)) return []
  if (!Array.isArray(value)) return refuse("tools", "must be an array")
  const out: Array<Json> = []
  for (let i = 0; i < value.length; i++) {
    const tool: unknown = value[i]
    if (!isObject(tool)) return refuse(`tools[${i}]`, "must be an object")
    if (!absent(tool["type"]) && tool["type"] !== "custom")
      return refuse(
        `tools[${i}].type`,
        `the built-in tool ${JSON.stringify(tool["type"])} cannot be translated`,
      )
    if (!isString(tool["name"]) || tool["name"] === "")
      return refuse(`tools[${i}].name`, "must be a non-empty string")
    if (!isObject(tool["input_schema"]))
      return refuse(`tools[${i}].input_schema`, "must be a JSON schema object")
    const fn: Json = { name: tool["name"], parameters: tool["input_schema"] }
    if (isString(tool["description"])) fn["description"] = tool["description"]
    if (tool["strict"] === true) fn["strict"] = true
    out.push({ type: "function", function: fn })
  }
  return out
}

/**
 * Chat `tool_choice` of Anthropic `tool_choice`: auto → auto, any → required,
 * tool → a named function, none → none.
 */
const toolChoice = (choice: unknown): unknown => {
  if (!isObject(choice)) return undefined
  switch (choice["type"]) {
    case "auto":
    case "none":
      return choice["type"]
    case "any":
      return "required"
    case "tool":
      return isString(choice["name"]) ? { type: "function", function: { name: choice["name"] } } : undefined
    default:
      return undefined
  }
}

/** The Chat Completions request of an Anthropic Messages request, for upstream model `model`. */
export const messagesToChat = (body: Readonly<Json>, model: string): Json | InvalidRequest => {
  for (const [field, refused, why] of REFUSED) if (refused(body[field])) return refuse(field, why)
  const out: Array<Json> = []
  if (!absent(body["system"])) {
    const system = texts(body["system"], "system")
    if (isRefusal(system)) return system
    if (system.length > 0) out.push({ role: "system", content: textContent(system) })
  }
  const messages = body["messages"]
  if (!Array.isArray(messages) || messages.length === 0)
    return refuse("messages", "must be a non-empty array")
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i]
    const field = `messages[${i}]`
    if (!isObject(message)) return refuse(field, "must be an object")
    const role = message["role"]
    let translated: Array<Json> | InvalidRequest
    if (role === "user") translated = userMessages(message["content"], `${field}.content`)
    else if (role === "assistant") translated = assistantMessages(message["content"], `${field}.content`)
    else if (role === "system") {
      const system = texts(message["content"], `${field}.content`)
      translated = isRefusal(system)
        ? system
        : system.length === 0
          ? []
          : [{ role: "system", content: textContent(system) }]
    } else return refuse(`${field}.role`, `unknown role ${JSON.stringify(role)}`)
    if (isRefusal(translated)) return translated
    out.push(...translated)
  }
  if (!out.some((m) => m["role"] !== "system"))
    return refuse("messages", "there is no message with content to send")

  const toolList = tools(body["tools"])
  if (isRefusal(toolList)) return toolList
  const request: Json = { model, messages: out }
  if (typeof body["max_tokens"] === "number") request["max_completion_tokens"] = body["max_tokens"]
  if (typeof body["temperature"] === "number") request["temperature"] = body["temperature"]
  if (typeof body["top_p"] === "number") request["top_p"] = body["top_p"]
  const stop = body["stop_sequences"]
  if (Array.isArray(stop) && stop.length > 0) request["stop"] = stop
  if (toolList.length > 0) {
    request["tools"] = toolList
    const choice = toolChoice(body["tool_choice"])
    if (choice !== undefined) request["tool_choice"] = choice
    if (isObject(body["tool_choice"]) && body["tool_choice"]["disable_parallel_tool_use"] === true)
      request["parallel_tool_calls"] = false
  }
  const metadata = body["metadata"]
  if (isObject(metadata) && isString(metadata["user_id"]) && metadata["user_id"] !== "")
    request["user"] = metadata["user_id"]
  if (body["stream"] === true) {
    request["stream"] = true
    request["stream_options"] = { include_usage: true }
  }
  return request
}
