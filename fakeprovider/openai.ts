/**
 * OpenAI Chat Completions wire format (also what Ollama's OpenAI compatibility serves).
 * https://platform.openai.com/docs/api-reference/chat/create and .../chat-streaming
 */
import type { BodyPlan } from "./emit.js"
import { tokenText } from "./tokens.js"
import { argumentsClose, argumentsOpen, inString } from "./tools.js"
import type { ToolCall } from "./tools.js"

/** What one generated completion says. */
export interface CompletionFacts {
  /** `chatcmpl-…` */
  readonly id: string
  readonly model: string
  /** Unix seconds. */
  readonly created: number
  readonly inputTokens: number
  readonly outputTokens: number
  /** True: `finish_reason` is `length`, else `stop`. */
  readonly hitLimit: boolean
  /** False for `no-usage`: no usage anywhere. */
  readonly usage: boolean
  /** Stream only: `stream_options.include_usage` was true, so a usage chunk with `"choices":[]` follows. */
  readonly includeUsage: boolean
  /** A finish reason instead of `stop` / `length` (Azure's `content_filter`). */
  readonly finishReason?: string
}

const json = JSON.stringify

const data = (payload: string): string => `data: ${payload}\n\n`

const finishReason = (facts: CompletionFacts): string =>
  facts.finishReason ?? (facts.hitLimit ? "length" : "stop")

const usage = (facts: CompletionFacts): string =>
  `{"prompt_tokens":${facts.inputTokens},"completion_tokens":${facts.outputTokens},` +
  `"total_tokens":${facts.inputTokens + facts.outputTokens}}`

/** A non-stream `chat.completion` as JSON fragments: the text sits between `head` and `tail`. */
export const completionJson = (facts: CompletionFacts): BodyPlan => ({
  head: [
    `{"id":${json(facts.id)},"object":"chat.completion","created":${facts.created},"model":${json(facts.model)},` +
      `"choices":[{"index":0,"message":{"role":"assistant","content":"`,
  ],
  tokens: facts.outputTokens,
  token: tokenText,
  tail: [
    `","refusal":null},"logprobs":null,"finish_reason":"${finishReason(facts)}"}]` +
      (facts.usage ? `,"usage":${usage(facts)}` : "") +
      `,"system_fingerprint":null}`,
  ],
  malformed: `"oops`,
})

const chunk = (facts: CompletionFacts, choices: string, extra = ""): string =>
  data(
    `{"id":${json(facts.id)},"object":"chat.completion.chunk","created":${facts.created},` +
      `"model":${json(facts.model)},"system_fingerprint":null,"choices":${choices}${extra}}`,
  )

const choice = (delta: string, finish: string | null): string =>
  `[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish === null ? "null" : `"${finish}"`}}]`

/** A completion stream: role chunk, one chunk per token, the finish chunk, the usage chunk when asked, `[DONE]`. */
export const completionStream = (facts: CompletionFacts): BodyPlan => {
  const withUsage = facts.usage && facts.includeUsage
  const nullUsage = withUsage ? `,"usage":null` : ""
  return {
    head: [chunk(facts, choice(`{"role":"assistant","content":"","refusal":null}`, null), nullUsage)],
    tokens: facts.outputTokens,
    token: (index) => chunk(facts, choice(`{"content":"${tokenText(index)}"}`, null), nullUsage),
    tail: [
      chunk(facts, choice("{}", finishReason(facts)), nullUsage),
      ...(withUsage ? [chunk(facts, "[]", `,"usage":${usage(facts)}`)] : []),
      data("[DONE]"),
    ],
    malformed: data(`{"id":${json(facts.id)},"object":"chat.completion.chunk",oops`),
  }
}

/** A non-stream completion whose message makes one tool call; the argument tokens sit inside `arguments`. */
export const toolCallJson = (facts: CompletionFacts, call: ToolCall): BodyPlan => ({
  head: [
    `{"id":${json(facts.id)},"object":"chat.completion","created":${facts.created},"model":${json(facts.model)},` +
      `"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":${json(call.id)},` +
      `"type":"function","function":{"name":${json(call.name)},"arguments":"${inString(argumentsOpen)}`,
  ],
  tokens: facts.outputTokens,
  token: tokenText,
  tail: [
    `${inString(argumentsClose)}"}}],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}]` +
      (facts.usage ? `,"usage":${usage(facts)}` : "") +
      `,"system_fingerprint":null}`,
  ],
  malformed: `"oops`,
})

const argumentsDelta = (text: string): string =>
  `{"tool_calls":[{"index":0,"function":{"arguments":"${inString(text)}"}}]}`

/**
 * A completion stream with one tool call: the role chunk carries the call's id and name, then one chunk per
 * argument piece (`{"query":"`, each token, `"}`), the `tool_calls` finish chunk, the usage chunk when asked,
 * `[DONE]`.
 */
export const toolCallStream = (facts: CompletionFacts, call: ToolCall): BodyPlan => {
  const withUsage = facts.usage && facts.includeUsage
  const nullUsage = withUsage ? `,"usage":null` : ""
  const piece = (delta: string): string => chunk(facts, choice(delta, null), nullUsage)
  return {
    head: [
      piece(
        `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":${json(call.id)},"type":"function",` +
          `"function":{"name":${json(call.name)},"arguments":""}}],"refusal":null}`,
      ),
      piece(argumentsDelta(argumentsOpen)),
    ],
    tokens: facts.outputTokens,
    token: (index) => piece(argumentsDelta(tokenText(index))),
    tail: [
      piece(argumentsDelta(argumentsClose)),
      chunk(facts, choice("{}", "tool_calls"), nullUsage),
      ...(withUsage ? [chunk(facts, "[]", `,"usage":${usage(facts)}`)] : []),
      data("[DONE]"),
    ],
    malformed: data(`{"id":${json(facts.id)},"object":"chat.completion.chunk",oops`),
  }
}

/** An error body: `{"error":{"message","type","param":null,"code":null}}`. */
export const errorJson = (type: string, message: string): string =>
  `{"error":{"message":${json(message)},"type":${json(type)},"param":null,"code":null}}`

/** A 200 stream that reports an error in band: the role chunk, then `data: {"error":{…}}`, then the end. */
export const inbandErrorStream = (facts: CompletionFacts, type: string): BodyPlan => ({
  head: [chunk(facts, choice(`{"role":"assistant","content":"","refusal":null}`, null))],
  tokens: 0,
  token: tokenText,
  tail: [data(errorJson(type, `fake in-band ${type}`))],
  malformed: "",
})

/** The error type used for an HTTP status. */
export const errorTypeForStatus = (status: number): string => {
  if (status === 429) return "rate_limit_error"
  if (status === 401) return "authentication_error"
  if (status === 403) return "permission_error"
  if (status === 404) return "not_found_error"
  return status >= 500 ? "server_error" : "invalid_request_error"
}
