// Whole-body checks of the API-path rows (bench/README.md, "Other API paths"): a response counts only when
// its body is what a client of that endpoint could use, not merely 2xx with the expected bytes at its end.
// Used by the load generator (every response of those rows) and by run.mjs's smoke test.
//   chat-completion          a JSON `chat.completion` whose choices[0].message.content is a non-empty string,
//                            with usage.completion_tokens
//   chat-completion-stream   SSE `data:` events, each a `chat.completion.chunk` (the last one `[DONE]`), at
//                            least one content delta that is not empty
//   response                 a JSON Responses `response` with an output_text that is not empty, with
//                            usage.output_tokens
//   response-stream          SSE events whose `event:` matches its data's `type`, at least one
//                            `response.output_text.delta` that is not empty, no `error`/`response.failed`,
//                            and a last event `response.completed` or `response.incomplete` carrying usage
//   message                  a JSON Anthropic `message` with a text block that is not empty, with
//                            usage.output_tokens
//   message-stream           SSE events whose `event:` matches its data's `type`, no `error`, at least one
//                            non-empty `text_delta`, a `message_delta` carrying usage.output_tokens, and a last
//                            event `message_stop`

/**
 * SSE events of `text` as `{ event, data }` (data: the `data:` lines joined), in order. A block without a
 * `data:` line (only comments, such as the `: ping` a translated stream may carry) is no event: clients
 * ignore it.
 */
const sseEvents = (text) => {
  const events = []
  for (const block of text.split("\n\n")) {
    if (block.trim() === "") continue
    let event
    const data = []
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim()
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
    }
    if (data.length > 0) events.push({ event, data: data.join("\n") })
  }
  return events
}

const parse = (text) => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const nonEmpty = (value) => typeof value === "string" && value.length > 0

const VALIDATORS = {
  "chat-completion": (text) => {
    const body = parse(text)
    if (body === undefined) return "not-json"
    if (body.object !== "chat.completion") return "not-chat.completion"
    if (!nonEmpty(body.choices?.[0]?.message?.content)) return "empty-content"
    if (typeof body.usage?.completion_tokens !== "number") return "no-usage"
    return undefined
  },
  "chat-completion-stream": (text) => {
    const events = sseEvents(text)
    if (events.at(-1)?.data !== "[DONE]") return "no-done"
    let content = false
    for (const { data } of events.slice(0, -1)) {
      const chunk = parse(data)
      if (chunk?.object !== "chat.completion.chunk") return "not-chat.completion.chunk"
      if (nonEmpty(chunk.choices?.[0]?.delta?.content)) content = true
    }
    return content ? undefined : "empty-content"
  },
  response: (text) => {
    const body = parse(text)
    if (body === undefined) return "not-json"
    if (body.object !== "response") return "not-response"
    const texts = (body.output ?? []).flatMap((item) =>
      item.type === "message" ? (item.content ?? []).filter((part) => part.type === "output_text") : [],
    )
    if (!texts.some((part) => nonEmpty(part.text))) return "empty-output"
    if (typeof body.usage?.output_tokens !== "number") return "no-usage"
    return undefined
  },
  "response-stream": (text) => {
    const events = sseEvents(text)
    let content = false
    for (const { event, data } of events) {
      const payload = parse(data)
      if (payload === undefined || payload.type !== event) return "event-type-mismatch"
      if (event === "error" || event === "response.failed") return `in-band-${event}`
      if (event === "response.output_text.delta" && nonEmpty(payload.delta)) content = true
    }
    if (!content) return "empty-output"
    const last = events.at(-1)
    if (last?.event !== "response.completed" && last?.event !== "response.incomplete") return "no-final-event"
    if (typeof parse(last.data)?.response?.usage?.output_tokens !== "number") return "no-usage"
    return undefined
  },
  message: (text) => {
    const body = parse(text)
    if (body === undefined) return "not-json"
    if (body.type !== "message") return "not-message"
    if (!(body.content ?? []).some((block) => block.type === "text" && nonEmpty(block.text)))
      return "empty-content"
    if (typeof body.usage?.output_tokens !== "number") return "no-usage"
    return undefined
  },
  "message-stream": (text) => {
    const events = sseEvents(text)
    let content = false
    let usage = false
    for (const { event, data } of events) {
      const payload = parse(data)
      if (payload === undefined || payload.type !== event) return "event-type-mismatch"
      if (event === "error") return "in-band-error"
      if (event === "content_block_delta" && nonEmpty(payload.delta?.text)) content = true
      if (event === "message_delta" && typeof payload.usage?.output_tokens === "number") usage = true
    }
    if (!content) return "empty-content"
    if (!usage) return "no-usage"
    if (events.at(-1)?.event !== "message_stop") return "no-message-stop"
    return undefined
  },
}

/** Why `text` is not a valid body of kind `validate` (a short code), or undefined when it is. */
export const bodyProblem = (validate, text) => {
  const check = VALIDATORS[validate]
  if (check === undefined) return `unknown-validator:${validate}`
  return check(text)
}
