/**
 * Upstream answers for the translation tests: a script (text pieces, tool
 * calls, stop reason, usage) written in an upstream's real wire format — an
 * Anthropic or a Chat Completions SSE stream or JSON body — and cut into
 * random chunks.
 */
import * as fc from "fast-check"

export type Part =
  | { readonly kind: "text"; readonly pieces: ReadonlyArray<string> }
  | {
      readonly kind: "tool"
      readonly id: string
      readonly name: string
      readonly input: Record<string, unknown>
      /** The input's JSON text cut into the pieces the stream sends. */
      readonly pieces: ReadonlyArray<string>
    }

export interface Script {
  readonly parts: ReadonlyArray<Part>
  /** Anthropic stop reason. */
  readonly stop: "end_turn" | "max_tokens" | "stop_sequence" | "tool_use"
  readonly usage: {
    readonly input: number
    readonly output: number
    readonly cacheRead: number
    readonly cacheWrite: number
  }
}

export const textOf = (script: Script): string =>
  script.parts.map((part) => (part.kind === "text" ? part.pieces.join("") : "")).join("")

export const toolsOf = (script: Script) =>
  script.parts.flatMap((part) =>
    part.kind === "tool" ? [{ id: part.id, name: part.name, input: part.input }] : [],
  )

/** Splits `text` at random points into non-empty pieces. */
const cut = (text: string, points: ReadonlyArray<number>): Array<string> => {
  const chars = [...text]
  const at = [...new Set(points.map((p) => p % (chars.length + 1)))].filter((p) => p > 0 && p < chars.length)
  at.sort((a, b) => a - b)
  const pieces: Array<string> = []
  let from = 0
  for (const p of [...at, chars.length]) {
    pieces.push(chars.slice(from, p).join(""))
    from = p
  }
  return pieces.filter((piece) => piece !== "")
}

const word = fc.string({
  unit: fc.constantFrom(...'abcXYZ019 _-\n"\\é世🌍{}'.split(/(?:)/u)),
  minLength: 1,
  maxLength: 12,
})

const textPart = fc
  .tuple(fc.array(word, { minLength: 1, maxLength: 4 }), fc.array(fc.nat(40), { maxLength: 4 }))
  .map(([words, points]): Part => ({ kind: "text", pieces: cut(words.join(" "), points) }))

const toolPart = fc
  .record({
    id: fc.stringMatching(/^[A-Za-z0-9]{6,12}$/).map((s) => `toolu_${s}`),
    name: fc.stringMatching(/^[a-z][a-z_]{0,15}$/),
    input: fc.dictionary(
      fc.stringMatching(/^[a-z]{1,6}$/),
      fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()),
      {
        maxKeys: 3,
      },
    ),
    points: fc.array(fc.nat(60), { maxLength: 5 }),
  })
  .map(({ id, name, input, points }): Part => ({
    kind: "tool",
    id,
    name,
    input,
    pieces: cut(JSON.stringify(input), points),
  }))

/** A random upstream answer: text and tool calls, a stop reason that fits them, usage. */
export const scriptArb = (options: { cacheWrite: boolean }): fc.Arbitrary<Script> =>
  fc
    .record({
      parts: fc.array(fc.oneof({ weight: 3, arbitrary: textPart }, { weight: 2, arbitrary: toolPart }), {
        minLength: 1,
        maxLength: 4,
      }),
      limit: fc.boolean(),
      input: fc.nat(5000),
      output: fc.nat(2000),
      cacheRead: fc.nat(5000),
      cacheWrite: options.cacheWrite ? fc.nat(5000) : fc.constant(0),
    })
    .map(({ parts, limit, input, output, cacheRead, cacheWrite }) => {
      // Tool ids are unique within an answer.
      const unique = parts.map((part, i) => (part.kind === "tool" ? { ...part, id: `${part.id}${i}` } : part))
      const hasTool = unique.some((part) => part.kind === "tool")
      const stop: Script["stop"] = hasTool ? "tool_use" : limit ? "max_tokens" : "end_turn"
      return { parts: unique, stop, usage: { input, output, cacheRead, cacheWrite } }
    })

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** The script as an Anthropic Messages SSE stream. */
export const anthropicSse = (script: Script, id = "msg_up1"): string => {
  const u = script.usage
  let out = sse("message_start", {
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model: "claude-up",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: u.input,
        output_tokens: 1,
        cache_read_input_tokens: u.cacheRead,
        cache_creation_input_tokens: u.cacheWrite,
      },
    },
  })
  out += sse("ping", { type: "ping" })
  script.parts.forEach((part, index) => {
    if (part.kind === "text") {
      out += sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" },
      })
      for (const text of part.pieces)
        out += sse("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "text_delta", text },
        })
    } else {
      out += sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: part.id, name: part.name, input: {} },
      })
      for (const partial_json of part.pieces)
        out += sse("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json },
        })
    }
    out += sse("content_block_stop", { type: "content_block_stop", index })
  })
  out += sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: script.stop, stop_sequence: null },
    usage: { output_tokens: u.output },
  })
  out += sse("message_stop", { type: "message_stop" })
  return out
}

