/**
 * Random valid Chat Completions requests: system and developer messages
 * anywhere, text and image parts, complete tool loops (assistant tool_calls
 * answered by tool messages), tools, tool choice, parameters and harmless
 * extras.
 */
import * as fc from "fast-check"
import {
  args,
  callId,
  common,
  imageUrl,
  maybeBlank,
  schema,
  text,
  toolNames,
  unit,
  type Json,
} from "./common.js"

const chatUser = fc.oneof(
  text.map((content) => ({ role: "user", content })),
  fc
    .array(
      fc.oneof(
        maybeBlank.map((t) => ({ type: "text", text: t })),
        imageUrl.map((url) => ({ type: "image_url", image_url: { url, detail: "auto" } })),
      ),
      {
        minLength: 1,
        maxLength: 3,
      },
    )
    .map((content) => ({ role: "user", content })),
)
const chatSystem = fc
  .tuple(
    fc.constantFrom("system", "developer"),
    fc.oneof(
      text,
      fc.array(
        text.map((t) => ({ type: "text", text: t })),
        { minLength: 1, maxLength: 2 },
      ),
    ),
  )
  .map(([role, content]) => ({ role, content }))
const chatAssistantText = maybeBlank.map((content) => ({ role: "assistant", content }))

const chatToolLoop = (names: ReadonlyArray<string>) =>
  fc
    .tuple(
      fc.array(fc.tuple(callId("call_"), fc.constantFrom(...names), args, text), {
        minLength: 1,
        maxLength: 3,
      }),
      fc.option(text, { nil: null }),
    )
    .map(([calls, content]) => [
      {
        role: "assistant",
        content,
        tool_calls: calls.map(([id, name, input]) => ({
          id,
          type: "function",
          function: { name, arguments: JSON.stringify(input) },
        })),
      },
      ...calls.map(([id, , , result]) => ({ role: "tool", tool_call_id: id, content: result })),
    ])

/** A valid Chat Completions request. */
export const chatRequestArb: fc.Arbitrary<Json> = toolNames.chain((names) =>
  fc
    .record({
      system: fc.array(chatSystem, { maxLength: 2 }),
      first: fc
        .tuple(fc.constantFrom("user", "user", "user", "assistant"), text)
        .map(([role, content]) => ({ role, content })),
      rest: fc.array(
        fc.oneof(
          chatUser.map((m) => [m]),
          chatAssistantText.map((m) => [m]),
          chatSystem.map((m) => [m]),
          ...(names.length > 0 ? [chatToolLoop(names)] : []),
        ),
        { maxLength: 6 },
      ),
      common,
      limit: fc.option(
        fc.tuple(fc.constantFrom("max_tokens", "max_completion_tokens"), fc.integer({ min: 1, max: 8192 })),
        { nil: undefined },
      ),
      stop: fc.option(fc.oneof(text, fc.array(text, { maxLength: 3 })), { nil: undefined }),
      choice: fc.option(
        fc.oneof(
          fc.constantFrom<unknown>("auto", "none", "required"),
          fc
            .constantFrom(...(names.length > 0 ? names : ["x"]))
            .map((name) => ({ type: "function", function: { name } })),
        ),
        { nil: undefined },
      ),
      parallel: fc.option(fc.boolean(), { nil: undefined }),
      extras: fc.record(
        {
          seed: fc.integer(),
          presence_penalty: unit,
          store: fc.boolean(),
          n: fc.constant(1),
          logprobs: fc.constant(false),
        },
        { requiredKeys: [] },
      ),
      schemas: fc.array(schema, { minLength: 1, maxLength: 3 }),
    })
    .map(({ system, first, rest, common, limit, stop, choice, parallel, extras, schemas }) => {
      const body: Json = {
        model: "gpt-client",
        messages: [...system, first, ...rest.flat()],
        ...common,
        ...extras,
      }
      if (limit !== undefined) body[limit[0]] = limit[1]
      if (stop !== undefined) body["stop"] = stop
      if (names.length > 0) {
        body["tools"] = names.map((name, i) => ({
          type: "function",
          function: { name, description: `does ${name}`, parameters: schemas[i % schemas.length] },
        }))
        if (choice !== undefined) body["tool_choice"] = choice
        if (parallel !== undefined) body["parallel_tool_calls"] = parallel
      }
      if (body["stream"] === true) body["stream_options"] = { include_usage: false }
      return body
    }),
)
