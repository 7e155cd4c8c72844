/**
 * Random valid Responses requests: instructions, a string input or input
 * items (messages with text and images, reasoning items, function_call /
 * function_call_output loops), tools, tool choice, parameters.
 */
import * as fc from "fast-check"
import { args, callId, common, imageUrl, maybeBlank, text, toolNames, type Json } from "./common.js"

const inputContent = fc.oneof(
  text,
  fc.array(
    fc.oneof(
      maybeBlank.map((t) => ({ type: "input_text", text: t })),
      imageUrl.map((url) => ({ type: "input_image", image_url: url, detail: "auto" })),
    ),
    { minLength: 1, maxLength: 3 },
  ),
)
const inputUser = fc
  .tuple(inputContent, fc.boolean())
  .map(([content, typed]) => ({ ...(typed ? { type: "message" } : {}), role: "user", content }))
const inputSystem = fc
  .tuple(fc.constantFrom("system", "developer"), text)
  .map(([role, content]) => ({ type: "message", role, content }))
const inputAssistant = fc.oneof(
  text.map((content) => ({ role: "assistant", content })),
  text.map((t) => ({
    type: "message",
    role: "assistant",
    id: "msg_x",
    status: "completed",
    content: [{ type: "output_text", text: t, annotations: [] }],
  })),
)
const reasoning = fc.constant({ type: "reasoning", id: "rs_1", summary: [] })
const inputToolLoop = (names: ReadonlyArray<string>) =>
  fc
    .array(fc.tuple(callId("call_"), fc.constantFrom(...names), args, text), { minLength: 1, maxLength: 3 })
    .map((calls) => [
      ...calls.map(([id, name, input]) => ({
        type: "function_call",
        call_id: id,
        name,
        arguments: JSON.stringify(input),
        id: `fc_${id}`,
      })),
      ...calls.map(([id, , , output]) => ({ type: "function_call_output", call_id: id, output })),
    ])

/** A valid Responses request (a string input or input items). */
export const responsesRequestArb: fc.Arbitrary<Json> = toolNames.chain((names) =>
  fc
    .record({
      instructions: fc.option(text, { nil: undefined }),
      input: fc.oneof(
        { weight: 1, arbitrary: text },
        {
          weight: 4,
          arbitrary: fc
            .tuple(
              fc
                .tuple(fc.constantFrom("user", "user", "user", "assistant"), text)
                .map(([role, content]) => ({ role, content })),
              fc.array(
                fc.oneof(
                  inputUser.map((m) => [m]),
                  inputAssistant.map((m) => [m]),
                  inputSystem.map((m) => [m]),
                  reasoning.map((m) => [m]),
                  ...(names.length > 0 ? [inputToolLoop(names)] : []),
                ),
                { maxLength: 6 },
              ),
            )
            .map(([first, rest]) => [first, ...rest.flat()]),
        },
      ),
      common,
      max: fc.option(fc.integer({ min: 1, max: 8192 }), { nil: undefined }),
      choice: fc.option(
        fc.oneof(
          fc.constantFrom<unknown>("auto", "none", "required"),
          fc.constantFrom(...(names.length > 0 ? names : ["x"])).map((name) => ({ type: "function", name })),
        ),
        { nil: undefined },
      ),
      parallel: fc.option(fc.boolean(), { nil: undefined }),
      extras: fc.record(
        {
          store: fc.boolean(),
          reasoning: fc.constant({ effort: "medium", summary: "auto" }),
          include: fc.constant(["reasoning.encrypted_content"]),
          text: fc.constant({ format: { type: "text" }, verbosity: "low" }),
          truncation: fc.constant("disabled"),
        },
        { requiredKeys: [] },
      ),
    })
    .map(({ instructions, input, common, max, choice, parallel, extras }) => {
      const body: Json = { model: "gpt-client", input, ...common, ...extras }
      if (instructions !== undefined) body["instructions"] = instructions
      if (max !== undefined) body["max_output_tokens"] = max
      if (names.length > 0) {
        body["tools"] = names.map((name) => ({
          type: "function",
          name,
          description: `does ${name}`,
          parameters: { type: "object", properties: {} },
          strict: false,
        }))
        if (choice !== undefined) body["tool_choice"] = choice
        if (parallel !== undefined) body["parallel_tool_calls"] = parallel
      }
      return body
    }),
)
