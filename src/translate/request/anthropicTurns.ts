/**
 * Builds the `messages` of an Anthropic request from the turns of another
 * format. Anthropic wants strictly alternating `user` / `assistant` turns
 * that start with a user turn, `tool_result` blocks first in their user turn,
 * each answering a `tool_use` of the assistant turn just before, every call
 * answered by the turn after it, and no trailing whitespace at the end of a
 * final (prefilled) assistant turn. Chat and Responses allow consecutive
 * same-role messages, a tool result per message, results after other content
 * and an assistant greeting first. So same-role neighbours merge into one
 * turn, and what has no Anthropic form is refused here, naming the client's
 * field, instead of costing an upstream 400.
 */
import type { InvalidRequest } from "../../domain/errors.js"
import { anthropicToolId } from "../ids.js"
import { isString, parseArguments, refuse, type Json } from "../wire.js"

type Role = "user" | "assistant"

interface Turn {
  readonly role: Role
  content: Array<Json>
}

/**
 * The user turn put before a conversation that starts with the assistant (Anthropic requires a user turn
 * first).
 */
export const OPENING_TURN: Json = { role: "user", content: [{ type: "text", text: "." }] }

/** An Anthropic text block. */
export const textBlock = (text: string): Json => ({ type: "text", text })

/** A function call as Chat (`tool_calls[]`) and Responses (`function_call` items) give it, or where. */
export interface FunctionCall<T> {
  readonly id: T
  readonly name: T
  readonly arguments: T
}

/** A `tool_result` block; no `content` for an empty result (a blank text block is refused). */
export const toolResult = (id: string, content: string | ReadonlyArray<Json>): Json =>
  content.length === 0
    ? { type: "tool_result", tool_use_id: id }
    : { type: "tool_result", tool_use_id: id, content }

/** A mutable builder: add blocks in conversation order, then `finish`. */
export class AnthropicTurns {
  private readonly turns: Array<Turn> = []
  /** The client's field of each tool_use and tool_result block, for a refusal. */
  private readonly fields = new Map<Json, string>()

  /** `field`: what a refusal of an empty conversation names (`messages`, `input`). */
  constructor(private readonly field: string) {}

  /** Appends blocks to the conversation; nothing for no blocks (an empty message has no Anthropic form). */
  add(role: Role, blocks: ReadonlyArray<Json>): void {
    if (blocks.length === 0) return
    const last = this.turns[this.turns.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...blocks)
    else this.turns.push({ role, content: [...blocks] })
  }

  /** Names the client's field of a `tool_use` or `tool_result` block (its call id), for a refusal. */
  label(block: Json, field: string): void {
    this.fields.set(block, field)
  }

  /**
   * The `tool_use` block of a function call, labelled with its id's field; refused (naming the field in
   * `fields`) when its id or name is not a non-empty string or its arguments are not a JSON object.
   */
  toolUse(call: FunctionCall<unknown>, fields: FunctionCall<string>): Json | InvalidRequest {
    if (!isString(call.id) || call.id === "") return refuse(fields.id, "must be a non-empty string")
    if (!isString(call.name) || call.name === "") return refuse(fields.name, "must be a non-empty string")
    const input = parseArguments(call.arguments)
    if (input === undefined) return refuse(fields.arguments, "must be a JSON object")
    const block = { type: "tool_use", id: anthropicToolId(call.id), name: call.name, input }
    this.label(block, fields.id)
    return block
  }

  /**
   * Appends a `tool_result` block to the user side; `field` names the result's call id in the client's
   * request.
   */
  addToolResult(block: Json, field: string): void {
    this.label(block, field)
    this.add("user", [block])
  }

  /**
   * The alternating turns; refused when there are none, when a tool result
   * answers no call of the turn before, or when a call is not answered by the
   * turn after it.
   */
  finish(): Array<Json> | InvalidRequest {
    this.trimPrefill()
    if (this.turns.length === 0) return refuse(this.field, "there is no user or assistant message to send")
    const messages: Array<Json> = this.turns[0]?.role === "assistant" ? [OPENING_TURN] : []
    for (let i = 0; i < this.turns.length; i++) {
      const turn = this.turns[i] as Turn
      if (turn.role === "assistant") {
        const unanswered = this.unanswered(turn, this.turns[i + 1])
        if (unanswered !== undefined)
          return refuse(
            this.fields.get(unanswered) ?? this.field,
            "this tool call has no result right after it (each call needs one before the conversation goes on)",
          )
        messages.push({ role: "assistant", content: turn.content })
        continue
      }
      const results = turn.content.filter((block) => block["type"] === "tool_result")
      const previous = this.turns[i - 1]
      const calls = new Set<string>()
      if (previous !== undefined)
        for (const block of previous.content)
          if (block["type"] === "tool_use" && isString(block["id"])) calls.add(block["id"])
      for (const result of results)
        if (!calls.has(result["tool_use_id"] as string))
          return refuse(
            this.fields.get(result) ?? this.field,
            "answers no tool call of the assistant message just before it",
          )
      const others = turn.content.filter((block) => block["type"] !== "tool_result")
      messages.push({ role: "user", content: results.length === 0 ? others : [...results, ...others] })
    }
    return messages
  }

  /** The first tool_use of `turn` that `next` does not answer (none when there is no next turn). */
  private unanswered(turn: Turn, next: Turn | undefined): Json | undefined {
    if (next === undefined) return undefined
    const answered = new Set(next.content.map((block) => block["tool_use_id"]))
    return turn.content.find((block) => block["type"] === "tool_use" && !answered.has(block["id"]))
  }

  /** A final assistant turn is a prefill, which Anthropic refuses with trailing whitespace: trim its end. */
  private trimPrefill(): void {
    const last = this.turns[this.turns.length - 1]
    if (last === undefined || last.role !== "assistant") return
    const block = last.content[last.content.length - 1]
    if (block === undefined || block["type"] !== "text" || !isString(block["text"])) return
    const text = block["text"].trimEnd()
    if (text !== "") last.content[last.content.length - 1] = { ...block, text }
    else if (last.content.length > 1) last.content = last.content.slice(0, -1)
    else this.turns.pop()
  }
}
