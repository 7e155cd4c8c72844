/**
 * Scenario strings of the fake provider (`--scenario`, `x-fake-scenario`).
 *
 * A scenario is a comma-separated list of items, for example `tokens:40,delay:5`.
 * See the scenario table in the reliability seed and SPEC.md "The fake provider". Beyond those:
 * `inband-error:TYPE` (a 200 stream carrying an error; an error status for a non-stream request),
 * `inband-error-event:TYPE` (the same, but a Responses stream reports it as `event: error` rather than
 * `response.failed`), `content-filter` (Azure OpenAI's content filter: a 400 `content_filter` error, or a chat
 * stream cut with `finish_reason: "content_filter"`; ignored by the other formats), `thoughts:N` and `cached:N`
 * (Gemini's `usageMetadata.thoughtsTokenCount` and `cachedContentTokenCount`; ignored by the other formats),
 * `prompt-cache` (Anthropic formats: cache reads and writes from the fake's own prompt cache, promptCache.ts).
 */

/** What happens after a stream (or a non-stream JSON prefix) has sent `tokens` tokens. */
export interface AfterTokens {
  /** `hang`: wait until the client goes away; `reset`: destroy the socket; `malformed`: send non-JSON data and end. */
  readonly action: "hang" | "reset" | "malformed"
  readonly tokens: number
}

/** An error status answered instead of a message. */
export interface StatusError {
  /** HTTP status code, 100..599. */
  readonly code: number
  /** Raw `retry-after` header value, sent as given (`status:429:7`). */
  readonly retryAfter?: string
}

/** The decoded scenario; fields of the items that were not given keep their defaults. */
export interface Scenario {
  /** `status:N[:S]`: answer status N, with `retry-after: S` when S is given. */
  readonly status?: StatusError
  /** `error-body-stall:N[:S]`: status N, headers and part of the error body, then nothing. */
  readonly stallErrorBody?: StatusError
  /** `hang-before-headers`: no response until the client closes the connection. */
  readonly hangBeforeHeaders: boolean
  /** `hang-after:N-tokens`, `reset-after:N-tokens`, `malformed-after:N-tokens`. */
  readonly after?: AfterTokens
  /** `inband-error:TYPE`: a 200 stream that carries an error event of this type. */
  readonly inbandError?: string
  /**
   * `inband-error-event:TYPE` sets {@link inbandError} and this: a Responses stream reports the error as an
   * `event: error` instead of `response.failed`. The other endpoints treat it as `inband-error:TYPE`.
   */
  readonly inbandErrorEvent?: boolean
  /** `no-usage`: responses carry no usage fields. */
  readonly noUsage: boolean
  /** `tokens:N`: exactly N output tokens, ignoring `max_tokens`. */
  readonly tokens?: number
  /** `max-tokens`: exactly `max_tokens` output tokens. */
  readonly maxTokens: boolean
  /** `delay:MS`: milliseconds before each stream event, or before a non-stream response. Default 0. */
  readonly delayMs: number
  /**
   * `content-filter` (Azure only): a non-stream request, or a Responses stream, gets Azure's 400
   * `content_filter` error; a chat stream sends its first tokens, then ends with `finish_reason: "content_filter"`.
   */
  readonly contentFilter?: boolean
  /** `thoughts:N` (Gemini only): N thinking tokens, reported as `thoughtsTokenCount` and in `totalTokenCount`. */
  readonly thoughts?: number
  /** `cached:N` (Gemini only): `cachedContentTokenCount: N`, added to `promptTokenCount` as Gemini counts it. */
  readonly cached?: number
  /**
   * `prompt-cache` (Anthropic formats): the fake keeps a prompt cache (promptCache.ts) and reports cache reads
   * and writes from it instead of plain input tokens.
   */
  readonly promptCache?: boolean
}

/** The `ok` scenario. */
export const okScenario: Scenario = { hangBeforeHeaders: false, noUsage: false, maxTokens: false, delayMs: 0 }

/** A scenario string that does not parse. */
export class ScenarioError extends Error {
  constructor(
    readonly scenario: string,
    readonly reason: string,
  ) {
    super(`invalid scenario "${scenario}": ${reason}`)
    this.name = "ScenarioError"
  }
}

const natural = (text: string | undefined): number | undefined =>
  text !== undefined && /^\d{1,12}$/.test(text) ? Number(text) : undefined

const parseStatus = (item: string, rest: ReadonlyArray<string>): StatusError => {
  const code = natural(rest[0])
  if (code === undefined || code < 100 || code > 599 || rest.length > 2) {
    throw new Error(`"${item}" needs a status code 100..599 and an optional retry-after`)
  }
  const retryAfter = rest[1]
  if (retryAfter === undefined) return { code }
  if (retryAfter.trim() === "") throw new Error(`"${item}" has an empty retry-after`)
  return { code, retryAfter }
}

const afterPattern = /^(hang|reset|malformed)-after:(\d{1,12})-tokens?$/

const applyItem = (scenario: Scenario, item: string): Scenario => {
  const after = afterPattern.exec(item)
  if (after !== null) {
    const action = after[1] as AfterTokens["action"]
    return { ...scenario, after: { action, tokens: Number(after[2]) } }
  }
  const [name, ...rest] = item.split(":")
  const single = (): number => {
    const value = natural(rest[0])
    if (value === undefined || rest.length !== 1) throw new Error(`"${item}" needs one whole number`)
    return value
  }
  switch (name) {
    case "ok":
      return scenario
    case "status":
      return { ...scenario, status: parseStatus(item, rest) }
    case "error-body-stall":
      return { ...scenario, stallErrorBody: parseStatus(item, rest) }
    case "hang-before-headers":
      return { ...scenario, hangBeforeHeaders: true }
    case "no-usage":
      return { ...scenario, noUsage: true }
    case "max-tokens":
      return { ...scenario, maxTokens: true }
    case "prompt-cache":
      return { ...scenario, promptCache: true }
    case "tokens":
      return { ...scenario, tokens: single() }
    case "delay":
      return { ...scenario, delayMs: single() }
    case "content-filter":
      if (rest.length > 0) throw new Error(`"${item}" takes no value`)
      return { ...scenario, contentFilter: true }
    case "thoughts":
      return { ...scenario, thoughts: single() }
    case "cached":
      return { ...scenario, cached: single() }
    case "inband-error":
    case "inband-error-event": {
      const type = rest.join(":")
      if (!/^[a-z_]+$/.test(type)) throw new Error(`"${item}" needs an error type such as overloaded_error`)
      return { ...scenario, inbandError: type, inbandErrorEvent: name === "inband-error-event" }
    }
    default:
      throw new Error(`unknown item "${item}"`)
  }
}

/**
 * Parses a scenario string. An empty string is `ok`.
 *
 * @throws ScenarioError when an item is unknown or malformed.
 */
export const parseScenario = (text: string): Scenario => {
  let scenario = okScenario
  for (const raw of text.split(",")) {
    const item = raw.trim()
    if (item === "") continue
    try {
      scenario = applyItem(scenario, item)
    } catch (error) {
      throw new ScenarioError(text, error instanceof Error ? error.message : String(error))
    }
  }
  return scenario
}
