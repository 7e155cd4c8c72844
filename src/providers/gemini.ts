/**
 * Gemini targets (ADR 0071): Google AI Studio (`kind: gemini`) and Gemini
 * models on Vertex AI. The client's Chat Completions request is translated
 * to `generateContent` (src/translate/gemini, once per request), and the
 * answer is adapted at the transport back into Chat Completions JSON and SSE,
 * so the attempt loop, the meter and the relay read it as any OpenAI answer.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Dispatcher } from "undici"
import { InvalidRequest } from "../domain/errors.js"
import type { ParsedRequest } from "../domain/request.js"
import {
  chatToGemini,
  geminiErrorToOpenAI,
  geminiToChat,
  GeminiToChatStream,
  requiresSignatures,
  withPlaceholderSignatures,
} from "../translate/gemini/index.js"
import { isObject, type Json } from "../translate/wire.js"
import { AdaptingHandler, retyped, wholeBodyAdapter, type AdaptedHead, type BodyAdapter } from "./adapt.js"
import type { UpstreamRequest } from "./transport.js"

/** The default Google AI Studio host. */
export const GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"

/** Largest answer or error body translated whole, bytes (as the translation layer's whole bodies). */
const MAX_WHOLE_BODY_BYTES = 16 * 1024 * 1024

/**
 * A request's translation, made once (by `refuse` or the first `build`): the Gemini body, or why there is
 * none, and its bytes as sent to models without and with required thought signatures (made when needed).
 */
interface Translation {
  readonly body: Json | InvalidRequest
  plain?: Buffer
  signed?: Buffer
}

const translated = new WeakMap<ParsedRequest, Translation>()

const translationOf = (request: ParsedRequest): Translation => {
  let done = translated.get(request)
  if (done === undefined) {
    let json: unknown
    try {
      json = JSON.parse(request.raw.toString("utf8"))
    } catch {
      json = undefined
    }
    done = {
      body: isObject(json)
        ? chatToGemini(json)
        : new InvalidRequest({ message: "the request body is not a JSON object" }),
    }
    translated.set(request, done)
  }
  return done
}

/** Why `request` cannot go to a Gemini target (a field it cannot translate), else undefined. */
export const refuseGemini = (request: ParsedRequest): string | undefined => {
  if (request.endpoint !== "/v1/chat/completions") return undefined
  const { body } = translationOf(request)
  return body instanceof InvalidRequest ? body.message : undefined
}

const geminiHeaders = (request: ParsedRequest): Record<string, string> => {
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (request.fakeScenario !== undefined) headers["x-fake-scenario"] = request.fakeScenario
  return headers
}

/** The `generateContent` verb and query of a request. */
const verbOf = (request: ParsedRequest): string =>
  request.stream ? ":streamGenerateContent?alt=sse" : ":generateContent"

/**
 * The translated body for `model` (an untranslatable request never gets here: `refuse` skipped the target);
 * Gemini 3 models get the placeholder signature on calls of the history that carry none (signatures.ts).
 */
const bodyOf = (request: ParsedRequest, model: string): Buffer => {
  const done = translationOf(request)
  const { body } = done
  if (body instanceof InvalidRequest)
    throw new Error(`a Gemini target was given an untranslatable request: ${body.message}`)
  if (requiresSignatures(model))
    return (done.signed ??= Buffer.from(JSON.stringify(withPlaceholderSignatures(body)), "utf8"))
  return (done.plain ??= Buffer.from(JSON.stringify(body), "utf8"))
}

/** Google AI Studio: `x-goog-api-key`, `/v1beta/models/{model}:generateContent`. */
export const buildGemini =
  (baseUrl: string, apiKey: string) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = geminiHeaders(request)
    headers["x-goog-api-key"] = apiKey
    return {
      endpoint: "/v1/chat/completions",
      origin: baseUrl,
      path: `/v1beta/models/${encodeURIComponent(model)}${verbOf(request)}`,
      headers,
      body: bodyOf(request, model),
    }
  }

/** Gemini on Vertex AI: a bearer token, `…/publishers/google/models/{model}:generateContent`. */
export const buildVertexGemini =
  (
    target: { readonly baseUrl: string; readonly project: string; readonly region: string },
    token: () => string,
  ) =>
  (request: ParsedRequest, model: string): UpstreamRequest => {
    const headers = geminiHeaders(request)
    headers["authorization"] = `Bearer ${token()}`
    const path =
      `/v1/projects/${encodeURIComponent(target.project)}/locations/${encodeURIComponent(target.region)}` +
      `/publishers/google/models/${encodeURIComponent(model)}${verbOf(request)}`
    return {
      endpoint: "/v1/chat/completions",
      origin: target.baseUrl,
      path,
      headers,
      body: bodyOf(request, model),
    }
  }

/** A JSON answer that is not a Gemini response is passed on as it is (the gateway sees a malformed answer). */
const answerToChat = (model: string) => (body: Buffer) => {
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString("utf8"))
  } catch {
    return body
  }
  const chat = isObject(parsed) ? geminiToChat(parsed, model) : undefined
  return chat === undefined ? body : Buffer.from(JSON.stringify(chat), "utf8")
}

const streamAdapter = (model: string): BodyAdapter => {
  const translator = new GeminiToChatStream(model)
  return { push: (chunk) => translator.push(chunk), end: () => translator.end() }
}

/** The head adapter of a Gemini response for a request to `model`. */
export const adaptGeminiHead =
  (model: string) =>
  (status: number, headers: IncomingHttpHeaders): AdaptedHead => {
    const json = retyped(headers, "application/json")
    if (status < 200 || status >= 300)
      return {
        status,
        headers: json,
        body: wholeBodyAdapter(MAX_WHOLE_BODY_BYTES, (body) => geminiErrorToOpenAI(status, body)),
      }
    const type = headers["content-type"]
    if (typeof type === "string" && type.startsWith("text/event-stream"))
      return {
        status,
        headers: retyped(headers, "text/event-stream; charset=utf-8"),
        body: streamAdapter(model),
      }
    return { status, headers: json, body: wholeBodyAdapter(MAX_WHOLE_BODY_BYTES, answerToChat(model)) }
  }

/** The model of a Gemini upstream path (`…/models/{model}:verb`). */
const modelOfPath = (path: string): string => {
  const match = /\/models\/([^/:?]+)(?::|$)/.exec(path)
  return match === null ? "" : decodeURIComponent(match[1]!)
}

/** `handler` behind the Gemini response adapter of `upstream`. */
export const geminiHandler = (
  upstream: UpstreamRequest,
  handler: Dispatcher.DispatchHandler,
): Dispatcher.DispatchHandler => new AdaptingHandler(handler, adaptGeminiHead(modelOfPath(upstream.path)))
