import { describe, expect, it } from "vitest"
import { harnessForSuite } from "../support/harness.js"

/**
 * The relay writes what queued while nobody read (the whole stream, when it
 * arrives in one burst before the relay starts) with one write instead of
 * one per upstream chunk (ADR 0038). The client must get the same bytes.
 */

/** Ids and times the fake makes up per response (message and completion ids, `created`), so two answers can be compared. */
const withoutIds = (text: string) =>
  text.replace(/"(msg|chatcmpl)[-_][A-Za-z0-9]+"/g, '"ID"').replace(/"created":\d+/g, '"created":0')

describe("relayed streams", () => {
  const h = harnessForSuite()

  const post = async (base: string, path: string, headers: Record<string, string>, body: object) => {
    const response = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-fake-scenario": "max-tokens", ...headers },
      body: JSON.stringify(body),
    })
    return { status: response.status, headers: response.headers, text: await response.text() }
  }

  for (const [api, path, route, model] of [
    ["anthropic", "/v1/messages", "claude", "claude-sonnet-5-5"],
    ["openai", "/v1/chat/completions", "gpt", "gpt-5-mini"],
  ] as const) {
    for (const stream of [true, false]) {
      it(`${api} ${stream ? "stream" : "JSON"}: the client gets the bytes the upstream sent (ids aside)`, async () => {
        const messages = [{ role: "user", content: "say something long" }]
        const direct = await post(
          h.fakes[0]!.url,
          path,
          { "x-api-key": "x", authorization: "Bearer x" },
          {
            model,
            max_tokens: 300,
            stream,
            messages,
            ...(api === "openai" && stream ? { stream_options: { include_usage: true } } : {}),
          },
        )
        const through = await post(
          h.url,
          path,
          { "x-api-key": h.key },
          { model: route, max_tokens: 300, stream, messages },
        )
        expect(through.status).toBe(200)
        expect(direct.status).toBe(200)
        // Tollgate asks an OpenAI stream for its usage, but a client that did not ask does not get the
        // usage-only chunk (SPEC): the rest is byte for byte what the upstream sent.
        const expected =
          api === "openai" && stream
            ? direct.text
                .split(/(?<=\n\n)/)
                .filter((event) => !event.includes('"choices":[]'))
                .join("")
            : direct.text
        if (api === "openai" && stream) expect(expected).not.toBe(direct.text)
        expect(withoutIds(through.text)).toBe(withoutIds(expected))
        expect(through.text.length).toBeGreaterThan(stream ? 20_000 : 1_000)
        expect(h.records().at(-1)).toMatchObject({ output_tokens: 300, incomplete: false, error: null })
        // The fake sends both without a length (chunked); so does Tollgate.
        expect(through.headers.get("content-length")).toBeNull()
      })
    }

    if (api === "openai") {
      it("openai stream with include_usage: the client gets the usage chunk too, byte for byte", async () => {
        const body = {
          model,
          max_tokens: 50,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
          stream_options: { include_usage: true },
        }
        const direct = await post(h.fakes[0]!.url, path, { authorization: "Bearer x" }, body)
        const through = await post(h.url, path, { "x-api-key": h.key }, { ...body, model: route })
        expect(through.text).toContain('"choices":[],"usage":{')
        expect(withoutIds(through.text)).toBe(withoutIds(direct.text))
        expect(h.records().at(-1)).toMatchObject({ output_tokens: 50, incomplete: false, error: null })
      })
    }

    it(`${api}: an upstream answer with a length keeps it, and no chunked framing (ADR 0040)`, async () => {
      // status:400 is returned to the client unchanged; the fake sends its error body with content-length.
      const headers = { "x-fake-scenario": "status:400" }
      const body = { max_tokens: 10, messages: [{ role: "user", content: "hi" }] }
      const direct = await post(
        h.fakes[0]!.url,
        path,
        { "x-api-key": "x", authorization: "Bearer x", ...headers },
        { model, ...body },
      )
      const through = await post(h.url, path, { "x-api-key": h.key, ...headers }, { model: route, ...body })
      expect(direct.status).toBe(400)
      expect(through.status).toBe(400)
      expect(through.text).toBe(direct.text)
      expect(direct.headers.get("content-length")).toBe(String(Buffer.byteLength(direct.text)))
      expect(through.headers.get("content-length")).toBe(direct.headers.get("content-length"))
      expect(through.headers.get("transfer-encoding")).toBeNull()
    })
  }
})
