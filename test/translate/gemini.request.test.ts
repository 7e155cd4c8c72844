import { describe, expect, it } from "vitest"
import { InvalidRequest } from "../../src/domain/errors.js"
import {
  chatToGemini,
  requiresSignatures,
  withPlaceholderSignatures,
} from "../../src/translate/gemini/index.js"

type Json = Record<string, unknown>

const ok = (body: Json): Json => {
  const out = chatToGemini(body)
  if (out instanceof InvalidRequest) throw new Error(out.message)
  return out
}
const refusal = (body: Json): string => {
  const out = chatToGemini(body)
  expect(out).toBeInstanceOf(InvalidRequest)
  return (out as InvalidRequest).message
}
const user = (content: unknown) => ({ role: "user", content })
const base = { model: "gpt-4o", messages: [user("Hi")] }
const call = (id: string, name: string, args: string) => ({
  id,
  type: "function",
  function: { name, arguments: args },
})

describe("chatToGemini: messages", () => {
  it("puts system and developer messages in systemInstruction, in order, and maps user/assistant roles", () => {
    expect(
      ok({
        model: "ignored",
        messages: [
          { role: "system", content: "Be brief." },
          user("Hi"),
          {
            role: "developer",
            content: [
              { type: "text", text: "Use French." },
              { type: "text", text: "Be nice." },
            ],
          },
          { role: "assistant", content: "Salut" },
          user([{ type: "text", text: "Again" }]),
        ],
      }),
    ).toEqual({
      systemInstruction: { parts: [{ text: "Be brief." }, { text: "Use French." }, { text: "Be nice." }] },
      contents: [
        { role: "user", parts: [{ text: "Hi" }] },
        { role: "model", parts: [{ text: "Salut" }] },
        { role: "user", parts: [{ text: "Again" }] },
      ],
    })
  })

  it("keeps consecutive same-role turns apart and drops empty messages", () => {
    expect(ok({ messages: [user("a"), user("b"), user(""), { role: "assistant", content: null }] })).toEqual({
      contents: [
        { role: "user", parts: [{ text: "a" }] },
        { role: "user", parts: [{ text: "b" }] },
      ],
    })
  })

  it("sends data: URL images as inline data", () => {
    const out = ok({
      messages: [
        user([
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0K", detail: "high" } },
          { type: "image_url", image_url: { url: "data:image/jpg;base64,/9j/4AAQ" } },
        ]),
      ],
    })
    expect(out["contents"]).toEqual([
      {
        role: "user",
        parts: [
          { text: "What is this?" },
          { inlineData: { mimeType: "image/png", data: "iVBORw0K" } },
          { inlineData: { mimeType: "image/jpeg", data: "/9j/4AAQ" } },
        ],
      },
    ])
  })

  it("gives Gemini 3 the placeholder signature on the first call of each model turn that has none", () => {
    const body = {
      model: "m",
      messages: [
        user("Hi"),
        { role: "assistant", content: null, tool_calls: [call("c1", "a", "{}"), call("c2", "b", "{}")] },
        { role: "tool", tool_call_id: "c1", content: "1" },
        { role: "tool", tool_call_id: "c2", content: "2" },
        { role: "assistant", content: null, tool_calls: [call("c3__thought__c2ln", "a", "{}")] },
        { role: "tool", tool_call_id: "c3__thought__c2ln", content: "3" },
      ],
    }
    const signed = withPlaceholderSignatures(ok(body)) as {
      contents: Array<{ parts: Array<Json> }>
    }
    expect(signed.contents[1]!.parts).toEqual([
      { functionCall: { name: "a", args: {} }, thoughtSignature: "skip_thought_signature_validator" },
      { functionCall: { name: "b", args: {} } },
    ])
    // A signature that came back in the id is kept, not replaced.
    expect(signed.contents[3]!.parts).toEqual([
      { functionCall: { name: "a", args: {} }, thoughtSignature: "sig" },
    ])
    const plain = ok(body) as { contents: Array<{ parts: Array<Json> }> }
    expect(plain.contents[1]!.parts[0]).toEqual({ functionCall: { name: "a", args: {} } })
    expect(requiresSignatures("gemini-3-pro-preview")).toBe(true)
    expect(requiresSignatures("gemini-2.5-flash")).toBe(false)
    expect(requiresSignatures("claude-sonnet")).toBe(false)
  })

  it("turns tool calls into functionCall parts and tool messages into one user turn of functionResponse parts", () => {
    const out = ok({
      messages: [
        user("Weather in Oslo and Rome?"),
        {
          role: "assistant",
          content: "Checking.",
          tool_calls: [call("c1", "weather", '{"city":"Oslo"}'), call("c2", "lookup", "")],
        },
        { role: "tool", tool_call_id: "c1", content: '{"temp":3}' },
        { role: "tool", tool_call_id: "c2", content: [{ type: "text", text: "sunny" }] },
        { role: "assistant", content: "Done." },
        { role: "tool", tool_call_id: "c2", content: "[1,2]" },
      ],
    })
    expect(out["contents"]).toEqual([
      { role: "user", parts: [{ text: "Weather in Oslo and Rome?" }] },
      {
        role: "model",
        parts: [
          { text: "Checking." },
          { functionCall: { name: "weather", args: { city: "Oslo" } } },
          { functionCall: { name: "lookup", args: {} } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { name: "weather", response: { temp: 3 } } },
          { functionResponse: { name: "lookup", response: { content: "sunny" } } },
        ],
      },
      { role: "model", parts: [{ text: "Done." }] },
      { role: "user", parts: [{ functionResponse: { name: "lookup", response: { content: "[1,2]" } } }] },
    ])
  })

  it("reads assistant refusal parts and the refusal field as text", () => {
    const out = ok({
      messages: [
        user("x"),
        { role: "assistant", content: [{ type: "refusal", refusal: "No." }], refusal: "Sorry." },
      ],
    })
    expect(out["contents"]).toEqual([
      { role: "user", parts: [{ text: "x" }] },
      { role: "model", parts: [{ text: "No." }, { text: "Sorry." }] },
    ])
  })
})

