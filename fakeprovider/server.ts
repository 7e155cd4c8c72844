/**
 * The fake provider: a plain `node:http` server that answers the Anthropic, OpenAI/Ollama (Chat Completions,
 * Responses, embeddings), Vertex, Amazon Bedrock, Azure OpenAI and Google Gemini wire formats deterministically,
 * calls a tool when the request declares tools (tools.ts), misbehaves on request (scenarios), and records what
 * reached it. Requests are routed by path; `kind` restricts a fake to the endpoints of one of the cloud formats.
 */
import { createServer } from "node:http"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import { environmentAwsKeys } from "./bedrock.js"
import type { AwsKeys } from "./bedrock.js"
import { Exchange } from "./exchange.js"
import type { FakeRequest, Headers } from "./exchange.js"
import { endpointKind, handleEndpoint, respondNotFound, respondScenarioError } from "./handlers.js"
import type { Endpoint, FakeKind } from "./handlers.js"
import { PromptCache } from "./promptCache.js"
import { RequestLog } from "./requestLog.js"
import type { FakeRequestLog } from "./requestLog.js"
import { parseScenario, ScenarioError } from "./scenario.js"
import type { Scenario } from "./scenario.js"

export type { AwsKeys } from "./bedrock.js"
export type { FakeRequest } from "./exchange.js"
export type { FakeKind } from "./handlers.js"
export type { FakeRequestLog } from "./requestLog.js"
export { ScenarioError } from "./scenario.js"

/** Options of {@link startFakeProvider}. */
export interface FakeProviderOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  readonly host?: string
  /** TCP port; 0 picks a free one. Default 0. */
  readonly port?: number
  /** Scenario for every request unless `x-fake-scenario` overrides it. Default `ok`. */
  readonly scenario?: string
  /** Echoed in an `x-fake-name` header on every response. */
  readonly name?: string
  /**
   * Serve only the endpoints of this cloud format (others get 404) and label every response with an
   * `x-fake-kind` header. Default: every format, routed by path.
   */
  readonly kind?: FakeKind
  /**
   * The AWS credentials Bedrock signatures are checked against. Default: `AWS_ACCESS_KEY_ID` /
   * `AWS_SECRET_ACCESS_KEY` of the environment at each request, `AKIDFAKE` / `fake-secret` when unset.
   */
  readonly awsCredentials?: AwsKeys
}

/** A running fake provider. */
export interface FakeProviderHandle {
  /** `http://HOST:PORT`, no trailing slash (HOST `127.0.0.1` when listening on every interface). */
  readonly url: string
  /** The real port. */
  readonly port: number
  /** What reached the provider: the count since the last reset and the last 100 requests. */
  readonly requests: () => FakeRequestLog
  /** Forgets the recorded requests. */
  readonly reset: () => void
  /** Destroys every open connection (hanging ones too) and resolves when the server has closed. */
  readonly close: () => Promise<void>
}

const vertexPath =
  /^\/v1\/projects\/[^/]+\/locations\/[^/]+\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/

const bedrockPath = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/

const azurePath = /^\/openai\/v1\/(chat\/completions|responses|embeddings)$/

const geminiPath = /^\/v1(?:beta)?\/models\/([^/:]+):(generateContent|streamGenerateContent)$/

const vertexGeminiPath =
  /^\/v1(?:beta1)?\/projects\/[^/]+\/locations\/[^/]+\/publishers\/google\/models\/([^/:]+):(generateContent|streamGenerateContent)$/

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** The model endpoint of a POST path (query string apart), or undefined. */
const route = (path: string, query: string): Endpoint | undefined => {
  const bedrock = bedrockPath.exec(path)
  if (bedrock !== null)
    return { kind: "bedrock", model: decoded(bedrock[1] ?? ""), stream: bedrock[2] !== "invoke" }
  const azure = azurePath.exec(path)
  if (azure !== null) {
    const api =
      azure[1] === "chat/completions"
        ? "chat_completions"
        : azure[1] === "responses"
          ? "responses"
          : "embeddings"
    return { kind: api, azure: true }
  }
  const gemini = geminiPath.exec(path) ?? vertexGeminiPath.exec(path)
  if (gemini !== null) {
    const stream = gemini[2] === "streamGenerateContent"
    const sse = new URLSearchParams(query).get("alt") === "sse"
    return {
      kind: "gemini",
      model: decoded(gemini[1] ?? ""),
      stream,
      framing: sse ? "sse" : "array",
      vertex: !path.startsWith("/v1beta/models/") && !path.startsWith("/v1/models/"),
    }
  }
  if (path === "/v1/messages") return { kind: "messages" }
  if (path === "/v1/messages/count_tokens") return { kind: "count_tokens" }
  if (path === "/v1/chat/completions") return { kind: "chat_completions" }
  if (path === "/v1/responses") return { kind: "responses" }
  if (path === "/v1/embeddings") return { kind: "embeddings" }
  const vertex = vertexPath.exec(path)
  if (vertex === null) return undefined
  const model = decodeURIComponent(vertex[1] ?? "")
  if (model === "count-tokens")
    return vertex[2] === "rawPredict" ? { kind: "vertex_count_tokens" } : undefined
  return { kind: "vertex", model, stream: vertex[2] === "streamRawPredict" }
}

