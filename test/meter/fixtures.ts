import type { UsageRecord } from "../../src/meter/record.js"

/** A complete usage record (the SPEC example), keys deliberately out of SPEC order. */
export const sampleRecord = (over: Partial<UsageRecord> = {}): UsageRecord => ({
  moved_reason: null,
  moved_from: null,
  cache_saved_micro_usd: 0,
  budget: null,
  trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
  upstream_endpoint: "/v1/messages",
  error: null,
  duration_ms: 812,
  session: "d-0123456789abcdef01234567",
  incomplete: false,
  usage_estimated: false,
  cost_micro_usd: 6700,
  reserved_micro_usd: 44560,
  cache_write_tokens: 0,
  cache_read_tokens: 0,
  output_tokens: 310,
  input_tokens: 1200,
  status: 200,
  attempts: 2,
  model: "claude-sonnet-5-5",
  provider: "backup",
  stream: true,
  endpoint: "/v1/messages",
  route: "claude-sonnet",
  key_id: "ci",
  tenant: "acme",
  request_id: "req_1",
  ts: "2026-12-02T10:04:05.123Z",
  ...over,
})

/** The same stream cut three ways: one chunk per event, one chunk, and at the `cuts` points. */
export const chunkingsOf = (
  events: ReadonlyArray<string>,
  cuts: ReadonlyArray<number>,
): Array<Array<Buffer>> => {
  const whole = Buffer.from(events.join(""))
  const points = [...new Set(cuts.map((c) => c % (whole.length + 1)))].sort((a, b) => a - b)
  return [
    events.map((e) => Buffer.from(e)),
    [whole],
    [0, ...points, whole.length]
      .slice(1)
      .map((end, i, ends) => whole.subarray(i === 0 ? 0 : ends[i - 1], end)),
  ]
}