describe("chatToGemini: parameters", () => {
  it("maps the limit, sampling, stop, seed and penalties to generationConfig", () => {
    expect(
      ok({
        ...base,
        max_tokens: 100,
        temperature: 0.5,
        top_p: 0.9,
        stop: "END",
        seed: 7,
        presence_penalty: 0.1,
        frequency_penalty: -0.2,
      })["generationConfig"],
    ).toEqual({
      maxOutputTokens: 100,
      temperature: 0.5,
      topP: 0.9,
      stopSequences: ["END"],
      seed: 7,
      presencePenalty: 0.1,
      frequencyPenalty: -0.2,
    })
    expect(
      ok({ ...base, max_tokens: 5, max_completion_tokens: 50, stop: ["a", "b"] })["generationConfig"],
    ).toEqual({
      maxOutputTokens: 50,
      stopSequences: ["a", "b"],
    })
    expect(ok(base)).toEqual({ contents: [{ role: "user", parts: [{ text: "Hi" }] }] })
  })

  it("maps response_format to responseMimeType and responseJsonSchema", () => {
    expect(ok({ ...base, response_format: { type: "json_object" } })["generationConfig"]).toEqual({
      responseMimeType: "application/json",
    })
    const schema = {
      type: "object",
      properties: { a: { type: "string" } },
      required: ["a"],
      additionalProperties: false,
    }
    expect(
      ok({
        ...base,
        response_format: { type: "json_schema", json_schema: { name: "x", strict: true, schema } },
      })["generationConfig"],
    ).toEqual({ responseMimeType: "application/json", responseJsonSchema: schema })
    expect(ok({ ...base, response_format: { type: "text" } })["generationConfig"]).toBeUndefined()
  })

  it("maps reasoning_effort to a thinking budget", () => {
    const budget = (effort: string) =>
      (ok({ ...base, reasoning_effort: effort })["generationConfig"] as Json)["thinkingConfig"]
    expect(budget("none")).toEqual({ thinkingBudget: 0 })
    expect(budget("minimal")).toEqual({ thinkingBudget: 0 })
    expect(budget("low")).toEqual({ thinkingBudget: 1024 })
    expect(budget("medium")).toEqual({ thinkingBudget: 8192 })
    expect(budget("high")).toEqual({ thinkingBudget: 24576 })
    expect(budget("xhigh")).toEqual({ thinkingBudget: 32768 })
  })

  it("maps function tools to one functionDeclarations entry and tool_choice to functionCallingConfig", () => {
    const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
    const tools = [
      {
        type: "function",
        function: { name: "weather", description: "Gets weather", parameters, strict: true },
      },
      { type: "function", function: { name: "ping" } },
    ]
    const out = ok({ ...base, tools })
    expect(out["tools"]).toEqual([
      {
        functionDeclarations: [
          { name: "weather", description: "Gets weather", parametersJsonSchema: parameters },
          { name: "ping" },
        ],
      },
    ])
    expect(out["toolConfig"]).toBeUndefined()
    const mode = (tool_choice: unknown) => ok({ ...base, tools, tool_choice })["toolConfig"]
    expect(mode("none")).toEqual({ functionCallingConfig: { mode: "NONE" } })
    expect(mode("auto")).toEqual({ functionCallingConfig: { mode: "AUTO" } })
    expect(mode("required")).toEqual({ functionCallingConfig: { mode: "ANY" } })
    expect(mode({ type: "function", function: { name: "weather" } })).toEqual({
      functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["weather"] },
    })
  })

  it("ignores the fields that do not change the answer", () => {
    expect(
      ok({
        ...base,
        stream: true,
        stream_options: { include_usage: true },
        user: "u1",
        store: false,
        metadata: { a: "b" },
        parallel_tool_calls: false,
        service_tier: "auto",
        n: 1,
        logprobs: false,
        top_logprobs: 0,
        logit_bias: {},
        modalities: ["text"],
        prediction: null,
      }),
    ).toEqual({ contents: [{ role: "user", parts: [{ text: "Hi" }] }] })
  })
})