const headerObject = (req: IncomingMessage): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return headers
}

const parseBody = (text: string): unknown => {
  if (text === "") return ""
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/** The cloud format a path that no endpoint serves belongs to, for the format of its 404. */
const pathKind = (path: string): FakeKind | undefined =>
  path.startsWith("/model/")
    ? "bedrock"
    : path.startsWith("/openai/")
      ? "azure"
      : path.startsWith("/v1beta/") || path.includes("/publishers/google/")
        ? "gemini"
        : undefined

/** Reads the whole request body; undefined when the client went away first. */
const readBody = (req: IncomingMessage): Promise<Buffer | undefined> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.once("end", () => resolve(Buffer.concat(chunks)))
    req.once("close", () => resolve(undefined))
    req.once("error", () => resolve(undefined))
  })

const jsonType = { "content-type": "application/json" }

/** Starts a fake provider; rejects when the scenario does not parse or the port cannot be bound. */
export const startFakeProvider = async (options: FakeProviderOptions = {}): Promise<FakeProviderHandle> => {
  const host = options.host ?? "127.0.0.1"
  const defaultScenario = parseScenario(options.scenario ?? "ok")
  const { kind } = options
  if (kind !== undefined && kind !== "bedrock" && kind !== "azure" && kind !== "gemini")
    throw new Error(`unknown kind "${String(kind)}": expected bedrock, azure or gemini`)
  const awsKeys = (): AwsKeys => options.awsCredentials ?? environmentAwsKeys()
  const extraHeaders: Headers = {
    ...(options.name !== undefined ? { "x-fake-name": options.name } : {}),
    ...(kind !== undefined ? { "x-fake-kind": kind } : {}),
  }
  const log = new RequestLog()
  const promptCache = new PromptCache()
  const sockets = new Set<Socket>()

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? "GET"
    const startedAt = Date.now()
    const target = req.url ?? "/"
    const queryAt = target.indexOf("?")
    const path = queryAt < 0 ? target : target.slice(0, queryAt)
    const query = queryAt < 0 ? "" : target.slice(queryAt + 1)
    const entry: FakeRequest = {
      method,
      path: target,
      headers: headerObject(req),
      body: "",
      aborted: false,
      bytes_sent: 0,
    }
    const exchange = new Exchange(res, entry, extraHeaders)

    if (path === "/_fake/requests") {
      req.resume()
      if (method === "DELETE") log.reset()
      if (method !== "GET" && method !== "DELETE")
        return exchange.respond(405, { ...jsonType, allow: "GET, DELETE" }, "{}")
      return exchange.respond(
        200,
        jsonType,
        method === "GET" ? JSON.stringify(log.snapshot()) : `{"count":0,"recent":[]}`,
      )
    }

    log.add(entry)
    const bytes = await readBody(req)
    if (bytes === undefined) return
    const text = bytes.toString("utf8")
    entry.body = parseBody(text)

    const routed = method === "POST" ? route(path, query) : undefined
    const endpoint =
      routed !== undefined && (kind === undefined || endpointKind(routed) === kind) ? routed : undefined
    if (endpoint === undefined)
      return respondNotFound(
        exchange,
        kind ?? pathKind(path),
        `fake provider: no endpoint for ${method} ${path}`,
      )
    let scenario: Scenario = defaultScenario
    const override = req.headers["x-fake-scenario"]
    if (typeof override === "string") {
      try {
        scenario = parseScenario(override)
      } catch (error) {
        const message = error instanceof ScenarioError ? error.message : "invalid x-fake-scenario"
        return respondScenarioError(exchange, endpoint, message)
      }
    }
    return handleEndpoint(exchange, endpoint, {
      rawBody: text,
      bytes,
      scenario,
      awsKeys,
      startedAt,
      promptCache,
    })
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy())
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  })

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject)
      resolve()
    })
  })
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : (options.port ?? 0)
  const urlHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host

  let closing: Promise<void> | undefined
  return {
    url: `http://${urlHost}:${port}`,
    port,
    requests: () => log.snapshot(),
    reset: () => log.reset(),
    close: () => {
      closing ??= new Promise((resolve) => {
        server.close(() => resolve())
        for (const socket of sockets) socket.destroy()
      })
      return closing
    },
  }
}
