import * as fc from "fast-check"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { MODEL, useLocalServer } from "./server.js"
import {
  anthropicJson,
  anthropicSse,
  expectedTools,
  openaiPrompt,
  scriptArb,
  textOf,
  type Script,
} from "./upstream.js"

const { openai, serveStream, serveJson } = useLocalServer()
const RUNS = { numRuns: 40 }
const points = fc.array(fc.nat(4000), { maxLength: 12 })

describe("Anthropic upstream → Responses client, parsed by the OpenAI SDK", () => {
  const STATUS = {
    end_turn: "completed",
    stop_sequence: "completed",
    max_tokens: "incomplete",
    tool_use: "completed",
  }
  const calls = (output: ReadonlyArray<{ type: string }>) =>
    output
      .filter(
        (item): item is { type: "function_call"; call_id: string; name: string; arguments: string } =>
          item.type === "function_call",
      )
      .map((item) => ({ id: item.call_id, name: item.name, input: JSON.parse(item.arguments) }))

  const expectResponse = (response: OpenAI.Responses.Response, script: Script) => {
    expect(response.output_text).toBe(textOf(script))
    expect(calls(response.output)).toEqual(expectedTools(script))
    expect(response.status).toBe(STATUS[script.stop])
    if (script.stop === "max_tokens")
      expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" })
    expect(response.id).toMatch(/^resp_/)
    expect(response.model).toBe(MODEL)
    expect(response.usage).toMatchObject({
      input_tokens: openaiPrompt(script.usage),
      input_tokens_details: { cached_tokens: script.usage.cacheRead },
      output_tokens: script.usage.output,
      total_tokens: openaiPrompt(script.usage) + script.usage.output,
    })
  }

  it("streams the same text, function calls, status and translated usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: true }), points, async (script, cuts) => {
        serveStream("/v1/messages", "/v1/responses", anthropicSse(script), cuts)
        const response = await openai().responses.stream({ model: MODEL, input: "hi" }).finalResponse()
        expectResponse(response, script)
      }),
      RUNS,
    )
  })

  it("answers a JSON request with the same text, function calls, status and translated usage", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb({ cacheWrite: true }), async (script) => {
        serveJson("/v1/messages", "/v1/responses", anthropicJson(script))
        const response = await openai().responses.create({ model: MODEL, input: "hi" })
        expectResponse(response, script)
      }),
      RUNS,
    )
  })

  const anthropicError =
    `event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n` +
    `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`

  it("passes an in-band error to the OpenAI SDK as an APIError", async () => {
    serveStream("/v1/messages", "/v1/responses", anthropicError, [])
    const error = await openai()
      .responses.stream({ model: MODEL, input: "hi" })
      .finalResponse()
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect((error as InstanceType<typeof OpenAI.APIError>).message).toMatch(/Overloaded/)
  })
})
