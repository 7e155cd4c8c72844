/**
 * Anthropic Messages wire format (also served for Vertex rawPredict / streamRawPredict).
 * https://docs.anthropic.com/en/api/messages and https://docs.anthropic.com/en/docs/build-with-claude/streaming
 */
import type { BodyPlan } from "./emit.js"
import { tokenText } from "./tokens.js"
import { argumentsClose, argumentsOpen, inString } from "./tools.js"
import type { ToolCall } from "./tools.js"

/** What one generated message says. */
export interface MessageFacts {
  /** `msg_…` */
  readonly id: string
  readonly model: string
  readonly inputTokens: number
  readonly outputTokens: number
  /** True: `stop_reason` is `max_tokens`, else `end_turn`. */
  readonly hitLimit: boolean
  /** False for `no-usage`: no usage fields at all. */
  readonly usage: boolean
  /** `cache_read_input_tokens` and `cache_creation_input_tokens` (`prompt-cache`; else 0). */
  readonly cacheRead: number
  readonly cacheWrite: number
}

const json = JSON.stringify

const sse = (event: string, data: string): string => `event: ${event}\ndata: ${data}\n\n`

const stopReason = (facts: MessageFacts): string => (facts.hitLimit ? "max_tokens" : "end_turn")

const usage = (
  input: number,
  output: number,
  facts: Pick<MessageFacts, "cacheRead" | "cacheWrite">,
): string =>
  `{"input_tokens":${input},"output_tokens":${output},"cache_creation_input_tokens":${facts.cacheWrite},"cache_read_input_tokens":${facts.cacheRead}}`

/** The end of a non-stream message after its content. */
const messageEnd = (facts: MessageFacts, stop: string): string =>
  `],"stop_reason":"${stop}","stop_sequence":null` +
  (facts.usage ? `,"usage":${usage(facts.inputTokens, facts.outputTokens, facts)}` : "") +
  "}"

const messageHead = (facts: MessageFacts): string =>
  `{"id":${json(facts.id)},"type":"message","role":"assistant","model":${json(facts.model)},"content":[`

const messageStart = (facts: MessageFacts): string => {
  const usageField = facts.usage ? `,"usage":${usage(facts.inputTokens, 1, facts)}` : ""
  return sse(
    "message_start",
    `{"type":"message_start","message":{"id":${json(facts.id)},"type":"message","role":"assistant",` +
      `"model":${json(facts.model)},"content":[],"stop_reason":null,"stop_sequence":null${usageField}}}`,
  )
}

const ping = sse("ping", `{"type": "ping"}`)

const messageDelta = (facts: MessageFacts, stop: string): string =>
  sse(
    "message_delta",
    `{"type":"message_delta","delta":{"stop_reason":"${stop}","stop_sequence":null}` +
      (facts.usage ? `,"usage":{"output_tokens":${facts.outputTokens}}` : "") +
      "}",
  )

const messageStop = sse("message_stop", `{"type":"message_stop"}`)

/** A non-stream message as JSON fragments: the text sits between `head` and `tail`. */
export const messageJson = (facts: MessageFacts): BodyPlan => ({
  head: [messageHead(facts) + `{"type":"text","text":"`],
  tokens: facts.outputTokens,
  token: tokenText,
  tail: [`"}` + messageEnd(facts, stopReason(facts))],
  malformed: `"oops`,
})

/** A message stream: message_start, content_block_start, ping, one text_delta per token, then the end events. */
export const messageStream = (facts: MessageFacts): BodyPlan => ({
  head: [
    messageStart(facts),
    sse(
      "content_block_start",
      `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
    ),
    ping,
  ],
  tokens: facts.outputTokens,
  token: (index) =>
    sse(
      "content_block_delta",
      `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${tokenText(index)}"}}`,
    ),
  tail: [
    sse("content_block_stop", `{"type":"content_block_stop","index":0}`),
    messageDelta(facts, stopReason(facts)),
    messageStop,
  ],
  malformed: `event: content_block_delta\ndata: {"type":"content_block_delta",oops\n\n`,
})

/** A non-stream message with one `tool_use` block; the argument tokens sit inside `input.query`. */
export const toolUseJson = (facts: MessageFacts, call: ToolCall): BodyPlan => ({
  head: [
    messageHead(facts) +
      `{"type":"tool_use","id":${json(call.id)},"name":${json(call.name)},"input":${argumentsOpen}`,
  ],
  tokens: facts.outputTokens,
  token: tokenText,
  tail: [`${argumentsClose}}` + messageEnd(facts, "tool_use")],
  malformed: `"oops`,
})

const jsonDelta = (partial: string): string =>
  sse(
    "content_block_delta",
    `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"${inString(partial)}"}}`,
  )

/** A message stream with one `tool_use` block whose input arrives as `input_json_delta` events, one per token. */
export const toolUseStream = (facts: MessageFacts, call: ToolCall): BodyPlan => ({
  head: [
    messageStart(facts),
    sse(
      "content_block_start",
      `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":${json(call.id)},` +
        `"name":${json(call.name)},"input":{}}}`,
    ),
    ping,
    jsonDelta(argumentsOpen),
  ],
  tokens: facts.outputTokens,
  token: (index) => jsonDelta(tokenText(index)),
  tail: [
    jsonDelta(argumentsClose),
    sse("content_block_stop", `{"type":"content_block_stop","index":0}`),
    messageDelta(facts, "tool_use"),
    messageStop,
  ],
  malformed: `event: content_block_delta\ndata: {"type":"content_block_delta",oops\n\n`,
})

/** An error body: `{"type":"error","error":{"type","message"}}`. */
export const errorJson = (type: string, message: string): string =>
  `{"type":"error","error":{"type":${json(type)},"message":${json(message)}}}`

/** A 200 stream that reports an error in band: message_start, ping, then `event: error`, then the end. */
export const inbandErrorStream = (facts: MessageFacts, type: string): BodyPlan => ({
  head: [messageStart(facts), ping],
  tokens: 0,
  token: tokenText,
  tail: [sse("error", errorJson(type, `fake in-band ${type}`))],
  malformed: "",
})

/** The error type the real API uses for an HTTP status. */
export const errorTypeForStatus = (status: number): string => {
  switch (status) {
    case 401:
      return "authentication_error"
    case 402:
      return "billing_error"
    case 403:
      return "permission_error"
    case 404:
      return "not_found_error"
    case 413:
      return "request_too_large"
    case 429:
      return "rate_limit_error"
    case 529:
      return "overloaded_error"
    default:
      return status >= 500 ? "api_error" : "invalid_request_error"
  }
}

/** The HTTP status of an error type (for `inband-error:TYPE` on a non-stream request). */
export const statusForErrorType = (type: string): number => {
  const statuses: Record<string, number> = {
    invalid_request_error: 400,
    authentication_error: 401,
    billing_error: 402,
    permission_error: 403,
    not_found_error: 404,
    request_too_large: 413,
    rate_limit_error: 429,
    api_error: 500,
    overloaded_error: 529,
  }
  return statuses[type] ?? 500
}
