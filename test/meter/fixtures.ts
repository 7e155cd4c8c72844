import type { UsageRecord } from "../../src/meter/record.js"

/** A complete usage record (the SPEC example), keys deliberately out of SPEC order. */
export const sampleRecord = (over: Partial<UsageRecord> = {}): UsageRecord => ({
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