/** The script as a Chat Completions SSE stream with the usage chunk (as Tollgate asks upstream for it). */
export const chatSse = (script: Script): string => {
  const head = { id: "chatcmpl-up1", object: "chat.completion.chunk", created: 1, model: "gpt-up" }
  const chunk = (delta: unknown, finish_reason: string | null = null) =>
    `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason }] })}\n\n`
  let out = chunk({ role: "assistant", content: "", refusal: null })
  let tool = 0
  for (const part of script.parts) {
    if (part.kind === "text") for (const content of part.pieces) out += chunk({ content })
    else {
      const index = tool++
      out += chunk({
        tool_calls: [{ index, id: part.id, type: "function", function: { name: part.name, arguments: "" } }],
      })
      for (const args of part.pieces) out += chunk({ tool_calls: [{ index, function: { arguments: args } }] })
    }
  }
  out += chunk({}, FINISH[script.stop])
  const u = script.usage
  const usage = {
    prompt_tokens: u.input + u.cacheRead,
    completion_tokens: u.output,
    total_tokens: u.input + u.cacheRead + u.output,
    prompt_tokens_details: { cached_tokens: u.cacheRead },
  }
  out += `data: ${JSON.stringify({ ...head, choices: [], usage })}\n\n`
  return out + "data: [DONE]\n\n"
}

/** The script as an Anthropic message (JSON). */
export const anthropicJson = (script: Script) => ({
  id: "msg_up1",
  type: "message",
  role: "assistant",
  model: "claude-up",
  content: script.parts.map((part) =>
    part.kind === "text"
      ? { type: "text", text: part.pieces.join("") }
      : { type: "tool_use", id: part.id, name: part.name, input: part.input },
  ),
  stop_reason: script.stop,
  stop_sequence: null,
  usage: {
    input_tokens: script.usage.input,
    output_tokens: script.usage.output,
    cache_read_input_tokens: script.usage.cacheRead,
    cache_creation_input_tokens: script.usage.cacheWrite,
  },
})

/** The script as a Chat completion (JSON). */
export const chatJson = (script: Script) => {
  const text = textOf(script)
  const calls = toolsOf(script).map((t) => ({
    id: t.id,
    type: "function",
    function: { name: t.name, arguments: JSON.stringify(t.input) },
  }))
  const u = script.usage
  return {
    id: "chatcmpl-up1",
    object: "chat.completion",
    created: 1,
    model: "gpt-up",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text === "" ? null : text,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        logprobs: null,
        finish_reason: FINISH[script.stop],
      },
    ],
    usage: {
      prompt_tokens: u.input + u.cacheRead,
      completion_tokens: u.output,
      total_tokens: u.input + u.cacheRead + u.output,
      prompt_tokens_details: { cached_tokens: u.cacheRead },
    },
  }
}

/** `bytes` cut at the given points (any byte offset, inside UTF-8 characters too). */
export const chunked = (bytes: Buffer, points: ReadonlyArray<number>): Array<Buffer> => {
  const at = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<Buffer> = []
  let from = 0
  for (const p of [...at, bytes.length]) {
    chunks.push(bytes.subarray(from, p))
    from = p
  }
  return chunks
}

/** The tool calls a client must see: the script's, by id, name and input. */
export const expectedTools = (script: Script) =>
  toolsOf(script).map((t) => ({ id: t.id, name: t.name, input: t.input }))

/** The prompt tokens an OpenAI-format client must see: every input token, cached or not. */
export const openaiPrompt = (u: Script["usage"]) => u.input + u.cacheRead + u.cacheWrite

/** The Chat finish reason of each script stop reason. */
export const FINISH = {
  end_turn: "stop",
  stop_sequence: "stop",
  max_tokens: "length",
  tool_use: "tool_calls",
} as const
