/**
 * Tool calls of the fake provider, so that a client can run a tool loop through it.
 *
 * A request gets ONE call of a tool when it declares at least one named tool (`tools` non-empty), its last turn
 * is not a tool result (Anthropic: no `tool_result` block in the last message; Chat: the last message's role is
 * not `tool`; Responses: the last input item is not a `function_call_output`) and `tool_choice` is not `none`.
 * The tool is the one `tool_choice` names, else the first declared. Its arguments are `{"query":"tok0 tok1 …"}`,
 * one argument token per planned output token, at most {@link maxToolTokens}. A call is always whole: it ends
 * with `tool_use` / `tool_calls` / `completed` even when the output limit was reached. Otherwise the answer is
 * text, exactly as without tools.
 *
 * Gemini: the tools are the `functionDeclarations` of `tools`; the last turn is a tool result when the last
 * content's parts hold a `functionResponse`; `toolConfig.functionCallingConfig.mode` `NONE` means no call, and
 * `ANY` with `allowedFunctionNames` forces the first allowed declared function.
 */
import { createHash } from "node:crypto"
import { outputText } from "./tokens.js"

/** The API whose request shape is read. */
export type ToolApi = "anthropic" | "chat" | "responses" | "gemini"

/** The one call an answer makes. */
export interface ToolCall {
  /** The called tool's name, as declared. */
  readonly name: string
  /** `toolu_…` (Anthropic) or `call_…` (Chat, and the Responses `call_id`). */
  readonly id: string
}

/** Most argument tokens in a tool call. */
export const maxToolTokens = 16

/** The arguments' JSON before and after the tokens: `{"query":"` and `"}`. */
export const argumentsOpen = `{"query":"`
export const argumentsClose = `"}`

/** The whole arguments JSON of a call with `tokens` argument tokens. */
export const argumentsJson = (tokens: number): string => argumentsOpen + outputText(tokens) + argumentsClose

/** `text` as it appears inside a JSON string (quotes and backslashes escaped), without the outer quotes. */
export const inString = (text: string): string => JSON.stringify(text).slice(1, -1)

/** Argument tokens of a call whose output plan has `planned` tokens. */
export const toolTokens = (planned: number): number => Math.min(planned, maxToolTokens)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/**
 * `prefix` + 24 base62 characters hashed from the prefix and the request body: the same request gets the same
 * id, and each turn of a conversation a new one.
 */
export const toolCallId = (prefix: string, rawBody: string): string =>
  prefix +
  Array.from(createHash("sha256").update(prefix).update(rawBody).digest().subarray(0, 24), (byte) =>
    base62.charAt(byte % 62),
  ).join("")

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A tool's name: Chat `function.name`, Anthropic and Responses `name`. */
const toolName = (tool: unknown): string | undefined => {
  if (!isRecord(tool)) return undefined
  const fn = tool["function"]
  if (isRecord(fn) && typeof fn["name"] === "string") return fn["name"]
  return typeof tool["name"] === "string" ? tool["name"] : undefined
}

/** The tool `tool_choice` forces (Anthropic `{type:"tool",name}`, OpenAI `{type:"function",…}`), if any. */
const forcedName = (choice: unknown): string | undefined =>
  isRecord(choice) && choice["type"] !== "none" ? toolName(choice) : undefined

const isNone = (choice: unknown): boolean =>
  choice === "none" || (isRecord(choice) && choice["type"] === "none")

/** Gemini: the function the fake calls (see the module doc), or undefined. */
const geminiToolToCall = (body: Record<string, unknown>): string | undefined => {
  const tools = body["tools"]
  if (!Array.isArray(tools)) return undefined
  const names = tools.flatMap((tool) => {
    const declarations = isRecord(tool) ? tool["functionDeclarations"] : undefined
    return Array.isArray(declarations)
      ? declarations.flatMap((fn) => (isRecord(fn) && typeof fn["name"] === "string" ? [fn["name"]] : []))
      : []
  })
  if (names.length === 0) return undefined
  const toolConfig = body["toolConfig"]
  const config = isRecord(toolConfig) ? toolConfig["functionCallingConfig"] : undefined
  const mode = isRecord(config) && typeof config["mode"] === "string" ? config["mode"].toUpperCase() : "AUTO"
  if (mode === "NONE") return undefined
  const contents = body["contents"]
  const last: unknown = Array.isArray(contents) ? contents.at(-1) : undefined
  const parts = isRecord(last) ? last["parts"] : undefined
  if (Array.isArray(parts) && parts.some((part) => isRecord(part) && isRecord(part["functionResponse"])))
    return undefined
  const allowed = isRecord(config) ? config["allowedFunctionNames"] : undefined
  const forced =
    mode === "ANY" && Array.isArray(allowed)
      ? allowed.find((name): name is string => typeof name === "string" && names.includes(name))
      : undefined
  return forced ?? names[0]
}

const endsWithToolResult = (api: ToolApi, body: Record<string, unknown>): boolean => {
  const turns = api === "responses" ? body["input"] : body["messages"]
  const last: unknown = Array.isArray(turns) ? turns.at(-1) : undefined
  if (!isRecord(last)) return false
  switch (api) {
    case "anthropic": {
      const content = last["content"]
      return (
        Array.isArray(content) && content.some((block) => isRecord(block) && block["type"] === "tool_result")
      )
    }
    case "chat":
      return last["role"] === "tool" || last["role"] === "function"
    case "responses":
      return last["type"] === "function_call_output"
    case "gemini":
      return false
  }
}

/** The name of the tool the fake calls in answer to `body`, or undefined when it answers with text. */
export const toolToCall = (api: ToolApi, body: Record<string, unknown>): string | undefined => {
  if (api === "gemini") return geminiToolToCall(body)
  const tools = body["tools"]
  if (!Array.isArray(tools) || tools.length === 0) return undefined
  const choice = body["tool_choice"]
  if (isNone(choice) || endsWithToolResult(api, body)) return undefined
  const names = tools.flatMap((tool) => {
    const name = toolName(tool)
    return name === undefined ? [] : [name]
  })
  const forced = forcedName(choice)
  return forced !== undefined && names.includes(forced) ? forced : names[0]
}
