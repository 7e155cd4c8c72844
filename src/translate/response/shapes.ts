/**
 * The response objects of each format that a translated response is made
 * of, shared by the JSON and the stream translators so both say the same:
 * an Anthropic message, a Chat completion, a Responses response and its
 * output items.
 */
import type { TokenCounts } from "../../domain/usage.js"
import type { Json } from "../wire.js"
import { anthropicUsage, responsesUsage } from "../usage.js"
import type { ResponsesEnd } from "../stopReasons.js"

/** An Anthropic message (`message_start` carries one with no content and no stop reason yet). */
export const anthropicMessage = (
  id: string,
  model: string,
  content: ReadonlyArray<Json>,
  stopReason: string | null,
  usage: TokenCounts,
): Json => ({
  id,
  type: "message",
  role: "assistant",
  model,
  content,
  stop_reason: stopReason,
  stop_sequence: null,
  stop_details: null,
  container: null,
  usage: anthropicUsage(usage),
})

/** A Responses `output_text` content part. */
export const outputText = (text: string): Json => ({
  type: "output_text",
  text,
  annotations: [],
  logprobs: [],
})

/** A Responses assistant message item holding one text. */
export const messageItem = (id: string, text: string | undefined, status: string): Json => ({
  id,
  type: "message",
  status,
  role: "assistant",
  content: text === undefined ? [] : [outputText(text)],
})

/** A Responses function call item. */
export const functionCallItem = (
  id: string,
  callId: string,
  name: string,
  args: string,
  status: string,
): Json => ({
  id,
  type: "function_call",
  status,
  call_id: callId,
  name,
  arguments: args,
})

/**
 * What a Responses response says besides its output: who, when, how it ended, and usage (null while
 * running).
 */
export interface ResponseHead {
  readonly id: string
  readonly model: string
  readonly createdAt: number
  readonly end: ResponsesEnd | "in_progress"
  readonly usage: TokenCounts | null
}

/**
 * A Responses `response` object. The request's own settings (instructions,
 * tools, temperature, …) are not known to the response side, so they read
 * as the API's defaults.
 */
export const responseObject = (head: ResponseHead, output: ReadonlyArray<Json>): Json => ({
  id: head.id,
  object: "response",
  created_at: head.createdAt,
  status: head.end === "in_progress" ? "in_progress" : head.end.status,
  background: false,
  error: null,
  incomplete_details: head.end === "in_progress" ? null : head.end.incompleteDetails,
  instructions: null,
  max_output_tokens: null,
  model: head.model,
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  store: false,
  temperature: null,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: null,
  truncation: "disabled",
  usage: head.usage === null ? null : responsesUsage(head.usage),
  metadata: {},
})
