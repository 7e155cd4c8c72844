/**
 * A 2xx JSON response body of the upstream → the client's format, for the
 * three translated pairs. Each returns undefined when the body is not a
 * response of the upstream's format (the gateway then treats it as a
 * malformed upstream answer).
 */
import { anthropicReport, openaiReport } from "../../meter/usage.js"
import { makeId, nowSeconds } from "../ids.js"
import { anthropicStopReason, chatFinishReason, responsesEnd } from "../stopReasons.js"
import { chatUsage, NO_TOKENS, tokensOf } from "../usage.js"
import { isObject, isString, parseArguments, type Json } from "../wire.js"
import { anthropicMessage, functionCallItem, messageItem, responseObject } from "./shapes.js"

/** The content blocks of an Anthropic message; undefined when `body` is not one. */
const anthropicContent = (body: Json): Array<Json> | undefined => {
  const content = body["content"]
  if (body["type"] !== "message" || !Array.isArray(content)) return undefined
  return content.filter(isObject)
}

/**
 * An Anthropic message → a Chat completion (text joined; `tool_use` blocks → `tool_calls`; thinking
 * dropped).
 */
export const messagesToChat = (body: Json, model: string): Json | undefined => {
  const content = anthropicContent(body)
  if (content === undefined) return undefined
  let text = ""
  const calls: Array<Json> = []
  for (const block of content) {
    if (block["type"] === "text" && isString(block["text"])) text += block["text"]
    else if (block["type"] === "tool_use" && isString(block["id"]) && isString(block["name"]))
      calls.push({
        id: block["id"],
        type: "function",
        function: { name: block["name"], arguments: JSON.stringify(block["input"] ?? {}) },
      })
  }
  const message: Json = {
    role: "assistant",
    content: text === "" && calls.length > 0 ? null : text,
    refusal: null,
  }
  if (calls.length > 0) message["tool_calls"] = calls
  const out: Json = {
    id: makeId("chatcmpl-"),
    object: "chat.completion",
    created: nowSeconds(),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: chatFinishReason(body["stop_reason"]) }],
  }
  const usage = tokensOf(anthropicReport(body["usage"]))
  if (usage !== undefined) out["usage"] = chatUsage(usage)
  return out
}

/** A Chat completion → an Anthropic message (the first choice; `tool_calls` → `tool_use` blocks). */
export const chatToMessages = (body: Json, model: string): Json | undefined => {
  const choices = body["choices"]
  const choice: unknown = Array.isArray(choices) ? choices[0] : undefined
  if (!isObject(choice) || !isObject(choice["message"])) return undefined
  const message = choice["message"]
  const content: Array<Json> = []
  for (const text of [message["content"], message["refusal"]])
    if (isString(text) && text !== "") content.push({ type: "text", text, citations: null })
  const calls = message["tool_calls"]
  if (Array.isArray(calls))
    for (const call of calls) {
      if (!isObject(call) || !isObject(call["function"]) || !isString(call["function"]["name"])) continue
      content.push({
        type: "tool_use",
        id: isString(call["id"]) && call["id"] !== "" ? call["id"] : makeId("call_"),
        name: call["function"]["name"],
        input: parseArguments(call["function"]["arguments"]) ?? {},
      })
    }
  const usage = tokensOf(openaiReport(body["usage"])) ?? NO_TOKENS
  let stopReason: string = anthropicStopReason(choice["finish_reason"])
  // Some OpenAI-compatible servers finish a tool call with "stop"; Anthropic clients look for tool_use.
  if (stopReason === "end_turn" && content.some((block) => block["type"] === "tool_use"))
    stopReason = "tool_use"
  return anthropicMessage(makeId("msg_"), model, content, stopReason, usage)
}

/**
 * An Anthropic message → a Responses response (one message item per text block, one function call item per
 * tool use).
 */
export const messagesToResponses = (body: Json, model: string): Json | undefined => {
  const content = anthropicContent(body)
  if (content === undefined) return undefined
  const end = responsesEnd(body["stop_reason"])
  const output: Array<Json> = []
  for (const block of content) {
    if (block["type"] === "text" && isString(block["text"]))
      output.push(messageItem(makeId("msg_"), block["text"], "completed"))
    else if (block["type"] === "tool_use" && isString(block["id"]) && isString(block["name"]))
      output.push(
        functionCallItem(
          makeId("fc_"),
          block["id"],
          block["name"],
          JSON.stringify(block["input"] ?? {}),
          "completed",
        ),
      )
  }
  const last = output[output.length - 1]
  if (end.status === "incomplete" && last !== undefined) last["status"] = "incomplete"
  const usage = tokensOf(anthropicReport(body["usage"])) ?? NO_TOKENS
  return responseObject({ id: makeId("resp_"), model, createdAt: nowSeconds(), end, usage }, output)
}
