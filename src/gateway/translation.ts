/**
 * Translation on routes with `translate: true` (SPEC "Translation between
 * API formats", docs/translation.md): which upstream endpoint a target gets
 * when it does not serve the client's, the translated request per upstream
 * endpoint (made once, while the parsed body is at hand), and the transform
 * that turns the upstream's response back into the client's format.
 */
import type { ApiFormat, Endpoint } from "../domain/endpoint.js"
import { InvalidRequest } from "../domain/errors.js"
import { readRequest, type ParsedRequest } from "../domain/request.js"
import type { ProviderClient } from "../providers/ProviderClient.js"
import {
  makeStreamTranslator,
  translateErrorBody,
  translateRequest,
  translateResponse,
  type Wire,
} from "../translate/index.js"
import type { ChunkTransform } from "./relay.js"

/** The translated requests of one request, by upstream endpoint (or why there is none). */
export type Translations = ReadonlyMap<Endpoint, ParsedRequest | InvalidRequest>

const WIRES: ReadonlySet<Endpoint> = new Set(["/v1/messages", "/v1/chat/completions", "/v1/responses"])

/**
 * The endpoint a request to `endpoint` is translated to for a provider
 * speaking `api`: Anthropic providers get Messages (from Chat Completions or
 * Responses), OpenAI-format providers Chat Completions (from Messages).
 * Undefined: no translation (the pair is not one Tollgate translates).
 */
export const translatedEndpoint = (endpoint: Endpoint, api: ApiFormat): Endpoint | undefined => {
  if (api === "anthropic")
    return endpoint === "/v1/chat/completions" || endpoint === "/v1/responses" ? "/v1/messages" : undefined
  return endpoint === "/v1/messages" ? "/v1/chat/completions" : undefined
}

/**
 * The translations a request needs on `targets` (the clients of a
 * translating route that do not serve the client's endpoint), each made
 * once; undefined when none is needed. `header` reads a client header.
 */
export const translationsFor = (
  request: ParsedRequest,
  json: Readonly<Record<string, unknown>>,
  clients: ReadonlyArray<Pick<ProviderClient["Service"], "api" | "serves">>,
  header: (name: string) => string | undefined,
): Translations | undefined => {
  if (!WIRES.has(request.endpoint)) return undefined
  let translations: Map<Endpoint, ParsedRequest | InvalidRequest> | undefined
  for (const client of clients) {
    if (client.serves(request.endpoint)) continue
    const to = translatedEndpoint(request.endpoint, client.api)
    if (to === undefined || translations?.has(to) === true) continue
    translations ??= new Map()
    const body = translateRequest(request.endpoint as Wire, to as Wire, json, request.model)
    translations.set(
      to,
      body instanceof InvalidRequest
        ? body
        : readRequest(to, Buffer.from(JSON.stringify(body), "utf8"), body, request.model, header),
    )
  }
  return translations
}

type Client = Pick<ProviderClient["Service"], "api" | "serves" | "refuse">

/**
 * The request `client` gets: the client's own when the provider serves its
 * endpoint, else its translation; a string says why it gets none, an
 * InvalidRequest that its translation (or the provider's own, `refuse`)
 * refuses a field.
 */
const resolve = (
  client: Client,
  request: ParsedRequest,
  translations: Translations | undefined,
): ParsedRequest | string | InvalidRequest => {
  let to: ParsedRequest
  if (client.serves(request.endpoint)) to = request
  else {
    const endpoint = translations === undefined ? undefined : translatedEndpoint(request.endpoint, client.api)
    const translated = endpoint === undefined ? undefined : translations!.get(endpoint)
    if (translated === undefined) return `does not serve ${request.endpoint}`
    if (translated instanceof InvalidRequest) return translated
    to = translated
  }
  const refusal = client.refuse?.(to)
  return refusal === undefined ? to : new InvalidRequest({ message: refusal })
}

/**
 * The request to send to `client`: the client's own when the provider
 * serves its endpoint, else its translation; a string says why there is
 * none (the target is skipped with that reason).
 */
export const requestFor = (
  client: Client,
  request: ParsedRequest,
  translations: Translations | undefined,
): ParsedRequest | string => {
  const to = resolve(client, request, translations)
  return to instanceof InvalidRequest ? `cannot translate: ${to.message}` : to
}

/**
 * The first refusal of a request none of whose targets can take it, for a
 * 400 naming the field; undefined when a target can take it, or when none is
 * refused (the targets that do not serve it are skipped).
 */
export const untranslatable = (
  request: ParsedRequest,
  translations: Translations | undefined,
  clients: ReadonlyArray<Client>,
): InvalidRequest | undefined => {
  let refusal: InvalidRequest | undefined
  for (const client of clients) {
    const to = resolve(client, request, translations)
    if (to instanceof InvalidRequest) refusal ??= to
    else if (typeof to !== "string") return undefined
  }
  return refusal
}

/** Largest upstream body translated whole (a JSON answer or an error body), bytes. */
const MAX_WHOLE_BODY_BYTES = 16 * 1024 * 1024

/** A transform that keeps the whole body and writes its translation at the end; `failed` when it could not. */
export interface WholeBodyTransform extends ChunkTransform {
  readonly failed: boolean
}

const wholeBody = (translate: (body: Buffer) => Buffer | undefined): WholeBodyTransform => {
  let chunks: Array<Buffer> = []
  let size = 0
  let failed = false
  return {
    get failed() {
      return failed
    },
    push: (chunk) => {
      if (failed) return undefined
      size += chunk.length
      if (size > MAX_WHOLE_BODY_BYTES) {
        failed = true
        chunks = []
      } else chunks.push(chunk)
      return undefined
    },
    end: () => {
      if (failed) return undefined
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
      chunks = []
      const out = translate(body)
      if (out === undefined) failed = true
      return out
    },
  }
}

/**
 * The transform of a translated response from `upstream` back to the
 * client's `endpoint`: event by event for a 2xx stream, whole for a 2xx JSON
 * body or an error body. `model` is what the client sees.
 */
export const responseTransform = (
  upstream: Endpoint,
  endpoint: Endpoint,
  status: number,
  eventStream: boolean,
  options: { readonly model: string; readonly includeUsage: boolean },
): ChunkTransform | WholeBodyTransform => {
  const from = upstream as Wire
  const to = endpoint as Wire
  if (status < 200 || status >= 300) return wholeBody((body) => translateErrorBody(from, to, status, body))
  if (eventStream) return makeStreamTranslator(from, to, options)
  return wholeBody((body) => translateResponse(from, to, body, { model: options.model }))
}
