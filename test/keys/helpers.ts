import Anthropic from "@anthropic-ai/sdk"
import { ADMIN_TOKEN } from "../admin/fixtures.js"

/** Shared helpers of the runtime-key tests (ADR 0050). */

export interface Answer {
  readonly status: number
  readonly body: any
}

/** An admin call with the admin token (or `token`, or none when null); the body is JSON when given. */
export const admin = async (
  url: string,
  method: "GET" | "POST" | "DELETE",
  path: string,
  body?: unknown,
  token: string | null = ADMIN_TOKEN,
): Promise<Answer> => {
  const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` }
  if (body !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(`${url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

/** `POST /admin/keys`. */
export const createKey = (url: string, body: unknown) => admin(url, "POST", "/admin/keys", body)

/** `DELETE /admin/keys/{tenant}/{id}` (both percent-encoded). */
export const revokeKey = (url: string, tenant: string, id: string) =>
  admin(url, "DELETE", `/admin/keys/${encodeURIComponent(tenant)}/${encodeURIComponent(id)}`)

/** `GET /admin/keys` (of one tenant when given). */
export const listKeys = (url: string, tenant?: string) =>
  admin(url, "GET", tenant === undefined ? "/admin/keys" : `/admin/keys?tenant=${encodeURIComponent(tenant)}`)

/**
 * One message through the official Anthropic SDK with `key`: 200 with its
 * text, or the status of the APIError (no retries, so a 401 is seen once).
 */
export const sdkStatus = async (url: string, key: string, model = "claude"): Promise<number> => {
  const client = new Anthropic({ apiKey: key, baseURL: url, maxRetries: 0 })
  try {
    const message = await client.messages.create({
      model,
      max_tokens: 16,
      messages: [{ role: "user", content: "hi" }],
    })
    if (message.content.length === 0) throw new Error("empty message")
    return 200
  } catch (error) {
    if (error instanceof Anthropic.APIError && error.status !== undefined) return error.status
    throw error
  }
}

/** A plain request with `key` (the status only), cheaper than the SDK for polling. */
export const status = async (url: string, key: string): Promise<number> => {
  const response = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: JSON.stringify({ model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
  })
  await response.text()
  return response.status
}

/**
 * Polls `check` until it is true; resolves with the ms from `since`
 * (a `performance.now()` reading) to the first true answer. Fails after
 * `timeoutMs` (a generous bound: the test asserts the measured time).
 */
export const measureUntil = async (
  since: number,
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
): Promise<number> => {
  const deadline = since + timeoutMs
  while (performance.now() < deadline) {
    if (await check()) return performance.now() - since
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`condition not met within ${timeoutMs} ms`)
}
