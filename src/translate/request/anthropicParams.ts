/**
 * The request fields an Anthropic upstream gets the same way from a Chat
 * Completions and from a Responses client: output limit, sampling, stop
 * sequences, tools and tool choice, the end user.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { absent, isObject, isString, refuse, type Json } from "../wire.js"
import { textBlock } from "./anthropicTurns.js"

/**
 * `max_tokens` when the client gave no output limit. Anthropic requires one;
 * 4096 is within every Claude model's output limit (the oldest allow 4096).
 */
export const DEFAULT_MAX_TOKENS = 4096

/**
 * Anthropic `max_tokens` of the client's limit (`field` names it): a non-negative integer, or the default.
 */
export const maxTokens = (value: unknown, field: string): number | InvalidRequest => {
  if (absent(value)) return DEFAULT_MAX_TOKENS
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0)
    return refuse(field, "must be a non-negative integer")
  return value
}

/** `temperature` and `top_p`, checked against Anthropic's ranges (OpenAI allows a temperature up to 2). */
export const sampling = (body: Readonly<Json>): Json | InvalidRequest => {
  const out: Json = {}
  const temperature = body["temperature"]
  if (!absent(temperature)) {
    if (typeof temperature !== "number" || temperature < 0 || temperature > 1)
      return refuse("temperature", "this target accepts a temperature from 0 to 1")
    out["temperature"] = temperature
  }
  const topP = body["top_p"]
  if (!absent(topP)) {
    if (typeof topP !== "number" || topP < 0 || topP > 1)
      return refuse("top_p", "must be a number from 0 to 1")
    out["top_p"] = topP
  }
  return out
}

/** Anthropic `stop_sequences` of Chat `stop` (a string or strings); undefined when there are none. */
export const stopSequences = (stop: unknown): Array<string> | undefined | InvalidRequest => {
  if (absent(stop)) return undefined
  if (isString(stop)) return stop === "" ? undefined : [stop]
  if (Array.isArray(stop) && stop.every(isString)) return stop.length === 0 ? undefined : stop
  return refuse("stop", "must be a string or an array of strings")
}

/** A function tool as the OpenAI formats describe it (Chat nests it under `function`, Responses does not). */
export interface FunctionSpec {
  readonly name: unknown
  readonly description: unknown
  readonly parameters: unknown
  readonly strict: unknown
}

/** The Anthropic tool of a function (`field` names the function in the client's request). */
export const anthropicTool = (fn: FunctionSpec, field: string): Json | InvalidRequest => {
  if (!isString(fn.name) || fn.name === "") return refuse(`${field}.name`, "must be a non-empty string")
  let schema: Json = { type: "object", properties: {} }
  if (!absent(fn.parameters)) {
    if (!isObject(fn.parameters)) return refuse(`${field}.parameters`, "must be a JSON schema object")
    const type = fn.parameters["type"]
    if (type !== undefined && type !== "object")
      return refuse(`${field}.parameters.type`, 'this target takes tool parameters of type "object" only')
    schema = type === undefined ? { type: "object", ...fn.parameters } : fn.parameters
  }
  const tool: Json = { name: fn.name, input_schema: schema }
  if (isString(fn.description) && fn.description !== "") tool["description"] = fn.description
  if (fn.strict === true) tool["strict"] = true
  return tool
}

/** What the client asked of tool use, the same in Chat and Responses. */
export type ChoiceMode = "auto" | "none" | "required" | { readonly name: string }

/**
 * Anthropic `tool_choice`: auto → auto, required → any, a named function →
 * tool, none → none; `parallel_tool_calls: false` → `disable_parallel_tool_use`.
 * Undefined when there are no tools (Anthropic takes no choice without them)
 * or nothing to say.
 */
export const anthropicToolChoice = (
  mode: ChoiceMode | undefined,
  parallel: unknown,
  hasTools: boolean,
): Json | undefined => {
  if (!hasTools) return undefined
  if (mode === "none") return { type: "none" }
  const serial = parallel === false ? { disable_parallel_tool_use: true } : {}
  if (mode === undefined) return parallel === false ? { type: "auto", ...serial } : undefined
  if (mode === "auto") return { type: "auto", ...serial }
  if (mode === "required") return { type: "any", ...serial }
  return { type: "tool", name: mode.name, ...serial }
}

/** Anthropic `metadata` of the client's end-user id (Chat/Responses `user`, else `safety_identifier`). */
export const userMetadata = (body: Readonly<Json>): Json | undefined => {
  const user = isString(body["user"]) && body["user"] !== "" ? body["user"] : body["safety_identifier"]
  return isString(user) && user !== "" ? { user_id: user } : undefined
}

/** The checked parts of an Anthropic request that Chat and Responses requests both give. */
export interface AnthropicRequestParts {
  readonly model: string
  readonly maxTokens: number
  readonly messages: ReadonlyArray<Json>
  /** The system texts, in order. */
  readonly system: ReadonlyArray<string>
  /** What `sampling` gave. */
  readonly sampling: Json
  readonly stopSequences?: ReadonlyArray<string> | undefined
  readonly tools: ReadonlyArray<Json>
  readonly choice: ChoiceMode | undefined
}

/**
 * The Anthropic Messages request of checked `parts`; `body` is the client's request (for
 * `parallel_tool_calls`, the end user and `stream`).
 */
export const anthropicRequest = (body: Readonly<Json>, parts: AnthropicRequestParts): Json => {
  const out: Json = { model: parts.model, max_tokens: parts.maxTokens, messages: parts.messages }
  const system = parts.system
  if (system.length === 1) out["system"] = system[0]
  else if (system.length > 1) out["system"] = system.map(textBlock)
  Object.assign(out, parts.sampling)
  if (parts.stopSequences !== undefined) out["stop_sequences"] = parts.stopSequences
  if (parts.tools.length > 0) out["tools"] = parts.tools
  const choice = anthropicToolChoice(parts.choice, body["parallel_tool_calls"], parts.tools.length > 0)
  if (choice !== undefined) out["tool_choice"] = choice
  const metadata = userMetadata(body)
  if (metadata !== undefined) out["metadata"] = metadata
  if (body["stream"] === true) out["stream"] = true
  return out
}
