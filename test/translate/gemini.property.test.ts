import Anthropic from "@anthropic-ai/sdk"
import * as fc from "fast-check"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { InvalidRequest } from "../../src/domain/errors.js"
import { chatToGemini, GeminiToChatStream } from "../../src/translate/gemini/index.js"
import { ChatToMessagesStream } from "../../src/translate/stream/chatToMessages.js"
import { chatRequestArb } from "./requests/chat.js"
import { chunked } from "./upstream.js"

type Json = Record<string, any>

/** What a Gemini stream says: parts in order, how it ends, the final usage. */
type Part =
  { kind: "text"; text: string } | { kind: "call"; name: string; args: Json; signature: string | undefined }
interface GeminiScript {
  readonly events: ReadonlyArray<ReadonlyArray<Part>>
  readonly finish: string
  readonly usage: { prompt: number; cached: number; candidates: number; thoughts: number }
}

const textPart = fc
  .string({
    unit: fc.constantFrom(...'abcXYZ019 _-\n"\\é世🌍{}'.split(/(?:)/u)),
    minLength: 1,
    maxLength: 12,
  })
  .map((text): Part => ({ kind: "text", text }))
const callPart = fc
  .record({
    name: fc.stringMatching(/^[a-z][a-z_]{0,12}$/),
    args: fc.dictionary(
      fc.stringMatching(/^[a-z]{1,6}$/),
      fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()),
      {
        maxKeys: 3,
      },
    ),
    signature: fc.option(fc.base64String({ minLength: 4, maxLength: 40 }), { nil: undefined }),
  })
  .map(({ name, args, signature }): Part => ({ kind: "call", name, args, signature }))

const scriptArb: fc.Arbitrary<GeminiScript> = fc
  .record({
    events: fc.array(
      fc.array(fc.oneof({ weight: 3, arbitrary: textPart }, { weight: 1, arbitrary: callPart }), {
        maxLength: 3,
      }),
      {
        minLength: 1,
        maxLength: 6,
      },
    ),
    finish: fc.constantFrom("STOP", "STOP", "MAX_TOKENS", "SAFETY", "OTHER"),
    prompt: fc.nat(5000),
    cachedShare: fc.nat(100),
    candidates: fc.nat(2000),
    thoughts: fc.nat(2000),
  })
  .map(({ events, finish, prompt, cachedShare, candidates, thoughts }) => ({
    events,
    finish,
    usage: { prompt, cached: Math.floor((prompt * cachedShare) / 100), candidates, thoughts },
  }))

/** The script as Gemini writes it: one response per event (usage in every one), a thought first, CRLF CRLF. */
const geminiSse = (script: GeminiScript): string => {
  const u = script.usage
  const usageMetadata = (share: number) => ({
    promptTokenCount: u.prompt,
    cachedContentTokenCount: u.cached,
    candidatesTokenCount: Math.floor(u.candidates * share),
    thoughtsTokenCount: u.thoughts,
    totalTokenCount: u.prompt + Math.floor(u.candidates * share) + u.thoughts,
  })
  const events = script.events.map((parts, i) => {
    const last = i === script.events.length - 1
    const geminiParts: Array<Json> = parts.map((p) =>
      p.kind === "text"
        ? { text: p.text }
        : {
            functionCall: { name: p.name, args: p.args },
            ...(p.signature !== undefined ? { thoughtSignature: p.signature } : {}),
          },
    )
    if (i === 0) geminiParts.unshift({ text: "pondering", thought: true })
    const candidate: Json = { content: { role: "model", parts: geminiParts }, index: 0 }
    if (last) candidate["finishReason"] = script.finish
    return {
      candidates: [candidate],
      usageMetadata: usageMetadata(last ? 1 : i / script.events.length),
      responseId: "rid",
    }
  })
  return events.map((e) => `data: ${JSON.stringify(e)}\r\n\r\n`).join("")
}

const parts = (script: GeminiScript) => script.events.flat()
const textOf = (script: GeminiScript) =>
  parts(script)
    .map((p) => (p.kind === "text" ? p.text : ""))
    .join("")
