/**
 * Random valid Anthropic Messages requests: system, alternating turns with
 * text and image blocks, thinking, tool_use answered by tool_result blocks
 * first in the next turn, an optional prefill, tools, tool choice,
 * parameters.
 */
import * as fc from "fast-check"
import { args, callId, common, dataUrl, httpsUrl, text, toolNames, type Json } from "./common.js"

const textBlock = text.map((t) => ({ type: "text", text: t }))
const imageBlock = fc.oneof(
  dataUrl.map((url) => {
    const [head, data] = url.slice(5).split(";base64,") as [string, string]
    return { type: "image", source: { type: "base64", media_type: head, data } }
  }),
  httpsUrl.map((url) => ({ type: "image", source: { type: "url", url } })),
)
const userContent = fc.oneof(text, fc.array(fc.oneof(textBlock, imageBlock), { minLength: 1, maxLength: 3 }))
const toolResultContent = fc.oneof(
  fc.constant(undefined),
  text,
  fc.array(textBlock, { minLength: 1, maxLength: 2 }),
)

/** One assistant turn and the user turn after it (which answers every tool_use first). */
const exchange = (names: ReadonlyArray<string>) =>
  fc
    .record({
      thinking: fc.boolean(),
      say: fc.option(text, { nil: undefined }),
      calls:
        names.length > 0
          ? fc.array(fc.tuple(callId("toolu_"), fc.constantFrom(...names), args), { maxLength: 2 })
          : fc.constant<Array<[string, string, Json]>>([]),
      results: fc.array(fc.tuple(toolResultContent, fc.boolean()), { minLength: 2, maxLength: 2 }),
      next: fc.option(userContent, { nil: undefined }),
    })
    .map(({ thinking, say, calls, results, next }) => {
      const ids = calls.map(([id]) => id.replace(/\./g, "_"))
      const assistant: Array<Json> = []
      if (thinking) assistant.push({ type: "thinking", thinking: "hmm", signature: "sig" })
      if (say !== undefined || calls.length === 0) assistant.push({ type: "text", text: say ?? "ok" })
      calls.forEach(([, name, input], k) => assistant.push({ type: "tool_use", id: ids[k], name, input }))
      const answers = ids.map((id, k) => {
        const [content, isError] = results[k % results.length] as [unknown, boolean]
        return {
          type: "tool_result",
          tool_use_id: id,
          ...(content === undefined ? {} : { content }),
          ...(isError ? { is_error: true } : {}),
        }
      })
      const following =
        next === undefined ? [] : typeof next === "string" ? [{ type: "text", text: next }] : next
      const user = [...answers, ...following]
      return [
        { role: "assistant", content: assistant },
        ...(user.length > 0 ? [{ role: "user", content: user }] : [{ role: "user", content: "go on" }]),
      ]
    })

/** A valid Anthropic Messages request. */
export const messagesRequestArb: fc.Arbitrary<Json> = toolNames.chain((names) =>
  fc
    .record({
      system: fc.option(
        fc.oneof(
          text,
          fc.array(
            textBlock.map((b) => ({ ...b, cache_control: { type: "ephemeral" } })),
            { minLength: 1, maxLength: 2 },
          ),
        ),
        { nil: undefined },
      ),
      first: userContent,
      exchanges: fc.array(exchange(names), { maxLength: 4 }),
      prefill: fc.option(text, { nil: undefined }),
      common,
      max: fc.integer({ min: 1, max: 8192 }),
      stop: fc.option(fc.array(text, { minLength: 1, maxLength: 3 }), { nil: undefined }),
      choice: fc.option(fc.constantFrom("auto", "any", "none", "tool"), { nil: undefined }),
      serial: fc.boolean(),
      extras: fc.record(
        {
          top_k: fc.integer({ min: 1, max: 100 }),
          thinking: fc.constantFrom({ type: "disabled" }, { type: "adaptive" }),
          service_tier: fc.constant("auto"),
        },
        { requiredKeys: [] },
      ),
    })
    .map(({ system, first, exchanges, prefill, common, max, stop, choice, serial, extras }) => {
      const { user, ...rest } = common
      const messages: Array<Json> = [{ role: "user", content: first }, ...exchanges.flat()]
      if (prefill !== undefined) messages.push({ role: "assistant", content: prefill })
      const body: Json = { model: "claude-client", max_tokens: max, messages, ...rest, ...extras }
      if (system !== undefined) body["system"] = system
      if (user !== undefined) body["metadata"] = { user_id: user }
      if (stop !== undefined) body["stop_sequences"] = stop
      if (names.length > 0) {
        body["tools"] = names.map((name) => ({
          name,
          description: `does ${name}`,
          input_schema: { type: "object", properties: {} },
          cache_control: { type: "ephemeral" },
        }))
        if (choice !== undefined)
          body["tool_choice"] =
            choice === "tool"
              ? { type: "tool", name: names[0], disable_parallel_tool_use: serial }
              : choice === "none"
                ? { type: "none" }
                : { type: choice, disable_parallel_tool_use: serial }
      }
      return body
    }),
)
