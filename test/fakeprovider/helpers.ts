/** Small HTTP helpers for the fake provider tests. */
import { expect } from "vitest"
import type { FakeProviderHandle, FakeRequest } from "../../fakeprovider/server.js"

/** A minimal Anthropic Messages body. */
export const messagesBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: "claude-test",
  max_tokens: 10,
  messages: [{ role: "user", content: "Hello, world!" }],
  ...extra,
})

/** A minimal OpenAI Chat Completions body. */
export const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: "gpt-test",
  messages: [{ role: "user", content: "Hello, world!" }],
  ...extra,
})

/** POSTs JSON to the fake; `scenario` goes into `x-fake-scenario`. */
export const post = (
  fake: FakeProviderHandle,
  path: string,
  body: unknown,
  options: { scenario?: string; signal?: AbortSignal; headers?: Record<string, string> } = {},
): Promise<Response> =>
  fetch(`${fake.url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(options.scenario !== undefined ? { "x-fake-scenario": options.scenario } : {}),
      ...options.headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
  })

/** `post` to `fake()` with `headers` (credentials) added, and `prefix` before each path. */
export const postWith =
  (fake: () => FakeProviderHandle, headers: Record<string, string>, prefix = "") =>
  (
    path: string,
    body: unknown,
    options: { scenario?: string; signal?: AbortSignal; headers?: Record<string, string> } = {},
  ): Promise<Response> =>
    post(fake(), `${prefix}${path}`, body, { ...options, headers: { ...headers, ...options.headers } })

/**
 * `hang-before-headers`: the request `send(signal)` makes gets no answer for 300 ms, fails when the client
 * aborts, and is then logged as aborted. Returns that log entry.
 */
export const expectHangBeforeHeaders = async (
  fake: FakeProviderHandle,
  send: (signal: AbortSignal) => Promise<Response>,
): Promise<FakeRequest> => {
  const controller = new AbortController()
  const pending = send(controller.signal).catch((error: unknown) => error)
  expect(await stillPending(pending, 300)).toBe("pending")
  controller.abort()
  expect(await pending).toBeInstanceOf(Error)
  return until(() => (lastRequest(fake).aborted ? lastRequest(fake) : undefined))
}

/** Polls `check` every 20 ms until it returns a value other than undefined; fails after `timeoutMs`. */
export const until = async <A>(check: () => A | undefined, timeoutMs = 5000): Promise<A> => {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const value = check()
    if (value !== undefined) return value
    if (performance.now() > deadline) throw new Error("condition not reached in time")
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** The last logged request. */
export const lastRequest = (fake: FakeProviderHandle): FakeRequest => {
  const last = fake.requests().recent.at(-1)
  if (last === undefined) throw new Error("no request logged")
  return last
}

/** Resolves with "pending" when `promise` has not settled within `ms` milliseconds. */
export const stillPending = <A>(promise: Promise<A>, ms: number): Promise<A | "pending"> =>
  Promise.race([promise, new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), ms))])

/** Reads a body until `enough(text)` holds; returns the text so far and the reader (still open). */
export const readUntil = async (
  response: Response,
  enough: (text: string) => boolean,
): Promise<{ text: string; reader: ReadableStreamDefaultReader<Uint8Array> }> => {
  const body = response.body
  if (body === null) throw new Error("no body")
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!enough(text)) {
    const { done, value } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  return { text, reader }
}

/** SSE `data:` payloads of a body. */
export const sseData = (text: string): Array<string> =>
  text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice("data: ".length))

/** Number of Anthropic text deltas in a body. */
export const deltaCount = (text: string): number => text.split("event: content_block_delta\n").length - 1

/** A minimal OpenAI Responses body. */
export const responsesBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: "gpt-test",
  input: "Hello, world!",
  ...extra,
})

/** A minimal OpenAI embeddings body (float vectors, so that tests read numbers). */
export const embeddingsBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: "emb-test",
  input: "Hello, world!",
  encoding_format: "float",
  ...extra,
})

/** SSE `event:` names of a body, in order. */
export const sseEvents = (text: string): Array<string> =>
  text
    .split("\n")
    .filter((line) => line.startsWith("event: "))
    .map((line) => line.slice("event: ".length))
