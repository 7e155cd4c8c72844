/**
 * From a validated request body and its scenario to the body of the answer, per API: the facts (ids, model,
 * token counts, stop reason) and whether the answer is text, a tool call (tools.ts) or an in-band error.
 */
import { randomBytes } from "node:crypto"
import * as Anthropic from "./anthropic.js"
import { contentFilterTokens } from "./azure.js"
import * as Bedrock from "./bedrock.js"
import type { BodyPlan } from "./emit.js"
import * as Gemini from "./gemini.js"
import * as OpenAI from "./openai.js"
import * as Responses from "./responses.js"
import type { PromptCache } from "./promptCache.js"
import type { Scenario } from "./scenario.js"
import {
  anthropicInputTokens,
  geminiInputTokens,
  numberField,
  openaiInputTokens,
  planOutput,
  responsesInputTokens,
} from "./tokens.js"
import type { OutputPlan } from "./tokens.js"
import { toolCallId, toolToCall, toolTokens } from "./tools.js"
import type { ToolApi, ToolCall } from "./tools.js"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `prefix` + 24 random base62 characters. */
export const randomId = (prefix: string): string =>
  prefix + Array.from(randomBytes(24), (byte) => base62[byte % 62]).join("")

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** One request as the plans read it. */
export interface PlanInput {
  readonly body: Record<string, unknown>
  /** The body as received: tool call ids are hashed from it. */
  readonly rawBody: string
  readonly scenario: Scenario
  readonly stream: boolean
  /** This fake's prompt cache (`prompt-cache`). */
  readonly promptCache?: PromptCache | undefined
}

/** The answer's output size, and the tool it calls (then at most 16 argument tokens, never "hit the limit"). */
const answerShape = (
  api: ToolApi,
  input: PlanInput,
  limit: number | undefined,
): { readonly output: OutputPlan; readonly tool: string | undefined } => {
  const output = planOutput(input.scenario, limit)
  const tool = toolToCall(api, input.body)
  return tool === undefined
    ? { output, tool }
    : { output: { tokens: toolTokens(output.tokens), hitLimit: false }, tool }
}

const anthropicFacts = (
  input: PlanInput,
  model: string,
): { readonly facts: Anthropic.MessageFacts; readonly tool: string | undefined } => {
  const { output, tool } = answerShape("anthropic", input, numberField(input.body, "max_tokens"))
  const cache =
    input.scenario.promptCache === true && input.promptCache !== undefined
      ? input.promptCache.turn(input.body)
      : undefined
  const facts: Anthropic.MessageFacts = {
    id: randomId("msg_"),
    model,
    // With a prompt cache the whole prompt is read from it or written to it (a breakpoint at its end).
    inputTokens: cache === undefined ? anthropicInputTokens(input.body) : 0,
    cacheRead: cache?.read ?? 0,
    cacheWrite: cache?.write ?? 0,
    outputTokens: output.tokens,
    hitLimit: output.hitLimit,
    usage: !input.scenario.noUsage,
  }
  return { facts, tool }
}

const anthropicBody = (
  input: PlanInput,
  facts: Anthropic.MessageFacts,
  tool: string | undefined,
): BodyPlan => {
  const { inbandError } = input.scenario
  if (inbandError !== undefined) return Anthropic.inbandErrorStream(facts, inbandError)
  if (tool !== undefined) {
    const call: ToolCall = { name: tool, id: toolCallId("toolu_", input.rawBody) }
    return input.stream ? Anthropic.toolUseStream(facts, call) : Anthropic.toolUseJson(facts, call)
  }
  return input.stream ? Anthropic.messageStream(facts) : Anthropic.messageJson(facts)
}

/** Anthropic Messages (and Vertex, whose model comes from the URL). */
export const anthropicPlan = (input: PlanInput, model: string): BodyPlan => {
  const { facts, tool } = anthropicFacts(input, model)
  return anthropicBody(input, facts, tool)
}

/**
 * Bedrock InvokeModel: the Anthropic message with the URL's model id; a stream's events as event-stream frames
 * (with the invocation metrics on `message_stop`), an in-band error as an exception frame.
 *
 * @param startedAt `Date.now()` when the request arrived, for the latencies of the invocation metrics.
 */
