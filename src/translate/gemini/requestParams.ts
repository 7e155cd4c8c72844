/**
 * The Gemini request fields besides `contents`: `generationConfig` (limit,
 * sampling, stop sequences, structured output, thinking budget), `tools` and
 * `toolConfig`, from the Chat Completions request's parameters.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { absent, isObject, isRefusal, isString, refuse, type Json } from "../wire.js"

/**
 * Gemini `thinkingBudget` (tokens) of each Chat `reasoning_effort`: none and
 * minimal turn thinking off (0; a model that cannot turn it off answers with
 * its own error), low 1024, medium 8192, high 24576 (the largest budget of
 * Gemini 2.5 Flash), xhigh 32768 (the largest of Gemini 2.5 Pro).
 */
export const THINKING_BUDGETS: Readonly<Record<string, number>> = {
  none: 0,
  minimal: 0,
  low: 1024,
  medium: 8192,
  high: 24576,
  xhigh: 32768,
}

/** The Chat number fields Gemini takes as they are: [Chat field, Gemini `generationConfig` field]. */
const NUMBERS: ReadonlyArray<readonly [string, string]> = [
  ["temperature", "temperature"],
  ["top_p", "topP"],
  ["presence_penalty", "presencePenalty"],
  ["frequency_penalty", "frequencyPenalty"],
]

const INT32 = 2 ** 31

/** `maxOutputTokens` of `max_completion_tokens` (or else `max_tokens`): a positive integer. */
const maxOutputTokens = (body: Readonly<Json>): number | undefined | InvalidRequest => {
  const field = absent(body["max_completion_tokens"]) ? "max_tokens" : "max_completion_tokens"
  const value = body[field]
  if (absent(value)) return undefined
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1)
    return refuse(field, "must be a positive integer")
  return value
}

/** `stopSequences` of Chat `stop` (a string or strings); undefined when there are none. */
const stopSequences = (stop: unknown): Array<string> | undefined | InvalidRequest => {
  if (absent(stop)) return undefined
  if (isString(stop)) return stop === "" ? undefined : [stop]
  if (Array.isArray(stop) && stop.every(isString)) return stop.length === 0 ? undefined : stop
  return refuse("stop", "must be a string or an array of strings")
}

/** `responseMimeType` and `responseJsonSchema` of Chat `response_format`. */
const responseFormat = (format: unknown): Json | InvalidRequest => {
  if (absent(format)) return {}
  if (!isObject(format)) return refuse("response_format", "must be an object")
  switch (format["type"]) {
    case "text":
      return {}
    case "json_object":
      return { responseMimeType: "application/json" }
    case "json_schema": {
      const spec = format["json_schema"]
      const schema = isObject(spec) ? spec["schema"] : undefined
      if (!isObject(schema))
        return refuse("response_format.json_schema.schema", "must be a JSON schema object")
      return { responseMimeType: "application/json", responseJsonSchema: schema }
    }
    default:
      return refuse("response_format.type", `${JSON.stringify(format["type"])} cannot be translated`)
  }
}

/** `thinkingConfig` of Chat `reasoning_effort` (see THINKING_BUDGETS). */
const thinkingConfig = (effort: unknown): Json | undefined | InvalidRequest => {
  if (absent(effort)) return undefined
  const budget = isString(effort) ? THINKING_BUDGETS[effort] : undefined
  if (budget === undefined)
    return refuse("reasoning_effort", `must be one of ${Object.keys(THINKING_BUDGETS).join(", ")}`)
  return { thinkingBudget: budget }
}

/** The plain numbers and the seed. */
const numbers = (body: Readonly<Json>): Json | InvalidRequest => {
  const out: Json = {}
  for (const [field, name] of NUMBERS) {
    const value = body[field]
    if (absent(value)) continue
    if (typeof value !== "number" || !Number.isFinite(value)) return refuse(field, "must be a number")
    out[name] = value
  }
  const seed = body["seed"]
  if (!absent(seed)) {
    if (typeof seed !== "number" || !Number.isInteger(seed) || seed < -INT32 || seed >= INT32)
      return refuse("seed", "this target takes a 32-bit integer")
    out["seed"] = seed
  }
  return out
}

/** Gemini `generationConfig` of the Chat parameters; undefined when it would be empty. */
export const generationConfig = (body: Readonly<Json>): Json | undefined | InvalidRequest => {
  const limit = maxOutputTokens(body)
  if (isRefusal(limit)) return limit
  const plain = numbers(body)
  if (isRefusal(plain)) return plain
  const stop = stopSequences(body["stop"])
  if (isRefusal(stop)) return stop
  const format = responseFormat(body["response_format"])
  if (isRefusal(format)) return format
  const thinking = thinkingConfig(body["reasoning_effort"])
  if (isRefusal(thinking)) return thinking
  const config: Json = { ...plain, ...format }
  if (limit !== undefined) config["maxOutputTokens"] = limit
  if (stop !== undefined) config["stopSequences"] = stop
  if (thinking !== undefined) config["thinkingConfig"] = thinking
  return Object.keys(config).length === 0 ? undefined : config
}

/** The Gemini function declaration of one Chat tool (`field` names it). */
const declaration = (tool: unknown, field: string): Json | InvalidRequest => {
  if (!isObject(tool) || tool["type"] !== "function" || !isObject(tool["function"]))
    return refuse(`${field}.type`, "only function tools can be translated")
  const fn = tool["function"]
  if (!isString(fn["name"]) || fn["name"] === "")
    return refuse(`${field}.function.name`, "must be a non-empty string")
  const out: Json = { name: fn["name"] }
  if (isString(fn["description"]) && fn["description"] !== "") out["description"] = fn["description"]
  const parameters = fn["parameters"]
  if (!absent(parameters)) {
    if (!isObject(parameters)) return refuse(`${field}.function.parameters`, "must be a JSON schema object")
    out["parametersJsonSchema"] = parameters
  }
  return out
}

/** Gemini `tools` (one entry holding every function declaration) of Chat `tools`; undefined when none. */
export const tools = (value: unknown): Array<Json> | undefined | InvalidRequest => {
  if (absent(value)) return undefined
  if (!Array.isArray(value)) return refuse("tools", "must be an array")
  const declarations: Array<Json> = []
  for (let i = 0; i < value.length; i++) {
    const translated = declaration(value[i], `tools[${i}]`)
    if (isRefusal(translated)) return translated
    declarations.push(translated)
  }
  return declarations.length === 0 ? undefined : [{ functionDeclarations: declarations }]
}

/** The Gemini mode of each Chat `tool_choice` string. */
const MODES: Readonly<Record<string, string>> = { none: "NONE", auto: "AUTO", required: "ANY" }

/** Gemini `toolConfig` of Chat `tool_choice`; undefined when absent. */
export const toolConfig = (choice: unknown): Json | undefined | InvalidRequest => {
  if (absent(choice)) return undefined
  const mode = isString(choice) ? MODES[choice] : undefined
  if (mode !== undefined) return { functionCallingConfig: { mode } }
  if (isObject(choice) && choice["type"] === "function" && isObject(choice["function"])) {
    const name = choice["function"]["name"]
    if (isString(name) && name !== "")
      return { functionCallingConfig: { mode: "ANY", allowedFunctionNames: [name] } }
  }
  return refuse("tool_choice", "only auto, none, required or a named function can be translated")
}