describe("chatToGemini: refusals name the field", () => {
  it("refuses the top-level fields Gemini has no form for", () => {
    expect(refusal({ ...base, n: 2 })).toMatch(/^n: /)
    expect(refusal({ ...base, logprobs: true })).toMatch(/^logprobs: /)
    expect(refusal({ ...base, top_logprobs: 2 })).toMatch(/^top_logprobs: /)
    expect(refusal({ ...base, logit_bias: { "50256": -100 } })).toMatch(/^logit_bias: /)
    expect(refusal({ ...base, audio: { voice: "alloy", format: "mp3" } })).toMatch(/^audio: /)
    expect(refusal({ ...base, modalities: ["text", "audio"] })).toMatch(/^modalities: /)
    expect(refusal({ ...base, prediction: { type: "content", content: "x" } })).toMatch(/^prediction: /)
    expect(refusal({ ...base, web_search_options: {} })).toMatch(/^web_search_options: /)
    expect(refusal({ ...base, functions: [{ name: "f" }] })).toMatch(/^functions: /)
    expect(refusal({ ...base, function_call: "auto" })).toMatch(/^function_call: /)
  })

  it("refuses any unknown top-level field", () => {
    expect(refusal({ ...base, verbosity: "low" })).toMatch(/^verbosity: unknown field/)
    expect(refusal({ ...base, frobnicate: 1 })).toMatch(/^frobnicate: /)
  })

  it("refuses ill-typed parameters", () => {
    expect(refusal({ ...base, max_tokens: 0 })).toMatch(/^max_tokens: /)
    expect(refusal({ ...base, max_completion_tokens: 1.5 })).toMatch(/^max_completion_tokens: /)
    expect(refusal({ ...base, temperature: "hot" })).toMatch(/^temperature: /)
    expect(refusal({ ...base, seed: 2 ** 40 })).toMatch(/^seed: /)
    expect(refusal({ ...base, stop: [1] })).toMatch(/^stop: /)
    expect(refusal({ ...base, response_format: { type: "json_schema", json_schema: {} } })).toMatch(
      /^response_format\.json_schema\.schema: /,
    )
    expect(refusal({ ...base, response_format: { type: "grammar" } })).toMatch(/^response_format\.type: /)
    expect(refusal({ ...base, reasoning_effort: "max" })).toMatch(/^reasoning_effort: /)
  })

  it("refuses non-function tools and tool choices it cannot translate", () => {
    expect(refusal({ ...base, tools: [{ type: "custom", custom: { name: "x" } }] })).toMatch(
      /^tools\[0\]\.type: /,
    )
    expect(refusal({ ...base, tools: [{ type: "function", function: { name: "" } }] })).toMatch(
      /^tools\[0\]\.function\.name: /,
    )
    expect(
      refusal({ ...base, tools: [{ type: "function", function: { name: "f", parameters: "x" } }] }),
    ).toMatch(/^tools\[0\]\.function\.parameters: /)
    expect(
      refusal({
        ...base,
        tools: [{ type: "function", function: { name: "f" } }],
        tool_choice: { type: "allowed_tools", allowed_tools: { mode: "auto", tools: [] } },
      }),
    ).toMatch(/^tool_choice: /)
  })

  it("refuses messages it cannot translate", () => {
    expect(refusal({ messages: [] })).toMatch(/^messages: /)
    expect(refusal({})).toMatch(/^messages: /)
    expect(refusal({ messages: [{ role: "system", content: "only" }] })).toMatch(/^messages: /)
    expect(refusal({ messages: ["hi"] })).toMatch(/^messages\[0\]: /)
    expect(refusal({ messages: [{ role: "robot", content: "x" }] })).toMatch(
      /^messages\[0\]\.role: unknown role/,
    )
    expect(refusal({ messages: [{ role: "function", name: "f", content: "x" }] })).toMatch(
      /^messages\[0\]\.role: /,
    )
    expect(
      refusal({ messages: [user([{ type: "input_audio", input_audio: { data: "", format: "wav" } }])] }),
    ).toMatch(/^messages\[0\]\.content\[0\]\.type: /)
    expect(refusal({ messages: [user([{ type: "file", file: { file_id: "f" } }])] })).toMatch(
      /^messages\[0\]\.content\[0\]\.type: /,
    )
    expect(
      refusal({
        messages: [user("a"), user([{ type: "image_url", image_url: { url: "https://x.example/a.png" } }])],
      }),
    ).toMatch(/^messages\[1\]\.content\[0\]\.image_url: Gemini needs inline data/)
    expect(
      refusal({ messages: [user([{ type: "image_url", image_url: { url: "data:image/png,raw" } }])] }),
    ).toMatch(/^messages\[0\]\.content\[0\]\.image_url: /)
    expect(refusal({ messages: [{ role: "system", content: [{ type: "image_url" }] }, user("x")] })).toMatch(
      /^messages\[0\]\.content\[0\]: /,
    )
  })

  it("refuses tool calls whose arguments are not a JSON object and tool results that answer no call", () => {
    expect(
      refusal({ messages: [user("x"), { role: "assistant", tool_calls: [call("c1", "f", "[1]")] }] }),
    ).toMatch(/^messages\[1\]\.tool_calls\[0\]\.function\.arguments: /)
    expect(
      refusal({ messages: [user("x"), { role: "assistant", tool_calls: [call("c1", "f", "{bad")] }] }),
    ).toMatch(/^messages\[1\]\.tool_calls\[0\]\.function\.arguments: /)
    expect(
      refusal({ messages: [user("x"), { role: "assistant", tool_calls: [{ type: "custom", id: "c1" }] }] }),
    ).toMatch(/^messages\[1\]\.tool_calls\[0\]: /)
    expect(
      refusal({
        messages: [
          user("x"),
          { role: "assistant", tool_calls: [call("c1", "f", "{}")] },
          { role: "tool", tool_call_id: "c9", content: "r" },
        ],
      }),
    ).toMatch(/^messages\[2\]\.tool_call_id: /)
    expect(refusal({ messages: [user("x"), { role: "tool", tool_call_id: "c1", content: "r" }] })).toMatch(
      /^messages\[1\]\.tool_call_id: /,
    )
    expect(
      refusal({ messages: [user("x"), { role: "assistant", content: "a", audio: { id: "a1" } }] }),
    ).toMatch(/^messages\[1\]\.audio: /)
  })
})
