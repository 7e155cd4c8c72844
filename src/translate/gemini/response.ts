/**
 * A Gemini `generateContent` response → a Chat completion, and what the
 * stream translator shares with it: the usage counts, the finish reason, the
 * parts of the first candidate and the tool call of a `functionCall` part.
 */
import type { TokenCounts } from "../../domain/usage.js"
import { makeId, nowSeconds } from "../ids.js"
import { chatUsage } from "../usage.js"
import { idWithSignature } from "./signatures.js"
import { isObject, isString, type Json } from "../wire.js"

/** A count of `usageMetadata`: a non-negative integer, else 0. */
const count = (usage: Json, field: string): number => {
  const value = usage[field]
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0
}

/**
 * Tollgate's counts of a Gemini `usageMetadata` (undefined when it is not an
 * object): input is the prompt (plus the prompt of built-in tools) less the
 * cached part, output the candidates plus the thoughts (both are billed as
 * output), cache reads the cached part; Gemini reports no cache writes.
 */
export const geminiUsageCounts = (usageMetadata: unknown): TokenCounts | undefined => {
  if (!isObject(usageMetadata)) return undefined
  const cached = count(usageMetadata, "cachedContentTokenCount")
  const prompt = count(usageMetadata, "promptTokenCount") + count(usageMetadata, "toolUsePromptTokenCount")
  return {
    inputTokens: Math.max(0, prompt - cached),
    outputTokens: count(usageMetadata, "candidatesTokenCount") + count(usageMetadata, "thoughtsTokenCount"),
    cacheReadTokens: cached,
    cacheWriteTokens: 0,
  }
}

/** Chat `usage` of a Gemini `usageMetadata`, with the thoughts as `reasoning_tokens`; undefined when none. */
export const geminiChatUsage = (usageMetadata: unknown): Json | undefined => {
  const counts = geminiUsageCounts(usageMetadata)
  if (counts === undefined || !isObject(usageMetadata)) return undefined
  return {
    ...chatUsage(counts),
    completion_tokens_details: { reasoning_tokens: count(usageMetadata, "thoughtsTokenCount") },
  }
}

/** The Gemini finish reasons that mean the answer was filtered. */
const FILTERED = new Set(["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"])

/** The Chat finish reasons. */
export type ChatFinish = "stop" | "length" | "tool_calls" | "content_filter"

/**
 * Chat `finish_reason` of a Gemini `finishReason`: MAX_TOKENS → length, the
 * filters → content_filter, STOP (or none) → tool_calls when the answer
 * called tools, else stop; anything else → stop.
 */
export const chatFinish = (finishReason: unknown, hasCalls: boolean): ChatFinish => {
  if (finishReason === "MAX_TOKENS") return "length"
  if (isString(finishReason) && FILTERED.has(finishReason)) return "content_filter"
  if (hasCalls && (finishReason === "STOP" || finishReason === undefined)) return "tool_calls"
  return "stop"
}

/** The first candidate of a Gemini response (undefined when there is none). */
export const firstCandidate = (body: Readonly<Json>): Json | undefined => {
  const candidates = body["candidates"]
  const first: unknown = Array.isArray(candidates) ? candidates[0] : undefined
  return isObject(first) ? first : undefined
}

/** The parts of a candidate's content. */
export const candidateParts = (candidate: Readonly<Json> | undefined): Array<Json> => {
  const content = candidate?.["content"]
  const parts = isObject(content) ? content["parts"] : undefined
  return Array.isArray(parts) ? parts.filter(isObject) : []
}

/** The answer text of a part: its `text` unless it is a thought (undefined when it has none). */
export const partText = (part: Readonly<Json>): string | undefined =>
  part["thought"] !== true && isString(part["text"]) ? part["text"] : undefined

/**
 * The Chat tool call of a `functionCall` part (undefined for other parts):
 * Gemini's call id when it gives one, else a new `call_…` id, carrying the
 * part's `thoughtSignature` when it has one (signatures.ts).
 */
export const toolCall = (part: Readonly<Json>): Json | undefined => {
  const call = part["functionCall"]
  if (part["thought"] === true || !isObject(call) || !isString(call["name"])) return undefined
  const own = isString(call["id"]) && call["id"] !== "" ? call["id"] : makeId("call_")
  const signature = part["thoughtSignature"]
  const id = isString(signature) && signature !== "" ? idWithSignature(own, signature) : own
  return {
    id,
    type: "function",
    function: { name: call["name"], arguments: JSON.stringify(call["args"] ?? {}) },
  }
}

/** True when the prompt was blocked (`promptFeedback.blockReason`). */
export const promptBlocked = (body: Readonly<Json>): boolean => {
  const feedback = body["promptFeedback"]
  return isObject(feedback) && isString(feedback["blockReason"]) && feedback["blockReason"] !== ""
}

/** The Chat completion id of a Gemini response: `chatcmpl-` + its `responseId`, else a new one. */
export const completionId = (body: Readonly<Json>): string => {
  const id = body["responseId"]
  return isString(id) && id !== "" ? `chatcmpl-${id}` : makeId("chatcmpl-")
}

/**
 * A Gemini response → a Chat completion of `model` (one choice; text parts joined, thoughts dropped,
 * `functionCall` parts as `tool_calls`); undefined when `body` is not a Gemini response.
 */
export const geminiToChat = (body: Json, model: string): Json | undefined => {
  if (!Array.isArray(body["candidates"]) && !isObject(body["promptFeedback"])) return undefined
  const candidate = firstCandidate(body)
  let text = ""
  const calls: Array<Json> = []
  for (const part of candidateParts(candidate)) {
    const piece = partText(part)
    if (piece !== undefined) text += piece
    const call = toolCall(part)
    if (call !== undefined) calls.push(call)
  }
  const message: Json = { role: "assistant", content: text === "" ? null : text, refusal: null }
  if (calls.length > 0) message["tool_calls"] = calls
  const finish =
    candidate === undefined && promptBlocked(body)
      ? "content_filter"
      : chatFinish(candidate?.["finishReason"], calls.length > 0)
  const out: Json = {
    id: completionId(body),
    object: "chat.completion",
    created: nowSeconds(),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
  }
  const usage = geminiChatUsage(body["usageMetadata"])
  if (usage !== undefined) out["usage"] = usage
  return out
}
