/**
 * Why generation stopped, in each format: Anthropic `stop_reason`, Chat
 * `finish_reason`, Responses `status` + `incomplete_details.reason`.
 */

/** Chat `finish_reason` of an Anthropic `stop_reason` (unknown or absent: `stop`). */
export const chatFinishReason = (
  stopReason: unknown,
): "stop" | "length" | "tool_calls" | "content_filter" => {
  switch (stopReason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "refusal":
      return "content_filter"
    default:
      return "stop"
  }
}

/** Anthropic `stop_reason` of a Chat `finish_reason` (unknown or absent: `end_turn`). */
export const anthropicStopReason = (
  finishReason: unknown,
): "end_turn" | "max_tokens" | "tool_use" | "refusal" => {
  switch (finishReason) {
    case "length":
      return "max_tokens"
    case "tool_calls":
    case "function_call":
      return "tool_use"
    case "content_filter":
      return "refusal"
    default:
      return "end_turn"
  }
}

/** How a Responses response ended, from an Anthropic `stop_reason`. */
export interface ResponsesEnd {
  readonly status: "completed" | "incomplete"
  /** `incomplete_details`: null when completed. */
  readonly incompleteDetails: { readonly reason: "max_output_tokens" | "content_filter" } | null
}

const COMPLETED: ResponsesEnd = { status: "completed", incompleteDetails: null }

/**
 * `max_tokens` (or a full context window) is `incomplete` for `max_output_tokens`; a refusal for
 * `content_filter`.
 */
export const responsesEnd = (stopReason: unknown): ResponsesEnd => {
  switch (stopReason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return { status: "incomplete", incompleteDetails: { reason: "max_output_tokens" } }
    case "refusal":
      return { status: "incomplete", incompleteDetails: { reason: "content_filter" } }
    default:
      return COMPLETED
  }
}
