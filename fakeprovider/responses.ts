/**
 * OpenAI Responses wire format: the response object as JSON, and the event stream in the real order:
 * response.created, response.in_progress, response.output_item.added, response.content_part.added, one
 * response.output_text.delta per token, response.output_text.done, response.content_part.done,
 * response.output_item.done, then response.completed (response.incomplete when `max_output_tokens` was reached).
 * A function call replaces the content-part events with response.function_call_arguments.delta (one per
 * argument piece) and .done. Every event carries `sequence_number`; there is no `[DONE]`.
 * In band, `inband-error:TYPE` streams response.created then response.failed (`error.code` TYPE when it is a
 * Responses error code, else `server_error`), and `inband-error-event:TYPE` response.created then `event: error`.
 * https://platform.openai.com/docs/api-reference/responses and .../responses-streaming
 */
import type { BodyPlan, Piece } from "./emit.js"
import { outputTextChunks, tokenText } from "./tokens.js"
import { argumentsClose, argumentsOpen, inString } from "./tools.js"
import type { ToolCall } from "./tools.js"

/** The one output item of a response. */
export type OutputItem =
  | { readonly kind: "message"; readonly id: string }
  /** `fc_…` item id; the call's id is the `call_id`. */
  | { readonly kind: "function_call"; readonly id: string; readonly call: ToolCall }

/** What one generated response says. */
export interface ResponseFacts {
  /** `resp_…` */
  readonly id: string
  readonly model: string
  /** Unix seconds. */
  readonly createdAt: number
  readonly inputTokens: number
  /** Text tokens, or argument tokens of a function call. */
  readonly outputTokens: number
  /** True: status `incomplete` with `incomplete_details.reason` `max_output_tokens` (text only). */
  readonly hitLimit: boolean
  /** False for `no-usage`: `"usage":null` everywhere. */
  readonly usage: boolean
  /** The request fields a response echoes, as JSON members without braces ({@link echoFields}). */
  readonly echo: string
  readonly item: OutputItem
}

type Status = "in_progress" | "completed" | "incomplete" | "failed"

const json = JSON.stringify

const orDefault = (body: Record<string, unknown>, name: string, fallback: string): string =>
  `"${name}":${body[name] === undefined ? fallback : json(body[name])}`

/** The request's settings as the response repeats them, with the API's defaults for those not given. */
export const echoFields = (body: Record<string, unknown>): string =>
  [
    orDefault(body, "instructions", "null"),
    orDefault(body, "max_output_tokens", "null"),
    orDefault(body, "metadata", "{}"),
    orDefault(body, "parallel_tool_calls", "true"),
    orDefault(body, "previous_response_id", "null"),
    `"reasoning":{"effort":null,"summary":null}`,
    `"service_tier":"default"`,
    orDefault(body, "store", "true"),
    orDefault(body, "temperature", "1"),
    orDefault(body, "text", `{"format":{"type":"text"}}`),
    orDefault(body, "tool_choice", `"auto"`),
    orDefault(body, "tools", "[]"),
    orDefault(body, "top_p", "1"),
    orDefault(body, "truncation", `"disabled"`),
    orDefault(body, "user", "null"),
  ].join(",")

const finalStatus = (facts: ResponseFacts): Status =>
  facts.item.kind === "message" && facts.hitLimit ? "incomplete" : "completed"

const usage = (facts: ResponseFacts): string =>
  `{"input_tokens":${facts.inputTokens},"input_tokens_details":{"cached_tokens":0},` +
  `"output_tokens":${facts.outputTokens},"output_tokens_details":{"reasoning_tokens":0},` +
  `"total_tokens":${facts.inputTokens + facts.outputTokens}}`

/** The response object up to the inside of `output`. */
const responseHead = (facts: ResponseFacts, status: Status, error = "null"): string =>
  `{"id":${json(facts.id)},"object":"response","created_at":${facts.createdAt},"status":"${status}",` +
  `"background":false,"error":${error},"incomplete_details":` +
  (status === "incomplete" ? `{"reason":"max_output_tokens"}` : "null") +
  `,${facts.echo},"model":${json(facts.model)},"output":[`

/** The rest of the response object after `output`; usage only on the final response. */
const responseTail = (facts: ResponseFacts, final: boolean): string =>
  `],"usage":${final && facts.usage ? usage(facts) : "null"}}`

/** The output item up to its tokens (message text, or the function call's `arguments` string). */
const itemOpen = (item: OutputItem, status: Status): string =>
  item.kind === "message"
    ? `{"id":${json(item.id)},"type":"message","status":"${status}","content":[{"type":"output_text",` +
      `"annotations":[],"logprobs":[],"text":"`
    : `{"id":${json(item.id)},"type":"function_call","status":"${status}","call_id":${json(item.call.id)},` +
      `"name":${json(item.call.name)},"arguments":"${inString(argumentsOpen)}`

const itemClose = (item: OutputItem): string =>
  item.kind === "message" ? `"}],"role":"assistant"}` : `${inString(argumentsClose)}"}`

