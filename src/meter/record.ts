import { jsonNullable, jsonNumber, jsonString } from "../ops/jsonText.js"

/**
 * The usage record: one JSON line per authenticated request in `usage.file`
 * (SPEC "Usage records"). Field names, order and types are the contract.
 */

/** One usage record, exactly as written to the usage file. */
export interface UsageRecord {
  /** ISO-8601 UTC time the request arrived, e.g. `2026-12-02T10:04:05.123Z`. */
  readonly ts: string
  readonly request_id: string
  readonly tenant: string
  readonly key_id: string
  readonly route: string
  /** `/v1/messages`, `/v1/messages/count_tokens` or `/v1/chat/completions`. */
  readonly endpoint: string
  readonly stream: boolean
  /** The provider that served the final attempt; null when no target served. */
  readonly provider: string | null
  /** The upstream model of the final attempt; null when no target served. */
  readonly model: string | null
  /** Requests actually sent upstream. */
  readonly attempts: number
  /** The HTTP status sent to the client. */
  readonly status: number
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_tokens: number
  readonly cache_write_tokens: number
  /** micro-USD reserved while the request ran: at admission, plus any extensions of the stream cutoff (ADR 0029). */
  readonly reserved_micro_usd: number
  /** micro-USD charged at settle. */
  readonly cost_micro_usd: number
  /** True when the provider reported no usage and the charge came from the estimate. */
  readonly usage_estimated: boolean
  /** True when the response stopped after its first byte. */
  readonly incomplete: boolean
  readonly session: string | null
  readonly duration_ms: number
  /** Error type of a failed request or stream; null on success. */
  readonly error: string | null
  /**
   * The API endpoint the final attempt called (`/v1/messages` also for
   * Vertex): differs from `endpoint` when a translating route translated
   * the request (ADR 0046). Null when nothing was sent upstream (and in
   * records written before the field existed, when read back).
   */
  readonly upstream_endpoint: string | null
  /**
   * The W3C trace id of the request: its own trace when tracing is on (the
   * caller's when it sent `traceparent`), else the caller's `traceparent`
   * trace id; null when neither (and in records written before the field
   * existed, when read back).
   */
  readonly trace_id: string | null
  /**
   * The budget that refused the request (402) or cut its stream:
   * `tenant.day`, `tenant.week`, `tenant.month`, `key.day`, `key.week`,
   * `key.month` or `session`; null otherwise (and in records written before
   * the field existed, when read back).
   */
  readonly budget: string | null
  /**
   * micro-USD the prompt cache saved on this request: its cache-read tokens
   * at the target's input price less their cache-read price, rounded down
   * (ADR 0073); 0 without cache reads or a price (and in records written
   * before the field existed, when read back).
   */
  readonly cache_saved_micro_usd: number
  /**
   * On a sticky route: the target (`provider/model`) that served the
   * session's last request, when this request left it; null otherwise.
   */
  readonly moved_from: string | null
  /** Why the session left `moved_from` (`breaker_open`, `status 529`, `not_a_target`, …); null otherwise. */
  readonly moved_reason: string | null
}

/**
 * One JSON line (ending in "\n") with the fields in SPEC order, whatever the
 * key order of `r`: the text `JSON.stringify` gives, built by concatenation
 * (it runs once per request).
 */
export const encodeRecord = (r: UsageRecord): string =>
  `{"ts":${jsonString(r.ts)},"request_id":${jsonString(r.request_id)},"tenant":${jsonString(r.tenant)}` +
  `,"key_id":${jsonString(r.key_id)},"route":${jsonString(r.route)},"endpoint":${jsonString(r.endpoint)}` +
  `,"stream":${r.stream},"provider":${jsonNullable(r.provider)},"model":${jsonNullable(r.model)}` +
  `,"attempts":${jsonNumber(r.attempts)},"status":${jsonNumber(r.status)}` +
  `,"input_tokens":${jsonNumber(r.input_tokens)},"output_tokens":${jsonNumber(r.output_tokens)}` +
  `,"cache_read_tokens":${jsonNumber(r.cache_read_tokens)},"cache_write_tokens":${jsonNumber(r.cache_write_tokens)}` +
  `,"reserved_micro_usd":${jsonNumber(r.reserved_micro_usd)},"cost_micro_usd":${jsonNumber(r.cost_micro_usd)}` +
  `,"usage_estimated":${r.usage_estimated},"incomplete":${r.incomplete},"session":${jsonNullable(r.session)}` +
  `,"duration_ms":${jsonNumber(r.duration_ms)},"error":${jsonNullable(r.error)}` +
  `,"upstream_endpoint":${jsonNullable(r.upstream_endpoint)},"trace_id":${jsonNullable(r.trace_id)}` +
  `,"budget":${jsonNullable(r.budget)},"cache_saved_micro_usd":${jsonNumber(r.cache_saved_micro_usd)}` +
  `,"moved_from":${jsonNullable(r.moved_from)},"moved_reason":${jsonNullable(r.moved_reason)}}\n`

const STRING_FIELDS = ["ts", "request_id", "tenant", "key_id", "route", "endpoint"] as const
const NULLABLE_STRING_FIELDS = ["provider", "model", "session", "error"] as const
/** The record's number fields (integers when Tollgate writes them). */
export const NUMBER_FIELDS = [
  "attempts",
  "status",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "reserved_micro_usd",
  "cost_micro_usd",
  "duration_ms",
] as const
const BOOLEAN_FIELDS = ["stream", "usage_estimated", "incomplete"] as const
const LATER_NULLABLE_STRING_FIELDS = [
  "upstream_endpoint",
  "trace_id",
  "budget",
  "moved_from",
  "moved_reason",
] as const
/** Every text field but `ts` (the usage table's text columns). */
export const TEXT_FIELDS = [
  ...STRING_FIELDS.filter((k) => k !== "ts"),
  ...NULLABLE_STRING_FIELDS,
  ...LATER_NULLABLE_STRING_FIELDS,
] as const
/** Number fields added after the first release: absent in older records, read as 0. */
const LATER_NUMBER_FIELDS = ["cache_saved_micro_usd"] as const

/**
 * Decodes one line of the usage file: JSON.parse plus a typeof check per
 * field (no schema machinery; this runs once per line at start).
 * Undefined for anything that is not a whole record (a torn line).
 */
export const decodeRecord = (line: string): UsageRecord | undefined => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return undefined
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  const o = value as Record<string, unknown>
  for (const k of STRING_FIELDS) if (typeof o[k] !== "string") return undefined
  for (const k of NULLABLE_STRING_FIELDS) if (o[k] !== null && typeof o[k] !== "string") return undefined
  for (const k of NUMBER_FIELDS) if (typeof o[k] !== "number" || !Number.isFinite(o[k])) return undefined
  for (const k of BOOLEAN_FIELDS) if (typeof o[k] !== "boolean") return undefined
  // Fields added after the first release: absent in older records, read as null.
  for (const k of LATER_NULLABLE_STRING_FIELDS) {
    const field = o[k]
    if (field === undefined) o[k] = null
    else if (field !== null && typeof field !== "string") return undefined
  }
  for (const k of LATER_NUMBER_FIELDS) {
    const field = o[k]
    if (field === undefined) o[k] = 0
    else if (typeof field !== "number" || !Number.isFinite(field)) return undefined
  }
  return value as UsageRecord
}
