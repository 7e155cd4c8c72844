/**
 * What every part of the translation layer shares: the three wire formats,
 * the JSON guards, and how a refusal reads.
 */
import { InvalidRequest } from "../domain/errors.js"

/** The client and upstream formats the translation layer speaks, by endpoint path. */
export type Wire = "/v1/messages" | "/v1/chat/completions" | "/v1/responses"

/** A parsed JSON object. */
export type Json = Record<string, unknown>

export const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const isString = (value: unknown): value is string => typeof value === "string"

/** Empty or whitespace only: Anthropic refuses such a text block. */
export const isBlank = (text: string): boolean => text.trim() === ""

/** Absent: undefined or null (JSON null means "not given" in every field we read). */
export const absent = (value: unknown): value is undefined | null => value === undefined || value === null

/** True for a refusal (the error branch of the translators' results). */
export const isRefusal = (value: unknown): value is InvalidRequest => value instanceof InvalidRequest

/** A refusal whose message starts with the field it is about (`tools[2].type: …`). */
export const refuse = (field: string, why: string): InvalidRequest =>
  new InvalidRequest({ message: `${field}: ${why}` })

/** The refusal of a client/upstream pair the layer does not translate. */
export const unsupportedPair = (from: Wire, to: Wire): InvalidRequest =>
  new InvalidRequest({ message: `a ${from} request cannot be translated to ${to}` })

/** Parses a JSON body; undefined when it is not JSON or not an object. */
export const parseObject = (body: Uint8Array | string): Json | undefined => {
  try {
    const parsed: unknown = JSON.parse(
      typeof body === "string"
        ? body
        : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8"),
    )
    return isObject(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

/** JSON text of `value` as a Buffer. */
export const jsonBuffer = (value: unknown): Buffer => Buffer.from(JSON.stringify(value), "utf8")

/**
 * Parses a tool call's `arguments` string into the object Anthropic's `input` must be; undefined when it is
 * not one.
 */
export const parseArguments = (args: unknown): Json | undefined => {
  if (!isString(args)) return undefined
  if (args.trim() === "") return {}
  try {
    const parsed: unknown = JSON.parse(args)
    return isObject(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}