/** The item as response.output_item.added shows it: nothing generated yet. */
const itemAdded = (item: OutputItem): string =>
  item.kind === "message"
    ? `{"id":${json(item.id)},"type":"message","status":"in_progress","content":[],"role":"assistant"}`
    : `{"id":${json(item.id)},"type":"function_call","status":"in_progress","call_id":${json(item.call.id)},` +
      `"name":${json(item.call.name)},"arguments":""}`

/** A non-stream response as JSON fragments: the tokens sit between `head` and `tail`. */
export const responseJson = (facts: ResponseFacts): BodyPlan => {
  const status = finalStatus(facts)
  return {
    head: [responseHead(facts, status) + itemOpen(facts.item, status)],
    tokens: facts.outputTokens,
    token: tokenText,
    tail: [itemClose(facts.item) + responseTail(facts, true)],
    malformed: `"oops`,
  }
}

/** One SSE event; `fields` are the JSON members after `type` and `sequence_number`. */
const event = (type: string, sequence: number, fields: string): string =>
  `event: ${type}\ndata: {"type":"${type}","sequence_number":${sequence},${fields}}\n\n`

/** An event whose data repeats the generated tokens between `before` and `after`, written lazily. */
const tokensEvent = (type: string, sequence: number, tokens: number, before: string, after: string): Piece =>
  function* () {
    yield `event: ${type}\ndata: {"type":"${type}","sequence_number":${sequence},${before}`
    yield* outputTextChunks(tokens)
    yield `${after}}\n\n`
  }

const lifecycle = (
  type: string,
  sequence: number,
  facts: ResponseFacts,
  status: Status,
  error?: string,
): string =>
  event(type, sequence, `"response":${responseHead(facts, status, error)}${responseTail(facts, false)}`)

/** A response stream (see the module doc for the event order). */
export const responseStream = (facts: ResponseFacts): BodyPlan => {
  const { item, outputTokens: tokens } = facts
  const message = item.kind === "message"
  const at = `"item_id":${json(item.id)},"output_index":0`
  const part = `${at},"content_index":0`
  const delta = (sequence: number, text: string): string =>
    message
      ? event("response.output_text.delta", sequence, `${part},"delta":"${text}","logprobs":[]`)
      : event("response.function_call_arguments.delta", sequence, `${at},"delta":"${inString(text)}"`)
  const status = finalStatus(facts)
  const end = 4 + tokens + (message ? 0 : 1)
  return {
    head: [
      lifecycle("response.created", 0, facts, "in_progress"),
      lifecycle("response.in_progress", 1, facts, "in_progress"),
      event("response.output_item.added", 2, `"output_index":0,"item":${itemAdded(item)}`),
      message
        ? event(
            "response.content_part.added",
            3,
            `${part},"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`,
          )
        : delta(3, argumentsOpen),
    ],
    tokens,
    token: (index) => delta(4 + index, tokenText(index)),
    tail: [
      ...(message
        ? [
            tokensEvent("response.output_text.done", end, tokens, `${part},"text":"`, `","logprobs":[]`),
            tokensEvent(
              "response.content_part.done",
              end + 1,
              tokens,
              `${part},"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"`,
              `"}`,
            ),
          ]
        : [
            delta(end - 1, argumentsClose),
            tokensEvent(
              "response.function_call_arguments.done",
              end,
              tokens,
              `${at},"arguments":"${inString(argumentsOpen)}`,
              `${inString(argumentsClose)}"`,
            ),
          ]),
      tokensEvent(
        "response.output_item.done",
        end + (message ? 2 : 1),
        tokens,
        `"output_index":0,"item":${itemOpen(item, status)}`,
        itemClose(item),
      ),
      tokensEvent(
        status === "incomplete" ? "response.incomplete" : "response.completed",
        end + (message ? 3 : 2),
        tokens,
        `"response":${responseHead(facts, status)}${itemOpen(item, status)}`,
        itemClose(item) + responseTail(facts, true),
      ),
    ],
    malformed: message
      ? `event: response.output_text.delta\ndata: {"type":"response.output_text.delta",oops\n\n`
      : `event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta",oops\n\n`,
  }
}

/** `response.failed` error codes the fake passes through; any other in-band type is reported as `server_error`. */
const failureCodes = new Set([
  "server_error",
  "rate_limit_exceeded",
  "invalid_prompt",
  "vector_store_timeout",
])

/**
 * A 200 stream that fails in band: response.created, then response.failed with `status` `failed` and
 * `error` `{code, message:"fake in-band TYPE"}`; or, with `asErrorEvent`, an `error` event
 * `{"type":"error","code":TYPE,"message":…,"param":null,"sequence_number":1}` instead.
 */
export const inbandErrorStream = (facts: ResponseFacts, type: string, asErrorEvent: boolean): BodyPlan => {
  const message = json(`fake in-band ${type}`)
  const code = failureCodes.has(type) ? type : "server_error"
  return {
    head: [lifecycle("response.created", 0, facts, "in_progress")],
    tokens: 0,
    token: tokenText,
    tail: [
      asErrorEvent
        ? event("error", 1, `"code":${json(type)},"message":${message},"param":null`)
        : lifecycle("response.failed", 1, facts, "failed", `{"code":"${code}","message":${message}}`),
    ],
    malformed: "",
  }
}
