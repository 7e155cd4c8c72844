/**
 * A strict structural validator of an Anthropic Messages request, written
 * from `MessageCreateParamsBase` and the block params in
 * node_modules/@anthropic-ai/sdk/resources/messages/messages.d.ts, narrowed
 * to what a translated request may hold. Returns the problems found (none:
 * valid). `temperature` and `top_p` are API fields of the 2023-06-01 version
 * that the 1.x SDK types no longer list; they are accepted here in range.
 */

import { isObject, isString, startProblems, type Json } from "./common.js"

const TOOL_ID = /^[a-zA-Z0-9_-]+$/
const MEDIA = ["image/jpeg", "image/png", "image/gif", "image/webp"]

const TOP_LEVEL = new Set([
  "model",
  "max_tokens",
  "messages",
  "system",
  "stop_sequences",
  "stream",
  "temperature",
  "top_p",
  "tools",
  "tool_choice",
  "metadata",
])

export const validateAnthropicRequest = (body: Json): Array<string> => {
  const { problems, bad, onlyKeys } = startProblems(body, TOP_LEVEL)
  const max = body["max_tokens"]
  if (typeof max !== "number" || !Number.isInteger(max) || max < 0)
    bad("max_tokens", "must be an integer ≥ 0")
  for (const key of ["temperature", "top_p"])
    if (
      key in body &&
      (typeof body[key] !== "number" || (body[key] as number) < 0 || (body[key] as number) > 1)
    )
      bad(key, "must be a number in [0, 1]")
  if ("stream" in body && typeof body["stream"] !== "boolean") bad("stream", "must be a boolean")
  if ("stop_sequences" in body) {
    const stop = body["stop_sequences"]
    if (!Array.isArray(stop) || !stop.every(isString)) bad("stop_sequences", "must be strings")
  }
  if ("metadata" in body) {
    const metadata = body["metadata"]
    if (!isObject(metadata) || !isString(metadata["user_id"])) bad("metadata", "must be {user_id: string}")
    else onlyKeys(metadata, "metadata", ["user_id"])
  }

  const textBlock = (block: Json, path: string) => {
    onlyKeys(block, path, ["type", "text"])
    if (!isString(block["text"]) || block["text"].trim() === "")
      bad(`${path}.text`, "must hold non-whitespace text")
  }
  if ("system" in body) {
    const system = body["system"]
    if (isString(system)) {
      if (system === "") bad("system", "must not be empty")
    } else if (Array.isArray(system) && system.length > 0)
      system.forEach((b, i) =>
        isObject(b) && b["type"] === "text"
          ? textBlock(b, `system[${i}]`)
          : bad(`system[${i}]`, "must be a text block"),
      )
    else bad("system", "must be a string or text blocks")
  }

  const imageBlock = (block: Json, path: string) => {
    onlyKeys(block, path, ["type", "source"])
    const source = block["source"]
    if (!isObject(source)) return bad(`${path}.source`, "must be an object")
    if (source["type"] === "base64") {
      onlyKeys(source, `${path}.source`, ["type", "media_type", "data"])
      if (!MEDIA.includes(source["media_type"] as string)) bad(`${path}.source.media_type`, "unsupported")
      if (!isString(source["data"])) bad(`${path}.source.data`, "must be a string")
    } else if (source["type"] === "url") {
      onlyKeys(source, `${path}.source`, ["type", "url"])
      if (!isString(source["url"]) || !/^https?:\/\//.test(source["url"]))
        bad(`${path}.source.url`, "must be a URL")
    } else bad(`${path}.source.type`, "must be base64 or url")
  }

  const tools = body["tools"]
  const toolNames = new Set<string>()
  if ("tools" in body) {
    if (!Array.isArray(tools) || tools.length === 0) bad("tools", "must be a non-empty array")
    else
      tools.forEach((tool: unknown, i) => {
        const path = `tools[${i}]`
        if (!isObject(tool)) return bad(path, "must be an object")
        onlyKeys(tool, path, ["name", "description", "input_schema", "strict"])
        if (!isString(tool["name"]) || tool["name"] === "") bad(`${path}.name`, "must be a non-empty string")
        else if (toolNames.has(tool["name"])) bad(`${path}.name`, "duplicate")
        else toolNames.add(tool["name"])
        if (!isObject(tool["input_schema"]) || tool["input_schema"]["type"] !== "object")
          bad(`${path}.input_schema`, 'must be a schema of type "object"')
        if ("description" in tool && !isString(tool["description"]))
          bad(`${path}.description`, "must be a string")
        if ("strict" in tool && typeof tool["strict"] !== "boolean")
          bad(`${path}.strict`, "must be a boolean")
      })
  }
  if ("tool_choice" in body) {
    const choice = body["tool_choice"]
    if (!isObject(choice)) bad("tool_choice", "must be an object")
    else if (choice["type"] === "none") onlyKeys(choice, "tool_choice", ["type"])
    else if (choice["type"] === "auto" || choice["type"] === "any")
      onlyKeys(choice, "tool_choice", ["type", "disable_parallel_tool_use"])
    else if (choice["type"] === "tool") {
      onlyKeys(choice, "tool_choice", ["type", "name", "disable_parallel_tool_use"])
      if (!toolNames.has(choice["name"] as string)) bad("tool_choice.name", "names no tool")
    } else bad("tool_choice.type", "unknown")
    if (!("tools" in body)) bad("tool_choice", "given without tools")
  }

  const messages = body["messages"]
  if (!Array.isArray(messages) || messages.length === 0) {
    bad("messages", "must be a non-empty array")
    return problems
  }
  if (isObject(messages[0]) && messages[0]["role"] !== "user")
    bad("messages[0].role", "the first turn must be the user's")
  const last: unknown = messages[messages.length - 1]
  if (isObject(last) && last["role"] === "assistant") {
    const content = last["content"]
    const end: unknown = isString(content)
      ? { type: "text", text: content }
      : Array.isArray(content)
        ? content[content.length - 1]
        : undefined
    if (isObject(end) && isString(end["text"]) && end["text"] !== end["text"].trimEnd())
      bad(`messages[${messages.length - 1}]`, "a final assistant turn must not end with whitespace")
  }
  let previousCalls = new Set<string>()
  let previousRole: unknown = undefined
  messages.forEach((message: unknown, i) => {
    const path = `messages[${i}]`
    if (!isObject(message)) return bad(path, "must be an object")
    onlyKeys(message, path, ["role", "content"])
    const role = message["role"]
    if (role !== "user" && role !== "assistant") bad(`${path}.role`, "must be user or assistant")
    if (role === previousRole) bad(`${path}.role`, "roles must alternate")
    const content = message["content"]
    const blocks: Array<unknown> = isString(content) ? [] : Array.isArray(content) ? content : []
    if (isString(content) ? content === "" : !Array.isArray(content) || content.length === 0)
      bad(`${path}.content`, "must be a non-empty string or non-empty blocks")
    const calls = new Set<string>()
    const answered = new Set<string>()
    let pastResults = false
    blocks.forEach((block: unknown, j) => {
      const at = `${path}.content[${j}]`
      if (!isObject(block)) return bad(at, "must be a block")
      const type = block["type"]
      if (type !== "tool_result") pastResults = true
      if (type === "text") textBlock(block, at)
      else if (type === "image" && role === "user") imageBlock(block, at)
      else if (type === "tool_use" && role === "assistant") {
        onlyKeys(block, at, ["type", "id", "name", "input"])
        if (!isString(block["id"]) || !TOOL_ID.test(block["id"]))
          bad(`${at}.id`, "must match ^[a-zA-Z0-9_-]+$")
        else if (calls.has(block["id"])) bad(`${at}.id`, "duplicate")
        else calls.add(block["id"])
        if (!isString(block["name"]) || block["name"] === "") bad(`${at}.name`, "must be a non-empty string")
        if (!isObject(block["input"])) bad(`${at}.input`, "must be an object")
      } else if (type === "tool_result" && role === "user") {
        onlyKeys(block, at, ["type", "tool_use_id", "content", "is_error"])
        if (pastResults) bad(at, "tool results must come first")
        const id = block["tool_use_id"]
        if (!isString(id) || !TOOL_ID.test(id)) bad(`${at}.tool_use_id`, "must match ^[a-zA-Z0-9_-]+$")
        else if (!previousCalls.has(id))
          bad(`${at}.tool_use_id`, "answers no tool_use of the previous assistant turn")
        else answered.add(id)
        const result = block["content"]
        if (Array.isArray(result))
          result.forEach((b: unknown, k) =>
            isObject(b) && b["type"] === "text"
              ? textBlock(b, `${at}.content[${k}]`)
              : isObject(b) && b["type"] === "image"
                ? imageBlock(b, `${at}.content[${k}]`)
                : bad(`${at}.content[${k}]`, "must be a text or image block"),
          )
        else if (result !== undefined && !isString(result)) bad(`${at}.content`, "must be a string or blocks")
      } else bad(`${at}.type`, `${String(type)} is not allowed in a ${String(role)} turn`)
    })
    if (role === "user")
      for (const id of previousCalls) if (!answered.has(id)) bad(path, `tool_use ${id} has no tool_result`)
    previousCalls = calls
    previousRole = role
  })
  return problems
}