const callsOf = (script: GeminiScript) =>
  parts(script).flatMap((p) => (p.kind === "call" ? [{ name: p.name, args: p.args }] : []))
const signaturesOf = (script: GeminiScript) =>
  parts(script).flatMap((p) => (p.kind === "call" ? [p.signature] : []))

/** The thought signature a call id carries back to Gemini, as the request translation reads it. */
const signatureSentBack = (id: string, name: string): unknown => {
  const body = chatToGemini({
    messages: [
      { role: "user", content: "hi" },
      { role: "assistant", tool_calls: [{ id, type: "function", function: { name, arguments: "{}" } }] },
      { role: "tool", tool_call_id: id, content: "ok" },
    ],
  }) as Json
  return body["contents"][1]["parts"][0]["thoughtSignature"]
}
const finishOf = (script: GeminiScript) =>
  script.finish === "MAX_TOKENS"
    ? "length"
    : script.finish === "SAFETY"
      ? "content_filter"
      : script.finish === "STOP" && callsOf(script).length > 0
        ? "tool_calls"
        : "stop"

/** A stream translator: bytes in, bytes out (undefined when it has nothing yet). */
interface Translator {
  push(chunk: Buffer): Buffer | undefined
  end(): Buffer | undefined
}

/** The pieces `translator` returns for `upstream` cut at `points`, then at its end. */
const run = (translator: Translator, upstream: ReadonlyArray<Buffer>): Array<Buffer> => {
  const out: Array<Buffer> = []
  for (const chunk of upstream) {
    const piece = translator.push(chunk)
    if (piece !== undefined) out.push(piece)
  }
  const last = translator.end()
  if (last !== undefined) out.push(last)
  return out
}

/** The translated pieces, as the translator returned them for the upstream cut at `points`. */
const translatedPieces = (upstream: string, points: ReadonlyArray<number>): Array<Buffer> =>
  run(new GeminiToChatStream("client-model"), chunked(Buffer.from(upstream, "utf8"), points))

/** A fetch whose every request is answered with `pieces` as an SSE stream. */
const serving = (pieces: ReadonlyArray<Uint8Array>) => async (): Promise<Response> =>
  new Response(
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const piece of pieces) controller.enqueue(piece)
        controller.close()
      },
    }),
    { status: 200, headers: { "content-type": "text/event-stream" } },
  )

/** An OpenAI client whose every request is answered with `pieces` as an SSE stream. */
const clientServing = (pieces: ReadonlyArray<Uint8Array>) =>
  new OpenAI({ apiKey: "k", baseURL: "http://gemini.invalid/v1", maxRetries: 0, fetch: serving(pieces) })

describe("Gemini streams → Chat Completions streams, parsed by the OpenAI SDK", () => {
  it("yield exactly the text, tool calls, finish reason and usage of the Gemini stream", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb, fc.array(fc.nat(4000), { maxLength: 12 }), async (script, points) => {
        const client = clientServing(translatedPieces(geminiSse(script), points))
        const completion = await client.chat.completions
          .stream({
            model: "client-model",
            messages: [{ role: "user", content: "hi" }],
            stream_options: { include_usage: true },
          })
          .finalChatCompletion()
        const choice = completion.choices[0]!
        expect(choice.message.content ?? "").toBe(textOf(script))
        const calls = (choice.message.tool_calls ?? []).map((c) => {
          if (c.type !== "function") throw new Error(`unexpected tool call type ${c.type}`)
          expect(c.id).toMatch(/^call_[A-Za-z0-9_-]+$/)
          return { name: c.function.name, args: JSON.parse(c.function.arguments) }
        })
        expect(calls).toEqual(callsOf(script))
        // Each call's thought signature goes back to Gemini with the id the client echoes.
        expect(
          (choice.message.tool_calls ?? []).map((c) =>
            c.type === "function" ? signatureSentBack(c.id, c.function.name) : undefined,
          ),
        ).toEqual(signaturesOf(script))
        expect(choice.finish_reason).toBe(finishOf(script))
        expect(completion.id).toBe("chatcmpl-rid")
        const u = script.usage
        expect(completion.usage).toEqual({
          prompt_tokens: u.prompt,
          completion_tokens: u.candidates + u.thoughts,
          total_tokens: u.prompt + u.candidates + u.thoughts,
          prompt_tokens_details: { cached_tokens: u.cached },
          completion_tokens_details: { reasoning_tokens: u.thoughts },
        })
      }),
      { numRuns: 60 },
    )
  })
})

