/**
 * A local HTTP server for the SDK tests: it answers every request with the
 * prepared translated bytes, written in the pieces the translator produced,
 * for an official SDK to parse. `useLocalServer` starts one per test file.
 */
import Anthropic from "@anthropic-ai/sdk"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, expect } from "vitest"
import { makeStreamTranslator, translateResponse, type Wire } from "../../src/translate/index.js"
import { chunked } from "./upstream.js"

/** The model name the client sees in every translated answer. */
export const MODEL = "client-model"

interface Answer {
  readonly status: number
  readonly contentType: string
  readonly pieces: ReadonlyArray<Uint8Array>
}

const start = async (): Promise<{ url: string; answer: (a: Answer) => void; close: () => Promise<void> }> => {
  let current: Answer = { status: 500, contentType: "application/json", pieces: [] }
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(current.status, { "content-type": current.contentType, "request-id": "req_local" })
      for (const piece of current.pieces) res.write(piece)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    answer: (answer) => {
      current = answer
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** Starts a server for this test file; the returned functions prepare its answer and make SDK clients for it. */
export const useLocalServer = () => {
  let server: Awaited<ReturnType<typeof start>>
  beforeAll(async () => {
    server = await start()
  })
  afterAll(() => server.close())
  return {
    anthropic: () => new Anthropic({ baseURL: server.url, apiKey: "k", maxRetries: 0 }),
    openai: () => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "k", maxRetries: 0 }),
    /** Translates the upstream stream, cut at `points`, and serves the pieces the translator returned. */
    serveStream: (
      from: Wire,
      to: Wire,
      upstream: string,
      points: ReadonlyArray<number>,
      includeUsage = true,
    ) => {
      const translator = makeStreamTranslator(from, to, { model: MODEL, includeUsage })
      const pieces: Array<Buffer> = []
      for (const chunk of chunked(Buffer.from(upstream, "utf8"), points)) {
        const out = translator.push(chunk)
        if (out !== undefined) pieces.push(out)
      }
      const last = translator.end()
      if (last !== undefined) pieces.push(last)
      server.answer({ status: 200, contentType: "text/event-stream", pieces })
    },
    /** Translates the upstream JSON body and serves it. */
    serveJson: (from: Wire, to: Wire, upstream: unknown) => {
      const body = translateResponse(from, to, Buffer.from(JSON.stringify(upstream)), { model: MODEL })
      expect(body).toBeDefined()
      server.answer({ status: 200, contentType: "application/json", pieces: [body as Buffer] })
    },
    /** Serves a (translated) error body with its status. */
    serveError: (status: number, body: Buffer) =>
      server.answer({ status, contentType: "application/json", pieces: [body] }),
  }
}
