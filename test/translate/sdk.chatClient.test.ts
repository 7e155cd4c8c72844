import * as fc from "fast-check"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { translateErrorBody } from "../../src/translate/index.js"
import { MODEL, useLocalServer } from "./server.js"
import {
  anthropicJson,
  anthropicSse,
  expectedTools,
  FINISH,
  openaiPrompt,
  scriptArb,
  textOf,
} from "./upstream.js"

const { openai, serveStream, serveJson, serveError } = useLocalServer()
const RUNS = { numRuns: 40 }
const points = fc.array(fc.nat(4000), { maxLength: 12 })

describe("Anthropic upstream → Chat Completions client, parsed by the OpenAI SDK", () => {
  const chatTools = (
    calls:
      ReadonlyArray<{ id: string; type: string; function?: { name: string; arguments: string } }> | undefined,
  ) =>
    (calls ?? []).map((c) => ({
      id: c.id,
      name: c.function?.name,
      input: JSON.parse(c.function?.arguments ?? ""),
    }))

  it("streams the same text, tool calls, finish reason and translated usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: true }), points, async (script, cuts) => {
        serveStream("/v1/messages", "/v1/chat/completions", anthropicSse(script), cuts)
        const completion = await openai()
          .chat.completions.stream({
            model: MODEL,
            messages: [{ role: "user", content: "hi" }],
            stream_options: { include_usage: true },
          })
          .finalChatCompletion()
        const choice = completion.choices[0]!
        expect(choice.message.content ?? "").toBe(textOf(script))
        expect(chatTools(choice.message.tool_calls as never)).toEqual(expectedTools(script))
        expect(choice.finish_reason).toBe(FINISH[script.stop])
        expect(completion.model).toBe(MODEL)
        expect(completion.usage).toMatchObject({
          prompt_tokens: openaiPrompt(script.usage),
          completion_tokens: script.usage.output,
          total_tokens: openaiPrompt(script.usage) + script.usage.output,
          prompt_tokens_details: { cached_tokens: script.usage.cacheRead },
        })
      }),
      RUNS,
    )
  })

  it("leaves the usage chunk out when the client did not ask for usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: true }), points, async (script, cuts) => {
        serveStream("/v1/messages", "/v1/chat/completions", anthropicSse(script), cuts, false)
        const completion = await openai()
          .chat.completions.stream({ model: MODEL, messages: [{ role: "user", content: "hi" }] })
          .finalChatCompletion()
        expect(completion.usage).toBeUndefined()
        expect(completion.choices[0]!.message.content ?? "").toBe(textOf(script))
      }),
      { numRuns: 10 },
    )
  })

  it("answers a JSON request with the same text, tool calls and translated usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: true }), async (script) => {
        serveJson("/v1/messages", "/v1/chat/completions", anthropicJson(script))
        const completion = await openai().chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "hi" }],
        })
        const choice = completion.choices[0]!
        expect(choice.message.content ?? "").toBe(textOf(script))
        expect(chatTools(choice.message.tool_calls as never)).toEqual(expectedTools(script))
        expect(choice.finish_reason).toBe(FINISH[script.stop])
        expect(completion.id).toMatch(/^chatcmpl-/)
        expect(completion.usage).toMatchObject({
          prompt_tokens: openaiPrompt(script.usage),
          completion_tokens: script.usage.output,
          prompt_tokens_details: { cached_tokens: script.usage.cacheRead },
        })
      }),
      RUNS,
    )
  })

  describe("errors", () => {
    const anthropicError =
      `event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n` +
      `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`

    it("passes an in-band error to the OpenAI SDK as an APIError", async () => {
      serveStream("/v1/messages", "/v1/chat/completions", anthropicError, [])
      const error = await openai()
        .chat.completions.stream({ model: MODEL, messages: [{ role: "user", content: "hi" }] })
        .finalChatCompletion()
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect((error as InstanceType<typeof OpenAI.APIError>).message).toMatch(/Overloaded/)
      expect((error as InstanceType<typeof OpenAI.APIError>).type).toBe("overloaded_error")
    })

    it("passes an error body to the OpenAI SDK as an APIError with its status, type and message", async () => {
      const body = translateErrorBody(
        "/v1/messages",
        "/v1/chat/completions",
        529,
        Buffer.from('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'),
      )
      serveError(529, body)
      const error = await openai()
        .chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      const apiError = error as InstanceType<typeof OpenAI.APIError>
      expect([apiError.status, apiError.type]).toEqual([529, "overloaded_error"])
      expect(apiError.message).toMatch(/Overloaded/)
    })
  })
})
