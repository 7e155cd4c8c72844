import Anthropic from "@anthropic-ai/sdk"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { translateErrorBody } from "../../src/translate/index.js"
import { MODEL, useLocalServer } from "./server.js"
import { chatJson, chatSse, expectedTools, scriptArb, textOf } from "./upstream.js"

const { anthropic, serveStream, serveJson, serveError } = useLocalServer()
const RUNS = { numRuns: 40 }
const points = fc.array(fc.nat(4000), { maxLength: 12 })

describe("Chat Completions upstream → Anthropic client, parsed by the Anthropic SDK", () => {
  const STOP = {
    end_turn: "end_turn",
    stop_sequence: "end_turn",
    max_tokens: "max_tokens",
    tool_use: "tool_use",
  }
  const anthropicText = (content: ReadonlyArray<{ type: string; text?: string }>) =>
    content.map((b) => (b.type === "text" ? b.text : "")).join("")
  const anthropicTools = (
    content: ReadonlyArray<{ type: string; id?: string; name?: string; input?: unknown }>,
  ) => content.filter((b) => b.type === "tool_use").map((b) => ({ id: b.id, name: b.name, input: b.input }))

  it("streams the same text, tool calls, stop reason and translated usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: false }), points, async (script, cuts) => {
        serveStream("/v1/chat/completions", "/v1/messages", chatSse(script), cuts)
        const message = await anthropic()
          .messages.stream({ model: MODEL, max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
          .finalMessage()
        expect(anthropicText(message.content)).toBe(textOf(script))
        expect(anthropicTools(message.content)).toEqual(expectedTools(script))
        expect(message.stop_reason).toBe(STOP[script.stop])
        expect(message.model).toBe(MODEL)
        expect(message.usage).toMatchObject({
          input_tokens: script.usage.input,
          output_tokens: script.usage.output,
          cache_read_input_tokens: script.usage.cacheRead,
          cache_creation_input_tokens: 0,
        })
      }),
      RUNS,
    )
  })

  it("answers a JSON request with the same text, tool calls and translated usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: false }), async (script) => {
        serveJson("/v1/chat/completions", "/v1/messages", chatJson(script))
        const message = await anthropic().messages.create({
          model: MODEL,
          max_tokens: 100,
          messages: [{ role: "user", content: "hi" }],
        })
        expect(anthropicText(message.content)).toBe(textOf(script))
        expect(anthropicTools(message.content)).toEqual(expectedTools(script))
        expect(message.stop_reason).toBe(STOP[script.stop])
        expect(message.id).toMatch(/^msg_/)
        expect(message.usage).toMatchObject({
          input_tokens: script.usage.input,
          output_tokens: script.usage.output,
          cache_read_input_tokens: script.usage.cacheRead,
        })
      }),
      RUNS,
    )
  })

  it("passes an in-band error to the Anthropic SDK as an APIError", async () => {
    const chat = `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\ndata: {"error":{"message":"Rate limited","type":"rate_limit_error","code":null}}\n\n`
    serveStream("/v1/chat/completions", "/v1/messages", chat, [])
    const error = await anthropic()
      .messages.stream({ model: MODEL, max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
      .finalMessage()
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe("rate_limit_error")
  })

  it("passes an error body to the Anthropic SDK as an APIError with its status, type and message", async () => {
    const body = translateErrorBody(
      "/v1/chat/completions",
      "/v1/messages",
      400,
      Buffer.from(
        '{"error":{"message":"bad tools","type":"invalid_request_error","param":"tools","code":null}}',
      ),
    )
    serveError(400, body)
    const error = await anthropic()
      .messages.create({ model: MODEL, max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    const apiError = error as InstanceType<typeof Anthropic.APIError>
    expect(apiError.type).toBe("invalid_request_error")
    expect(apiError.message).toMatch(/bad tools/)
  })
})