describe("Gemini streams → Anthropic streams (a translating Messages route), parsed by the Anthropic SDK", () => {
  const STOP: Record<string, string> = {
    stop: "end_turn",
    length: "max_tokens",
    tool_calls: "tool_use",
    content_filter: "refusal",
  }
  it("yield exactly the text, tool_use blocks, stop reason and usage of the Gemini stream", async () => {
    await fc.assert(
      fc.asyncProperty(scriptArb, fc.array(fc.nat(4000), { maxLength: 12 }), async (script, points) => {
        // As the gateway runs it: Gemini → Chat at the transport, Chat → Messages in the translation layer.
        const chat = translatedPieces(geminiSse(script), points)
        const messages = run(new ChatToMessagesStream("client-model"), chat)
        const client = new Anthropic({
          apiKey: "k",
          baseURL: "http://gemini.invalid",
          maxRetries: 0,
          fetch: serving(messages),
        })
        const message = await client.messages
          .stream({ model: "client-model", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
          .finalMessage()
        const text = message.content.map((b) => (b.type === "text" ? b.text : "")).join("")
        expect(text).toBe(textOf(script))
        const uses = message.content.flatMap((b) => (b.type === "tool_use" ? [b] : []))
        expect(uses.map((b) => ({ name: b.name, args: b.input }))).toEqual(callsOf(script))
        for (const b of uses) expect(b.id).toMatch(/^[A-Za-z0-9_-]+$/)
        expect(uses.map((b) => signatureSentBack(b.id, b.name))).toEqual(signaturesOf(script))
        // As the Chat → Messages translation does: a turn that ended normally with tool calls is tool_use.
        const stop = STOP[finishOf(script)]
        expect(message.stop_reason).toBe(stop === "end_turn" && uses.length > 0 ? "tool_use" : stop)
        const u = script.usage
        expect(message.usage).toMatchObject({
          input_tokens: u.prompt - u.cached,
          output_tokens: u.candidates + u.thoughts,
          cache_read_input_tokens: u.cached,
        })
      }),
      { numRuns: 60 },
    )
  })
})

/** The parts of a Chat request in the order a Gemini body must hold them: [role, part]. */
const expectedTurnParts = (messages: ReadonlyArray<Json>): Array<[string, Json]> => {
  const names = new Map<string, string>()
  const out: Array<[string, Json]> = []
  const texts = (content: unknown): Array<string> =>
    typeof content === "string"
      ? [content]
      : Array.isArray(content)
        ? content.filter((p: Json) => p["type"] === "text").map((p: Json) => p["text"])
        : []
  for (const m of messages) {
    if (m["role"] === "user") {
      const content = typeof m["content"] === "string" ? [{ type: "text", text: m["content"] }] : m["content"]
      for (const p of content as Array<Json>)
        if (p["type"] === "text" && p["text"] !== "") out.push(["user", { text: p["text"] }])
        else if (p["type"] === "image_url") {
          const [head, data] = (p["image_url"]["url"] as string).split(",")
          out.push(["user", { inlineData: { mimeType: head!.slice(5, head!.indexOf(";")), data } }])
        }
    } else if (m["role"] === "assistant") {
      for (const text of texts(m["content"])) if (text !== "") out.push(["model", { text }])
      for (const c of m["tool_calls"] ?? []) {
        names.set(c["id"], c["function"]["name"])
        out.push([
          "model",
          { functionCall: { name: c["function"]["name"], args: JSON.parse(c["function"]["arguments"]) } },
        ])
      }
    } else if (m["role"] === "tool") {
      const text = texts(m["content"]).join("")
      let response: Json = { content: text }
      try {
        const parsed = JSON.parse(text)
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) response = parsed
      } catch {
        // text
      }
      out.push(["user", { functionResponse: { name: names.get(m["tool_call_id"]), response } }])
    }
  }
  return out
}

/** The first image of the request that is a link, as the field a refusal must name. */
const firstLink = (messages: ReadonlyArray<Json>): string | undefined => {
  for (let i = 0; i < messages.length; i++) {
    const content = messages[i]!["content"]
    if (messages[i]!["role"] !== "user" || !Array.isArray(content)) continue
    for (let j = 0; j < content.length; j++)
      if (content[j]["type"] === "image_url" && !String(content[j]["image_url"]["url"]).startsWith("data:"))
        return `messages[${i}].content[${j}].image_url`
  }
  return undefined
}

/** A top-level field Gemini has no form for (or that is unknown), with a value that must be refused. */
const refusedField = fc.constantFrom<readonly [string, unknown]>(
  ["n", 2],
  ["logprobs", true],
  ["top_logprobs", 3],
  ["logit_bias", { "50256": -100 }],
  ["audio", { voice: "alloy", format: "mp3" }],
  ["modalities", ["text", "audio"]],
  ["prediction", { type: "content", content: "x" }],
  ["web_search_options", {}],
  ["verbosity", "low"],
  ["functions", [{ name: "f" }]],
)

describe("Chat Completions requests → Gemini requests", () => {
  it("refuse naming the field, or hold the same system texts, turns, parts, tools and limits", () => {
    fc.assert(
      fc.property(
        chatRequestArb,
        fc.option(refusedField, { nil: undefined, freq: 4 }),
        (request: Json, extra) => {
          const body: Json = extra === undefined ? request : { ...request, [extra[0]]: extra[1] }
          const out = chatToGemini(body)
          if (extra !== undefined) {
            expect(out).toBeInstanceOf(InvalidRequest)
            expect((out as InvalidRequest).message.startsWith(`${extra[0]}: `)).toBe(true)
            return
          }
          const messages: Array<Json> = body["messages"]
          const link = firstLink(messages)
          if (link !== undefined) {
            expect(out).toBeInstanceOf(InvalidRequest)
            expect((out as InvalidRequest).message.startsWith(`${link}: `)).toBe(true)
            return
          }
          if (out instanceof InvalidRequest) throw new Error(`refused: ${out.message}`)
          const system = messages
            .filter((m) => m["role"] === "system" || m["role"] === "developer")
            .flatMap((m) =>
              typeof m["content"] === "string" ? [m["content"]] : m["content"].map((p: Json) => p["text"]),
            )
          expect((out["systemInstruction"] as Json | undefined)?.["parts"] ?? []).toEqual(
            system.map((text) => ({ text })),
          )
          const contents = out["contents"] as Array<Json>
          for (const c of contents) {
            expect(["user", "model"]).toContain(c["role"])
            expect(c["parts"].length).toBeGreaterThan(0)
          }
          const got = contents.flatMap((c) => c["parts"].map((p: Json) => [c["role"], p]))
          expect(got).toEqual(expectedTurnParts(messages))
          // Consecutive tool results share one turn.
          const isResults = (c: Json) => c["parts"].every((p: Json) => p["functionResponse"] !== undefined)
          for (let k = 1; k < contents.length; k++)
            expect(isResults(contents[k]!) && isResults(contents[k - 1]!)).toBe(false)
          const config = (out["generationConfig"] ?? {}) as Json
          expect(config["maxOutputTokens"]).toBe(body["max_completion_tokens"] ?? body["max_tokens"])
          expect(config["temperature"]).toBe(body["temperature"])
          expect(config["topP"]).toBe(body["top_p"])
          expect(config["seed"]).toBe(body["seed"])
          const tools: Array<Json> = body["tools"] ?? []
          expect(
            ((out["tools"] as Array<Json> | undefined)?.[0]?.["functionDeclarations"] ?? []).map(
              (d: Json) => d["name"],
            ),
          ).toEqual(tools.map((t) => t["function"]["name"]))
        },
      ),
      { numRuns: 200 },
    )
  })
})
