// A stand-in for bin/fakeprovider, used only when BENCH_UPSTREAM=stub (to run the bench while the real
// fake provider is not built). Same command line as the fake for what the bench needs:
//   node bench/stub-upstream.mjs --listen 127.0.0.1:0 [--scenario ok|max-tokens|tokens:N|status:N]
// Answers POST /v1/messages (Anthropic) and /v1/chat/completions (OpenAI), JSON and SSE; the
// `x-fake-scenario` header overrides the scenario. Output is 16 tokens unless the scenario says otherwise.
import { fstatSync } from "node:fs"
import http from "node:http"
import { parseArgs } from "node:util"

const { values } = parseArgs({
  options: {
    listen: { type: "string", default: "127.0.0.1:0" },
    scenario: { type: "string", default: "ok" },
    name: { type: "string", default: "stub" },
  },
})

const outputTokens = (scenario, maxTokens) => {
  if (scenario === "max-tokens") return maxTokens
  if (scenario.startsWith("tokens:")) return Number(scenario.slice("tokens:".length))
  return Math.min(maxTokens, 16)
}

const anthropicJson = (model, tokens) =>
  JSON.stringify({
    id: "msg_stub",
    type: "message",
    role: "assistant",
    model,
    content: [{ type: "text", text: " tok".repeat(tokens) }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: tokens },
  })

const anthropicStream = (res, model, tokens) => {
  const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
  const message = { id: "msg_stub", type: "message", role: "assistant", model, content: [] }
  event("message_start", { message: { ...message, usage: { input_tokens: 10, output_tokens: 1 } } })
  event("content_block_start", { index: 0, content_block: { type: "text", text: "" } })
  for (let i = 0; i < tokens; i++)
    event("content_block_delta", { index: 0, delta: { type: "text_delta", text: " tok" } })
  event("content_block_stop", { index: 0 })
  event("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: tokens } })
  event("message_stop", {})
  res.end()
}

const openaiJson = (model, tokens) =>
  JSON.stringify({
    id: "chatcmpl-stub",
    object: "chat.completion",
    created: 0,
    model,
    choices: [
      { index: 0, message: { role: "assistant", content: " tok".repeat(tokens) }, finish_reason: "stop" },
    ],
    usage: { prompt_tokens: 10, completion_tokens: tokens, total_tokens: 10 + tokens },
  })

const openaiStream = (res, model, tokens) => {
  const chunk = (choices, usage) =>
    res.write(
      `data: ${JSON.stringify({ id: "chatcmpl-stub", object: "chat.completion.chunk", model, choices, usage })}\n\n`,
    )
  for (let i = 0; i < tokens; i++)
    chunk([{ index: 0, delta: { content: " tok" }, finish_reason: null }], null)
  chunk([{ index: 0, delta: {}, finish_reason: "stop" }], null)
  chunk([], { prompt_tokens: 10, completion_tokens: tokens, total_tokens: 10 + tokens })
  res.end("data: [DONE]\n\n")
}

const server = http.createServer((req, res) => {
  const chunks = []
  req.on("data", (chunk) => chunks.push(chunk))
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}")
    const scenario = req.headers["x-fake-scenario"] ?? values.scenario
    const tokens = outputTokens(scenario, body.max_tokens ?? body.max_completion_tokens ?? 16)
    const anthropic = req.url === "/v1/messages"
    if (!anthropic && req.url !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" })
      res.end('{"error":"not found"}')
      return
    }
    const headers = { "x-fake-name": values.name }
    if (scenario.startsWith("status:")) {
      const status = Number(scenario.slice("status:".length))
      const type = status === 529 ? "overloaded_error" : "api_error"
      const error = anthropic
        ? { type: "error", error: { type, message: `stub status ${status}` } }
        : { error: { type, message: `stub status ${status}`, code: null } }
      res.writeHead(status, { ...headers, "content-type": "application/json" })
      res.end(JSON.stringify(error))
      return
    }
    if (body.stream === true) {
      res.writeHead(200, { ...headers, "content-type": "text/event-stream", "cache-control": "no-cache" })
      if (anthropic) anthropicStream(res, body.model, tokens)
      else openaiStream(res, body.model, tokens)
      return
    }
    const payload = anthropic ? anthropicJson(body.model, tokens) : openaiJson(body.model, tokens)
    res.writeHead(200, {
      ...headers,
      "content-type": "application/json",
      "content-length": Buffer.byteLength(payload),
    })
    res.end(payload)
  })
})
server.keepAliveTimeout = 60_000

const stop = () => {
  server.close()
  server.closeAllConnections()
  process.exit(0)
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
const stdin = fstatSync(0)
if (stdin.isFIFO() || stdin.isSocket()) {
  process.stdin.on("end", stop)
  process.stdin.resume()
}

const separator = values.listen.lastIndexOf(":")
server.listen(Number(values.listen.slice(separator + 1)), values.listen.slice(0, separator), () => {
  const address = server.address()
  process.stdout.write(`listening on http://${address.address}:${address.port}\n`)
})
