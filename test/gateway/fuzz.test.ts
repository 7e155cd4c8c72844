import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { harnessForSuite } from "../support/harness.js"

const ENDPOINTS = ["/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions"] as const

const isAnthropicError = (json: unknown) => {
  const j = json as { type?: unknown; error?: { type?: unknown; message?: unknown } }
  return j.type === "error" && typeof j.error?.type === "string" && typeof j.error?.message === "string"
}
const isOpenAIError = (json: unknown) => {
  const j = json as { error?: { type?: unknown; message?: unknown } }
  return typeof j.error?.type === "string" && typeof j.error?.message === "string"
}

describe("random input to the proxy endpoints", () => {
  const h = harnessForSuite()

  it("never gets a 5xx made by Tollgate, and every error is in the endpoint's API format", async () => {
    const body = fc.oneof(
      fc.string(),
      fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes).toString("latin1")),
      fc.json(),
      fc
        .record(
          {
            model: fc.oneof(
              fc.constantFrom("claude", "gpt", "nope", ""),
              fc.string(),
              fc.integer(),
              fc.constant(null),
            ),
            stream: fc.oneof(fc.boolean(), fc.string(), fc.constant(null)),
            max_tokens: fc.oneof(fc.integer(), fc.string(), fc.double()),
            messages: fc.anything(),
          },
          { requiredKeys: [] },
        )
        .map((o) => JSON.stringify(o)),
    )
    const auth = fc.oneof(
      fc.constant<Record<string, string>>({}),
      fc.string().map((s) => ({ "x-api-key": s.replace(/[^\x21-\x7e]/g, "") || "x" })),
      fc.constant({ "x-api-key": "VALID" }),
      fc.constant({ authorization: "Bearer VALID" }),
    )
    const contentType = fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded")
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ENDPOINTS),
        body,
        auth,
        contentType,
        async (endpoint, payload, headers, type) => {
          const resolved = Object.fromEntries(
            Object.entries(headers).map(([k, v]) => [k, v.replace("VALID", h.key)]),
          )
          const response = await fetch(`${h.url}${endpoint}`, {
            method: "POST",
            headers: { ...resolved, "content-type": type },
            body: payload,
          })
          const text = await response.text()
          const fromTollgate = response.headers.get("x-tollgate-provider") === null
          if (fromTollgate) expect(response.status).toBeLessThan(500)
          if (response.status >= 400 && fromTollgate) {
            const json = JSON.parse(text) as unknown
            if (endpoint === "/v1/chat/completions") expect(isOpenAIError(json)).toBe(true)
            else expect(isAnthropicError(json)).toBe(true)
            // A body Tollgate made is sent whole, with its length.
            expect(response.headers.get("content-length")).toBe(String(Buffer.byteLength(text)))
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})
