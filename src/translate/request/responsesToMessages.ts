/**
 * A Responses request → an Anthropic Messages request.
 *
 * `instructions` and system/developer input items become `system`; user and
 * assistant messages, `function_call` and `function_call_output` items become
 * alternating turns with `tool_use` / `tool_result` blocks. Reasoning items
 * (the model's own, possibly encrypted) are dropped: Anthropic cannot read
 * them. Everything that needs OpenAI's stored state or built-in tools is
 * refused naming the field.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { anthropicToolId } from "../ids.js"
import { absent, isBlank, isObject, isRefusal, isString, refuse, type Json } from "../wire.js"
import { anthropicRequest, anthropicTool, maxTokens, sampling, type ChoiceMode } from "./anthropicParams.js"
import { AnthropicTurns, textBlock, toolResult } from "./anthropicTurns.js"
import { anthropicImage } from "./images.js"

/** Top-level Responses fields that have no Anthropic equivalent: [field, refused when, why]. */
const REFUSED: ReadonlyArray<readonly [string, (value: unknown) => boolean, string]> = [
  [
    "previous_response_id",
    (v) => !absent(v),
    "this target cannot continue a stored response; send the whole conversation in input",
  ],
  ["conversation", (v) => !absent(v), "this target cannot continue a stored conversation; send it in input"],
  ["background", (v) => v === true, "background responses cannot be translated"],
  ["prompt", (v) => !absent(v), "stored prompt templates cannot be translated"],
  ["context_management", (v) => Array.isArray(v) && v.length > 0, "context management cannot be translated"],
  ["top_logprobs", (v) => !absent(v) && v !== 0, "this target returns no log probabilities"],
  ["moderation", (v) => !absent(v), "OpenAI moderation cannot be translated"],
  [
    "text",
    (v) => isObject(v) && isObject(v["format"]) && v["format"]["type"] !== "text",
    "structured output cannot be translated to this target",
  ],
]

/**
 * Blocks of a message's or a function output's content: a string, or parts
 * (`input_text`, `output_text`, `refusal` as text; `input_image` when `images`).
 */
const blocks = (content: unknown, field: string, images: boolean): Array<Json> | InvalidRequest => {
  if (isString(content)) return isBlank(content) ? [] : [textBlock(content)]
  if (!Array.isArray(content)) return refuse(field, "must be a string or an array of content parts")
  const out: Array<Json> = []
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j]
    const at = `${field}[${j}]`
    if (!isObject(part)) return refuse(at, "must be a content part")
    const type = part["type"]
    const text = type === "refusal" ? part["refusal"] : part["text"]
    if ((type === "input_text" || type === "output_text" || type === "refusal") && isString(text)) {
      if (!isBlank(text)) out.push(textBlock(text))
    } else if (type === "input_image" && images) {
      if (!absent(part["file_id"])) return refuse(`${at}.file_id`, "stored files cannot be translated")
      const image = anthropicImage(part["image_url"], `${at}.image_url`)
      if (isRefusal(image)) return image
      out.push(image)
    } else
      return refuse(`${at}.type`, `content parts of type ${JSON.stringify(type)} cannot be translated here`)
  }
  return out
}

/**
 * Adds one input item to the conversation (or its text to `system`); a refusal when it has no Anthropic
 * form.
 */
