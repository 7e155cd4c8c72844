/** Helpers of the request translator tests: translate a client request and read the result or the refusal. */
import { expect } from "vitest"
import { InvalidRequest } from "../../src/domain/errors.js"
import { translateRequest, type Wire } from "../../src/translate/index.js"

export type Json = Record<string, unknown>

/**
 * `ok`: the translation of a `from` request to `to` for upstream model `model` (throws on a refusal);
 * `refusal`: the message of its refusal (expects one).
 */
export const requestTranslator = (from: Wire, to: Wire, model: string) => {
  const translate = (body: Json) => translateRequest(from, to, body, model)
  const ok = (body: Json) => {
    const out = translate(body)
    if (out instanceof InvalidRequest) throw new Error(out.message)
    return out
  }
  const refusal = (body: Json) => {
    const out = translate(body)
    expect(out).toBeInstanceOf(InvalidRequest)
    return (out as InvalidRequest).message
  }
  return { ok, refusal }
}
