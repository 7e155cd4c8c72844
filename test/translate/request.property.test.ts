import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { InvalidRequest } from "../../src/domain/errors.js"
import { DEFAULT_MAX_TOKENS, translateRequest } from "../../src/translate/index.js"
import { OPENING_TURN } from "../../src/translate/request/anthropicTurns.js"
import { chatRequestArb } from "./requests/chat.js"
import { messagesRequestArb } from "./requests/messages.js"
import { responsesRequestArb } from "./requests/responses.js"
import { validateAnthropicRequest } from "./validate/anthropicRequest.js"
import { validateChatRequest } from "./validate/chatRequest.js"

type Json = Record<string, any>
const RUNS = { numRuns: 50 }

/** The translation, failing the test with the refusal's message when there is one. */
const translated = (
  from: Parameters<typeof translateRequest>[0],
  to: Parameters<typeof translateRequest>[1],
  body: Json,
) => {
  const out = translateRequest(from, to, body, "upstream-model")
  if (out instanceof InvalidRequest) throw new Error(`refused: ${out.message}`)
  return out as Json
}

const blocks = (content: unknown): Array<Json> =>
  typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content : []

/** Tool calls of an Anthropic request, in order. */
const anthropicCalls = (body: Json) =>
  body["messages"].flatMap((m: Json) =>
    blocks(m["content"])
      .filter((b) => b["type"] === "tool_use")
      .map((b) => ({ id: b["id"], name: b["name"], input: b["input"] })),
  )

/** Texts of an Anthropic request's turns (not inside tool results), in order. */
const anthropicTexts = (body: Json) =>
  body["messages"].flatMap((m: Json) =>
    blocks(m["content"])
      .filter((b) => b["type"] === "text")
      .map((b) => b["text"]),
  )

const anthropicSystem = (body: Json): Array<string> => blocks(body["system"]).map((b) => b["text"])

/** Texts as an Anthropic request can hold them: blank ones dropped, a final prefill's end trimmed. */
const held = (texts: ReadonlyArray<string>) => texts.map((t) => t.trimEnd()).filter((t) => t.trim() !== "")

/** The texts of the translated turns, without the opening user turn added before an assistant greeting. */
const turnTexts = (out: Json, startsWithAssistant: boolean) => {
  const texts = anthropicTexts(out)
  if (startsWithAssistant) expect(out["messages"][0]).toEqual(OPENING_TURN)
  return held(startsWithAssistant ? texts.slice(1) : texts)
}

const partsText = (content: unknown, types: ReadonlyArray<string>): Array<string> =>
  typeof content === "string"
    ? [content]
    : Array.isArray(content)
      ? content.filter((p: Json) => types.includes(p["type"])).map((p: Json) => p["text"])
      : []

describe("Chat Completions requests → Anthropic Messages requests", () => {
  it("are valid Messages requests with the same system prompt, texts, tool calls and limit", () => {
    fc.assert(
      fc.property(chatRequestArb, (body: Json) => {
        const out = translated("/v1/chat/completions", "/v1/messages", body)
        expect(validateAnthropicRequest(out)).toEqual([])
        expect(out["model"]).toBe("upstream-model")
        const messages: Array<Json> = body["messages"]
        const system = messages.filter((m) => m["role"] === "system" || m["role"] === "developer")
        expect(anthropicSystem(out)).toEqual(system.flatMap((m) => partsText(m["content"], ["text"])))
        const turns = messages.filter((m) => m["role"] === "user" || m["role"] === "assistant")
        expect(turnTexts(out, turns[0]!["role"] === "assistant")).toEqual(
          held(turns.flatMap((m) => partsText(m["content"] ?? [], ["text"]))),
        )
        const calls = messages.flatMap((m) => m["tool_calls"] ?? [])
        expect(anthropicCalls(out)).toEqual(
          calls.map((c: Json) => ({
            id: c["id"].replace(/\./g, "_"),
            name: c["function"]["name"],
            input: JSON.parse(c["function"]["arguments"]),
          })),
        )
        expect(out["max_tokens"]).toBe(
          body["max_completion_tokens"] ?? body["max_tokens"] ?? DEFAULT_MAX_TOKENS,
        )
      }),
      RUNS,
    )
  })
})

describe("Anthropic Messages requests → Chat Completions requests", () => {
  it("are valid Chat requests with the same system prompt, texts, tool calls and tool results", () => {
    fc.assert(
      fc.property(messagesRequestArb, (body: Json) => {
        const out = translated("/v1/messages", "/v1/chat/completions", body)
        expect(validateChatRequest(out)).toEqual([])
        const messages: Array<Json> = out["messages"]
        const system = messages
          .filter((m) => m["role"] === "system")
          .flatMap((m) => partsText(m["content"], ["text"]))
        expect(system).toEqual(anthropicSystem(body))
        const userTexts = messages
          .filter((m) => m["role"] === "user" || m["role"] === "assistant")
          .flatMap((m) => partsText(m["content"] ?? [], ["text"]))
        // An assistant turn's text blocks join into one string.
        const expectedTexts = body["messages"].flatMap((m: Json) => {
          const texts = blocks(m["content"])
            .filter((b) => b["type"] === "text")
            .map((b) => b["text"])
          return m["role"] === "assistant" && texts.length > 0 ? [texts.join("")] : texts
        })
        expect(userTexts).toEqual(expectedTexts)
        const calls = messages.flatMap((m) => m["tool_calls"] ?? [])
        expect(
          calls.map((c: Json) => ({
            id: c["id"],
            name: c["function"]["name"],
            input: JSON.parse(c["function"]["arguments"]),
          })),
        ).toEqual(anthropicCalls(body))
        expect(messages.filter((m) => m["role"] === "tool").map((m) => m["tool_call_id"])).toEqual(
          body["messages"].flatMap((m: Json) =>
            blocks(m["content"])
              .filter((b) => b["type"] === "tool_result")
              .map((b) => b["tool_use_id"]),
          ),
        )
        expect(out["max_completion_tokens"]).toBe(body["max_tokens"])
      }),
      RUNS,
    )
  })
})

describe("Responses requests → Anthropic Messages requests", () => {
  it("are valid Messages requests with the same instructions, texts and function calls", () => {
    fc.assert(
      fc.property(responsesRequestArb, (body: Json) => {
        const out = translated("/v1/responses", "/v1/messages", body)
        expect(validateAnthropicRequest(out)).toEqual([])
        const items: Array<Json> =
          typeof body["input"] === "string" ? [{ role: "user", content: body["input"] }] : body["input"]
        const isSystem = (item: Json) => item["role"] === "system" || item["role"] === "developer"
        const system = [
          ...(body["instructions"] === undefined ? [] : [body["instructions"]]),
          ...items.filter(isSystem).map((i) => i["content"]),
        ]
        expect(anthropicSystem(out)).toEqual(system)
        const said = items.filter((i) => i["role"] === "user" || i["role"] === "assistant")
        expect(turnTexts(out, items[0]!["role"] === "assistant")).toEqual(
          held(said.flatMap((i) => partsText(i["content"], ["input_text", "output_text"]))),
        )
        const calls = items.filter((i) => i["type"] === "function_call")
        expect(anthropicCalls(out)).toEqual(
          calls.map((c) => ({
            id: c["call_id"].replace(/\./g, "_"),
            name: c["name"],
            input: JSON.parse(c["arguments"]),
          })),
        )
        expect(out["max_tokens"]).toBe(body["max_output_tokens"] ?? DEFAULT_MAX_TOKENS)
      }),
      RUNS,
    )
  })
})