const addItem = (
  item: Json,
  field: string,
  turns: AnthropicTurns,
  system: Array<string>,
): InvalidRequest | undefined => {
  const type = item["type"] ?? (item["role"] !== undefined ? "message" : undefined)
  switch (type) {
    case "message": {
      const role = item["role"]
      const isSystem = role === "system" || role === "developer"
      if (!isSystem && role !== "user" && role !== "assistant")
        return refuse(`${field}.role`, `unknown role ${JSON.stringify(role)}`)
      const content = blocks(item["content"], `${field}.content`, role === "user")
      if (isRefusal(content)) return content
      if (isSystem) system.push(...content.map((block) => block["text"] as string))
      else turns.add(role, content)
      return undefined
    }
    case "function_call": {
      const block = turns.toolUse(
        { id: item["call_id"], name: item["name"], arguments: item["arguments"] },
        { id: `${field}.call_id`, name: `${field}.name`, arguments: `${field}.arguments` },
      )
      if (isRefusal(block)) return block
      turns.add("assistant", [block])
      return undefined
    }
    case "function_call_output": {
      const id = item["call_id"]
      if (!isString(id) || id === "") return refuse(`${field}.call_id`, "must be a non-empty string")
      const output = item["output"]
      const content = isString(output)
        ? isBlank(output)
          ? []
          : output
        : blocks(output, `${field}.output`, true)
      if (isRefusal(content)) return content
      turns.addToolResult(toolResult(anthropicToolId(id), content), `${field}.call_id`)
      return undefined
    }
    case "reasoning":
      return undefined
    case "item_reference":
      return refuse(field, "item references need OpenAI's stored items and cannot be translated")
    default:
      return refuse(`${field}.type`, `input items of type ${JSON.stringify(type)} cannot be translated`)
  }
}

/** The tool choice of Responses `tool_choice`. */
const choiceMode = (choice: unknown): ChoiceMode | undefined | InvalidRequest => {
  if (absent(choice)) return undefined
  if (choice === "auto" || choice === "none" || choice === "required") return choice
  if (isObject(choice) && choice["type"] === "function" && isString(choice["name"]) && choice["name"] !== "")
    return { name: choice["name"] }
  return refuse("tool_choice", "only auto, none, required or a named function can be translated")
}

/** Anthropic tools of Responses `tools`: function tools only (the others run on OpenAI's side). */
const tools = (value: unknown): Array<Json> | InvalidRequest => {
  if (absent(value)) return []
  if (!Array.isArray(value)) return refuse("tools", "must be an array")
  const out: Array<Json> = []
  for (let i = 0; i < value.length; i++) {
    const tool: unknown = value[i]
    if (!isObject(tool)) return refuse(`tools[${i}]`, "must be an object")
    if (tool["type"] !== "function")
      return refuse(
        `tools[${i}].type`,
        `the built-in tool ${JSON.stringify(tool["type"])} cannot be translated`,
      )
    const translated = anthropicTool(
      {
        name: tool["name"],
        description: tool["description"],
        parameters: tool["parameters"],
        strict: tool["strict"],
      },
      `tools[${i}]`,
    )
    if (isRefusal(translated)) return translated
    out.push(translated)
  }
  return out
}

/** The Anthropic Messages request of a Responses request, for upstream model `model`. */
export const responsesToMessages = (body: Readonly<Json>, model: string): Json | InvalidRequest => {
  for (const [field, refused, why] of REFUSED) if (refused(body[field])) return refuse(field, why)
  const system: Array<string> = []
  const instructions = body["instructions"]
  if (isString(instructions) && !isBlank(instructions)) system.push(instructions)
  else if (!absent(instructions) && !isString(instructions)) return refuse("instructions", "must be a string")
  const turns = new AnthropicTurns("input")
  const input = body["input"]
  if (isString(input)) turns.add("user", isBlank(input) ? [] : [textBlock(input)])
  else if (Array.isArray(input)) {
    for (let i = 0; i < input.length; i++) {
      const item: unknown = input[i]
      if (!isObject(item)) return refuse(`input[${i}]`, "must be an object")
      const refused = addItem(item, `input[${i}]`, turns, system)
      if (refused !== undefined) return refused
    }
  } else return refuse("input", "must be a string or an array of input items")
  const conversation = turns.finish()
  if (isRefusal(conversation)) return conversation

  const limit = maxTokens(body["max_output_tokens"], "max_output_tokens")
  if (isRefusal(limit)) return limit
  const params = sampling(body)
  if (isRefusal(params)) return params
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
    tools: toolList,
    choice: mode,
  })
}
