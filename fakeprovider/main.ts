/**
 * `fakeprovider --listen HOST:PORT [--scenario S] [--name N] [--kind K]`: the fake provider binary (bin/fakeprovider).
 * Exit codes: 0 after SIGTERM/SIGINT or `--help`, 1 bad usage, 2 runtime failure (port in use).
 */
import { ScenarioError, startFakeProvider } from "./server.js"
import type { FakeKind } from "./server.js"

const usage = `usage: fakeprovider --listen HOST:PORT [--scenario S] [--name N] [--kind K]

Answers these wire formats deterministically, routed by path (every POST):
  Anthropic      /v1/messages, /v1/messages/count_tokens
  OpenAI/Ollama  /v1/chat/completions, /v1/responses, /v1/embeddings
  Vertex Claude  /v1/projects/P/locations/R/publishers/anthropic/models/M:rawPredict, :streamRawPredict
  Bedrock        /model/MODEL_ID/invoke, /model/MODEL_ID/invoke-with-response-stream
                 (Anthropic body with anthropic_version "bedrock-2023-05-31" and no model; the
                 stream as application/vnd.amazon.eventstream frames; SigV4 signature checked)
  Azure OpenAI   /openai/v1/chat/completions, /openai/v1/responses, /openai/v1/embeddings
                 (header api-key: any non-empty key but "wrong")
  Gemini         /v1beta/models/M:generateContent, :streamGenerateContent?alt=sse (header
                 x-goog-api-key or ?key=, any but "wrong"; without alt=sse a JSON array), and
                 Vertex /v1/projects/P/locations/R/publishers/google/models/M:generateContent,
                 :streamGenerateContent?alt=sse (authorization: Bearer, any token)
A request that declares tools gets one call of its first tool unless its last turn
is a tool result or tool_choice is none (Gemini: functionCallingConfig mode NONE).

flags (single-dash spellings such as -listen also work; --flag=value too):
  --listen HOST:PORT   address to listen on; port 0 picks a free port (default 127.0.0.1:0)
  --scenario S         scenario for every request (default ok); the x-fake-scenario
                       request header overrides it. Comma-separated items:
                         ok, status:N, status:N:RETRY_AFTER, hang-before-headers,
                         hang-after:N-tokens, reset-after:N-tokens, malformed-after:N-tokens,
                         no-usage, tokens:N, max-tokens, delay:MS, error-body-stall:N,
                         inband-error:TYPE, inband-error-event:TYPE (Responses: an
                         error event instead of response.failed),
                         content-filter (Azure only: 400 content_filter error; a chat
                         stream ends after 2 tokens with finish_reason content_filter),
                         thoughts:N, cached:N (Gemini only: thoughtsTokenCount N;
                         cachedContentTokenCount N, added to promptTokenCount),
                         prompt-cache (Anthropic formats: a prompt cache per fake; a turn
                         reads the prompt this fake answered last for the conversation)
                       Bedrock answers status:N with its exception for N (429 Throttling,
                       500 InternalServer, 503 ServiceUnavailable, 424 ModelError, 400
                       Validation, 403 AccessDenied, 404 ResourceNotFound, 408 ModelTimeout,
                       529 as 429 ModelNotReady, others InternalServer with status N)
  --name N             echoed in an x-fake-name response header
  --kind K             bedrock, azure or gemini: serve only that format's paths (others
                       404) and label responses with x-fake-kind (default: every format)
  --help               print this help

environment:
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY   the credentials Bedrock signatures must be
                       made with, read at each request (default AKIDFAKE / fake-secret);
                       any session token (x-amz-security-token) is accepted

GET /_fake/requests lists the last 100 requests; DELETE /_fake/requests resets the list.
Prints "listening on http://HOST:PORT" when ready.
`

interface Args {
  readonly host: string
  readonly port: number
  readonly scenario?: string
  readonly name?: string
  readonly kind?: FakeKind
}

class UsageError extends Error {}

const parseListen = (value: string): { host: string; port: number } => {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value)
  const port = match === null ? NaN : Number(match[3])
  if (match === null || port > 65535) throw new UsageError(`--listen: expected HOST:PORT, got "${value}"`)
  const host = match[1] ?? match[2] ?? ""
  return { host: host === "" ? "0.0.0.0" : host, port }
}

/** Parses argv (without node and the script); undefined means `--help`. */
const parseArgs = (argv: ReadonlyArray<string>): Args | undefined => {
  const values: Record<string, string> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ""
    const flag = /^--?([a-z]+)(?:=(.*))?$/s.exec(arg)
    if (flag === null) throw new UsageError(`unexpected argument "${arg}"`)
    const name = flag[1] ?? ""
    if (name === "help" || name === "h") return undefined
    if (name !== "listen" && name !== "scenario" && name !== "name" && name !== "kind")
      throw new UsageError(`unknown flag "${arg}"`)
    const value = flag[2] ?? argv[++i]
    if (value === undefined) throw new UsageError(`${arg} needs a value`)
    values[name] = value
  }
  const { host, port } = parseListen(values["listen"] ?? "127.0.0.1:0")
  const kind = values["kind"]
  if (kind !== undefined && kind !== "bedrock" && kind !== "azure" && kind !== "gemini")
    throw new UsageError(`--kind: expected bedrock, azure or gemini, got "${kind}"`)
  return {
    host,
    port,
    ...(values["scenario"] !== undefined ? { scenario: values["scenario"] } : {}),
    ...(values["name"] !== undefined ? { name: values["name"] } : {}),
    ...(kind !== undefined ? { kind } : {}),
  }
}

const fail = (message: string, code: number): never => {
  process.stderr.write(`fakeprovider: ${message}\n`)
  process.exit(code)
}

const main = async (): Promise<void> => {
  let args: Args | undefined
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (error) {
    return fail(`${error instanceof Error ? error.message : String(error)}\n\n${usage}`, 1)
  }
  if (args === undefined) {
    process.stdout.write(usage)
    return
  }
  const { host, port } = args
  const handle = await startFakeProvider(args).catch((error: unknown) => {
    if (error instanceof ScenarioError) return fail(error.message, 1)
    return fail(
      `cannot listen on ${host}:${port}: ${error instanceof Error ? error.message : String(error)}`,
      2,
    )
  })
  const shownHost = host.includes(":") ? `[${host}]` : host
  process.stdout.write(`listening on http://${shownHost}:${handle.port}\n`)

  const stop = (): void => {
    void handle.close().then(() => process.exit(0))
  }
  process.once("SIGTERM", stop)
  process.once("SIGINT", stop)
}

void main()
