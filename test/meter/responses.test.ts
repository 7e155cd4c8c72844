import { describe, expect, it } from "vitest"
import { readJsonBody } from "../../src/meter/json.js"
import { makeStreamMeter } from "../../src/meter/stream.js"
import { responsesReport } from "../../src/meter/usage.js"

/** A Responses event in the wire format: `event: <type>` and its JSON. */
const event = (data: { readonly type: string } & Record<string, unknown>): string =>
  `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

const usage = { input_tokens: 120, input_tokens_details: { cached_tokens: 100 }, output_tokens: 7 }
const response = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "resp_abc",
  object: "response",
  status,
  output: [],
  usage: null,
  ...extra,
})

const meterOf = (body: string, chunkSize = body.length) => {
  const meter = makeStreamMeter("/v1/responses")
  const bytes = Buffer.from(body)
  for (let i = 0; i < bytes.length; i += chunkSize) meter.push(bytes.subarray(i, i + chunkSize))
  meter.end()
  return meter
}

const created = event({ type: "response.created", sequence_number: 0, response: response("in_progress") })
const delta = (text: string, n: number) =>
  event({ type: "response.output_text.delta", sequence_number: n, item_id: "msg_1", delta: text })

describe("the Responses stream meter", () => {
  it("takes the usage from response.completed: cached input tokens are cache reads", () => {
    for (const size of [1, 7, 1000]) {
      const meter = meterOf(
        created +
          delta("héllo", 1) +
          event({
            type: "response.completed",
            sequence_number: 2,
            response: response("completed", { usage }),
          }),
        size,
      )
      expect(meter.usage).toEqual({
        inputTokens: 20,
        outputTokens: 7,
        cacheReadTokens: 100,
        cacheWriteTokens: 0,
        reported: true,
      })
      expect(meter.finished).toBe(true)
      expect(meter.contentStarted).toBe(true)
      expect(meter.outputChars).toBe(6)
      expect(meter.responseId).toBe("resp_abc")
      expect(meter.inbandError).toBeUndefined()
    }
  })

  it("response.incomplete ends the stream normally, with its usage", () => {
    const meter = meterOf(
      created +
        event({
          type: "response.incomplete",
          sequence_number: 1,
          response: response("incomplete", { usage }),
        }),
    )
    expect(meter.finished).toBe(true)
    expect(meter.usage.outputTokens).toBe(7)
  })

  it("response.failed before any output is an in-band error with the error's code", () => {
    const meter = meterOf(
      created +
        event({
          type: "response.failed",
          sequence_number: 1,
          response: response("failed", { error: { code: "server_error", message: "boom" } }),
        }),
    )
    expect(meter.contentStarted).toBe(false)
    expect(meter.finished).toBe(false)
    expect(meter.inbandError).toEqual({ type: "server_error", message: "boom" })
  })

  it("an error event is an in-band error named by its code", () => {
    const meter = meterOf(
      created + event({ type: "error", code: "rate_limit_exceeded", message: "slow down" }),
    )
    expect(meter.inbandError).toEqual({ type: "rate_limit_exceeded", message: "slow down" })
  })

  it("a function call item starts the output before its arguments stream", () => {
    const meter = meterOf(
      created +
        event({
          type: "response.output_item.added",
          sequence_number: 1,
          output_index: 0,
          item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: "" },
        }),
    )
    expect(meter.contentStarted).toBe(true)
    const message = meterOf(
      created +
        event({
          type: "response.output_item.added",
          sequence_number: 1,
          output_index: 0,
          item: { type: "message", id: "msg_1", role: "assistant", content: [] },
        }),
    )
    expect(message.contentStarted).toBe(false)
  })

  it("data that is not JSON is a malformed stream", () => {
    expect(meterOf(created + "event: response.output_text.delta\ndata: {oops\n\n").failure).toBe("malformed")
  })
})

describe("Responses usage", () => {
  it("maps input − cached to input tokens and cached to cache reads", () => {
    expect(responsesReport(usage)).toEqual({
      inputTokens: 20,
      outputTokens: 7,
      cacheReadTokens: 100,
      cacheWriteTokens: 0,
    })
    expect(responsesReport({ output_tokens: 3 })).toEqual({
      inputTokens: undefined,
      outputTokens: 3,
      cacheReadTokens: undefined,
      cacheWriteTokens: undefined,
    })
    expect(responsesReport(null)).toBeUndefined()
  })

  it("reads a JSON response's usage and id", () => {
    const body = JSON.stringify(response("completed", { usage }))
    expect(readJsonBody("/v1/responses", body)).toEqual({
      id: "resp_abc",
      usage: { inputTokens: 20, outputTokens: 7, cacheReadTokens: 100, cacheWriteTokens: 0 },
    })
  })

  it("reads an embeddings response's prompt tokens as input tokens", () => {
    const body = JSON.stringify({ object: "list", data: [], usage: { prompt_tokens: 9, total_tokens: 9 } })
    expect(readJsonBody("/v1/embeddings", body).usage).toEqual({
      inputTokens: 9,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    })
  })
})
