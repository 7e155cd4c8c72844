/**
 * A strict structural validator of a Chat Completions request, written from
 * `ChatCompletionCreateParamsBase` and the message params in
 * node_modules/openai/resources/chat/completions/completions.d.ts, narrowed
 * to what a translated request may hold, plus the API's tool-call rules:
 * tool messages follow the assistant message whose calls they answer, and
 * every call is answered before the next non-tool message.
 */

import { isObject, isString, startProblems, type Json } from "./common.js"

const TOP_LEVEL = new Set([
  "model",
  "messages",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "stop",
  "stream",
  "stream_options",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "user",
])

export const validateChatRequest = (body: Json): Array<string> => {
  const { problems, bad, onlyKeys } = startProblems(body, TOP_LEVEL)
  if ("max_completion_tokens" in body && !Number.isInteger(body["max_completion_tokens"]))
    bad("max_completion_tokens", "must be an integer")
  if ("temperature" in body && (typeof body["temperature"] !== "number" || body["temperature"] > 2))
    bad("temperature", "must be a number in [0, 2]")
  if ("top_p" in body && typeof body["top_p"] !== "number") bad("top_p", "must be a number")
  if ("stop" in body && !(Array.isArray(body["stop"]) && body["stop"].every(isString)))
    bad("stop", "must be strings")
  if ("user" in body && !isString(body["user"])) bad("user", "must be a string")
  if ("stream" in body && body["stream"] !== true) bad("stream", "is set only to true")
  if ("stream_options" in body) {
    if (body["stream"] !== true) bad("stream_options", "only with stream")
    const options = body["stream_options"]
    if (!isObject(options) || options["include_usage"] !== true) bad("stream_options", "must ask for usage")
  }

  const names = new Set<string>()
  const tools = body["tools"]
  if ("tools" in body) {
    if (!Array.isArray(tools) || tools.length === 0) bad("tools", "must be a non-empty array")
    else
      tools.forEach((tool: unknown, i) => {
        const path = `tools[${i}]`
        if (!isObject(tool) || tool["type"] !== "function" || !isObject(tool["function"]))
          return bad(path, "must be a function tool")
        onlyKeys(tool, path, ["type", "function"])
        const fn = tool["function"]
        onlyKeys(fn, `${path}.function`, ["name", "description", "parameters", "strict"])
        if (!isString(fn["name"]) || fn["name"] === "")
          bad(`${path}.function.name`, "must be a non-empty string")
        else if (names.has(fn["name"])) bad(`${path}.function.name`, "duplicate")
        else names.add(fn["name"])
        if ("parameters" in fn && !isObject(fn["parameters"]))
          bad(`${path}.function.parameters`, "must be an object")
        if ("description" in fn && !isString(fn["description"]))
          bad(`${path}.function.description`, "must be a string")
      })
  }
  if ("tool_choice" in body) {
    const choice = body["tool_choice"]
    const named = isObject(choice) && choice["type"] === "function" && isObject(choice["function"])
    if (!named && choice !== "auto" && choice !== "none" && choice !== "required")
      bad("tool_choice", "unknown")
    if (named && !names.has((choice["function"] as Json)["name"] as string))
      bad("tool_choice", "names no tool")
    if (!("tools" in body)) bad("tool_choice", "given without tools")
  }
  if (
    "parallel_tool_calls" in body &&
    (typeof body["parallel_tool_calls"] !== "boolean" || !("tools" in body))
  )
    bad("parallel_tool_calls", "a boolean, only with tools")

  const textOnly = (content: unknown, path: string, allowEmpty: boolean) => {
    if (isString(content)) {
      if (content === "" && !allowEmpty) bad(path, "must not be empty")
    } else if (Array.isArray(content) && content.length > 0)
      content.forEach((part: unknown, j) => {
        if (!isObject(part) || part["type"] !== "text" || !isString(part["text"]))
          bad(`${path}[${j}]`, "must be a text part")
        else onlyKeys(part, `${path}[${j}]`, ["type", "text"])
      })
    else bad(path, "must be a string or text parts")
  }

  const messages = body["messages"]
  if (!Array.isArray(messages) || messages.length === 0) {
    bad("messages", "must be a non-empty array")
    return problems
  }
  let waiting = new Set<string>()
  let answering = false
  messages.forEach((message: unknown, i) => {
    const path = `messages[${i}]`
    if (!isObject(message)) return bad(path, "must be an object")
    const role = message["role"]
    if (role !== "tool") {
      if (waiting.size > 0) bad(path, `tool calls ${[...waiting].join(", ")} were not answered`)
      waiting = new Set()
      answering = false
    }
    if (role === "system") {
      onlyKeys(message, path, ["role", "content"])
      textOnly(message["content"], `${path}.content`, false)
    } else if (role === "user") {
      onlyKeys(message, path, ["role", "content"])
      const content = message["content"]
      if (isString(content)) {
        if (content === "") bad(`${path}.content`, "must not be empty")
      } else if (Array.isArray(content) && content.length > 0)
        content.forEach((part: unknown, j) => {
          const at = `${path}.content[${j}]`
          if (isObject(part) && part["type"] === "text" && isString(part["text"]))
            onlyKeys(part, at, ["type", "text"])
          else if (isObject(part) && part["type"] === "image_url" && isObject(part["image_url"])) {
            onlyKeys(part, at, ["type", "image_url"])
            const url = part["image_url"]["url"]
            if (!isString(url) || !/^(https?:\/\/|data:image\/[a-z]+;base64,)/.test(url))
              bad(`${at}.image_url.url`, "bad URL")
          } else bad(at, "must be a text or image_url part")
        })
      else bad(`${path}.content`, "must be a string or parts")
    } else if (role === "assistant") {
      onlyKeys(message, path, ["role", "content", "tool_calls"])
      const content = message["content"]
      const calls = message["tool_calls"]
      if (content !== null && !isString(content)) bad(`${path}.content`, "must be a string or null")
      if (
        calls === undefined
          ? !isString(content) || content === ""
          : !Array.isArray(calls) || calls.length === 0
      )
        bad(path, "needs content or tool_calls")
      if (Array.isArray(calls))
        calls.forEach((call: unknown, k) => {
          const at = `${path}.tool_calls[${k}]`
          if (!isObject(call) || call["type"] !== "function" || !isObject(call["function"]))
            return bad(at, "must be a function call")
          onlyKeys(call, at, ["id", "type", "function"])
          onlyKeys(call["function"], `${at}.function`, ["name", "arguments"])
          if (!isString(call["id"]) || call["id"] === "") bad(`${at}.id`, "must be a non-empty string")
          else waiting.add(call["id"])
          if (!isString(call["function"]["name"]) || call["function"]["name"] === "")
            bad(`${at}.function.name`, "missing")
          try {
            if (!isObject(JSON.parse(call["function"]["arguments"] as string)))
              bad(`${at}.function.arguments`, "not an object")
          } catch {
            bad(`${at}.function.arguments`, "not JSON")
          }
        })
      answering = Array.isArray(calls)
    } else if (role === "tool") {
      onlyKeys(message, path, ["role", "tool_call_id", "content"])
      const id = message["tool_call_id"]
      if (!answering || !isString(id) || !waiting.has(id))
        bad(`${path}.tool_call_id`, "answers no pending tool call")
      else waiting.delete(id)
      textOnly(message["content"], `${path}.content`, true)
    } else bad(`${path}.role`, "unknown")
  })
  if (waiting.size > 0) bad("messages", `tool calls ${[...waiting].join(", ")} were not answered`)
  if (!messages.some((m: unknown) => isObject(m) && m["role"] !== "system"))
    bad("messages", "only system messages")
  return problems
}