export const bedrockPlan = (input: PlanInput, modelId: string, startedAt: number): BodyPlan => {
  const { facts, tool } = anthropicFacts(input, modelId)
  if (!input.stream) return anthropicBody(input, facts, tool)
  const { inbandError } = input.scenario
  if (inbandError !== undefined)
    return Bedrock.inbandErrorStream(Anthropic.inbandErrorStream(facts, inbandError), inbandError)
  const metrics = facts.usage
    ? { inputTokens: facts.inputTokens, outputTokens: facts.outputTokens, startedAt }
    : undefined
  return Bedrock.eventStream(anthropicBody(input, facts, tool), metrics)
}

/**
 * Gemini generateContent / streamGenerateContent: text, or one `functionCall` of the first declared function;
 * `thoughts:N` and `cached:N` add to the usage.
 */
export const geminiPlan = (input: PlanInput, model: string, framing: Gemini.Framing): BodyPlan => {
  const { scenario } = input
  const { output, tool } = answerShape("gemini", input, Gemini.maxOutputTokens(input.body))
  const cached = scenario.cached ?? 0
  const facts: Gemini.GeminiFacts = {
    responseId: randomId(""),
    modelVersion: model,
    promptTokens: geminiInputTokens(input.body) + cached,
    outputTokens: output.tokens,
    thoughts: scenario.thoughts ?? 0,
    cached,
    hitLimit: output.hitLimit,
    usage: !scenario.noUsage,
    ...(tool !== undefined && Gemini.signsCalls(model) ? { signature: Gemini.signatureFor(tool) } : {}),
  }
  if (scenario.inbandError !== undefined)
    return Gemini.inbandErrorStream(facts, scenario.inbandError, framing)
  if (tool !== undefined)
    return input.stream
      ? Gemini.functionCallStream(facts, tool, framing)
      : Gemini.functionCallJson(facts, tool)
  return input.stream ? Gemini.responseStream(facts, framing) : Gemini.responseJson(facts)
}

/**
 * OpenAI Chat Completions. `contentFilter` (Azure's `content-filter` on a stream): text only, cut after
 * {@link contentFilterTokens} tokens with `finish_reason: "content_filter"`.
 */
export const chatPlan = (input: PlanInput, contentFilter = false): BodyPlan => {
  const { body } = input
  const limit = numberField(body, "max_completion_tokens") ?? numberField(body, "max_tokens")
  const shape = answerShape("chat", input, limit)
  const planned = contentFilter ? planOutput(input.scenario, limit) : shape.output
  const output = contentFilter
    ? { tokens: Math.min(planned.tokens, contentFilterTokens), hitLimit: false }
    : planned
  const tool = contentFilter ? undefined : shape.tool
  const options = body["stream_options"]
  const facts: OpenAI.CompletionFacts = {
    id: randomId("chatcmpl-"),
    model: String(body["model"]),
    created: Math.floor(Date.now() / 1000),
    inputTokens: openaiInputTokens(body),
    outputTokens: output.tokens,
    hitLimit: output.hitLimit,
    usage: !input.scenario.noUsage,
    includeUsage: isRecord(options) && options["include_usage"] === true,
    ...(contentFilter ? { finishReason: "content_filter" } : {}),
  }
  const { inbandError } = input.scenario
  if (inbandError !== undefined) return OpenAI.inbandErrorStream(facts, inbandError)
  if (tool !== undefined) {
    const call: ToolCall = { name: tool, id: toolCallId("call_", input.rawBody) }
    return input.stream ? OpenAI.toolCallStream(facts, call) : OpenAI.toolCallJson(facts, call)
  }
  return input.stream ? OpenAI.completionStream(facts) : OpenAI.completionJson(facts)
}

/** OpenAI Responses. */
export const responsesPlan = (input: PlanInput): BodyPlan => {
  const { body, rawBody, scenario } = input
  const { output, tool } = answerShape("responses", input, numberField(body, "max_output_tokens"))
  const facts: Responses.ResponseFacts = {
    id: randomId("resp_"),
    model: String(body["model"]),
    createdAt: Math.floor(Date.now() / 1000),
    inputTokens: responsesInputTokens(body),
    outputTokens: output.tokens,
    hitLimit: output.hitLimit,
    usage: !scenario.noUsage,
    echo: Responses.echoFields(body),
    item:
      tool === undefined
        ? { kind: "message", id: randomId("msg_") }
        : {
            kind: "function_call",
            id: toolCallId("fc_", rawBody),
            call: { name: tool, id: toolCallId("call_", rawBody) },
          },
  }
  if (scenario.inbandError !== undefined)
    return Responses.inbandErrorStream(facts, scenario.inbandError, scenario.inbandErrorEvent === true)
  return input.stream ? Responses.responseStream(facts) : Responses.responseJson(facts)
}
