/**
 * The shared breakers' Lua scripts (src/reliability/sharedBreakers.ts, ADR
 * 0055): one per call, each on the two keys of one target (one hash slot).
 * Time is the caller's `now`; the keys' expiry is only garbage collection.
 */
import type { ScriptCommand } from "../../limits/redisClient.js"
import { WINDOW_LUA } from "./window.js"

/** Redis keys of a target live this long after their last write (the state is decided by `now`). */
const KEY_PX = 60 * 60 * 1000

/** The fields a script answers with: the fleet's state of one target. */
const STATE_REPLY = `return { gen, state, openUntil, probeUntil, cooldownUntil, failures, total }`

const READ_STATE = `
local h = redis.call("HMGET", KEYS[1], "gen", "state", "openUntil", "probeUntil", "cooldownUntil")
local gen = tonumber(h[1] or "0")
local state = h[2] or "closed"
local openUntil = tonumber(h[3] or "0")
local probeUntil = tonumber(h[4] or "0")
local cooldownUntil = tonumber(h[5] or "0")
local failures, total = 0, 0
`

/** Forgets the window (a closed breaker starts counting afresh) and the failing tenants. */
const CLEAR_WINDOW = `
local fields = redis.call("HKEYS", KEYS[1])
for _, field in ipairs(fields) do
  local c = string.sub(field, 1, 2)
  if c == "s:" or c == "f:" then redis.call("HDEL", KEYS[1], field) end
end
redis.call("DEL", KEYS[2])
`

/**
 * Sync: KEYS 1 state hash, 2 failing tenants hash. ARGV 1 now, 2 the generation
 * the counts were made under (-1: unknown yet), 3 min_requests, 4
 * failure_ratio, 5 open_for ms, 6 bucket ms, 7 buckets, 8 tenants the
 * two-tenant rule needs (0: off), 9 a cooldown until (0: none), 10 how many
 * count triples follow; then (bucket, successes, failures) triples; then
 * (tenant, failing at) pairs. Adds the counts when the breaker is closed and
 * still in that generation, opens it when the window meets the rule, and
 * answers with the state.
 */
export const SYNC_LUA = `${WINDOW_LUA}${READ_STATE}
local now = tonumber(ARGV[1])
local seen = tonumber(ARGV[2])
local minRequests = tonumber(ARGV[3])
local ratio = tonumber(ARGV[4])
local openFor = tonumber(ARGV[5])
local bucketMs = tonumber(ARGV[6])
local buckets = tonumber(ARGV[7])
local tenantsNeeded = tonumber(ARGV[8])
local cooldown = tonumber(ARGV[9])
local counts = tonumber(ARGV[10])
if cooldown > cooldownUntil then
  cooldownUntil = cooldown
  redis.call("HSET", KEYS[1], "cooldownUntil", cooldownUntil)
end
local current = math.floor(now / bucketMs)
if state == "closed" then
  local fresh = seen == gen or seen < 0
  local i = 11 + 3 * counts
  if fresh then windowAdd(KEYS[1], "s", "f", current, buckets, 11, counts) end
  while fresh and i < #ARGV do
    local at = tonumber(ARGV[i + 1])
    if at > tonumber(redis.call("HGET", KEYS[2], ARGV[i]) or "0") then redis.call("HSET", KEYS[2], ARGV[i], at) end
    i = i + 2
  end
  local successes
  successes, failures = windowSum(KEYS[1], "s", "f", current, buckets)
  total = successes + failures
  if total >= minRequests and total > 0 and failures / total >= ratio then
    local enough = true
    if tenantsNeeded > 0 then
      local failing = 0
      local marks = redis.call("HGETALL", KEYS[2])
      for j = 1, #marks, 2 do
        if current - math.floor(tonumber(marks[j + 1]) / bucketMs) < buckets then
          failing = failing + 1
        else
          redis.call("HDEL", KEYS[2], marks[j])
        end
      end
      enough = failing >= tenantsNeeded
    end
    if enough then
      gen = gen + 1
      state = "open"
      openUntil = now + openFor
      redis.call("HSET", KEYS[1], "gen", gen, "state", state, "openUntil", openUntil)
    end
  end
end
redis.call("PEXPIRE", KEYS[1], ${KEY_PX})
redis.call("PEXPIRE", KEYS[2], ${KEY_PX})
${STATE_REPLY}
`

/**
 * Claim the test: KEYS 1 state hash. ARGV 1 now, 2 lease ms. An open breaker
 * whose open time has passed, or a half-open one whose test is free (a
 * neutral result) or whose holder's lease ran out, becomes half-open with a
 * new generation and this caller holds the test. Answers { 1 | 0, state… }.
 */
export const CLAIM_LUA = `${READ_STATE}
local now = tonumber(ARGV[1])
local granted = 0
if (state == "open" and now >= openUntil) or (state == "half_open" and now >= probeUntil) then
  gen = gen + 1
  state = "half_open"
  probeUntil = now + tonumber(ARGV[2])
  granted = 1
  redis.call("HSET", KEYS[1], "gen", gen, "state", state, "probeUntil", probeUntil)
  redis.call("PEXPIRE", KEYS[1], ${KEY_PX})
end
return { granted, gen, state, openUntil, probeUntil, cooldownUntil, failures, total }
`

/**
 * The test's result: KEYS 1 state hash, 2 failing tenants hash. ARGV 1 now,
 * 2 the test's generation, 3 success | failure | neutral, 4 open_for ms.
 * Success closes (the window starts afresh), failure opens again, neutral
 * frees the test for another request; a result of another generation
 * changes nothing.
 */
export const RESULT_LUA = `${READ_STATE}
local now = tonumber(ARGV[1])
if state == "half_open" and gen == tonumber(ARGV[2]) then
  local outcome = ARGV[3]
  if outcome == "success" then
    gen = gen + 1
    state = "closed"
    probeUntil = 0
    ${CLEAR_WINDOW}
  elseif outcome == "failure" then
    gen = gen + 1
    state = "open"
    openUntil = now + tonumber(ARGV[4])
    probeUntil = 0
  else
    probeUntil = 0
  end
  redis.call("HSET", KEYS[1], "gen", gen, "state", state, "openUntil", openUntil, "probeUntil", probeUntil)
  redis.call("PEXPIRE", KEYS[1], ${KEY_PX})
end
${STATE_REPLY}
`

export const BREAKER_SCRIPTS: Readonly<Record<string, ScriptCommand>> = {
  tollgateBreakerSync: { lua: SYNC_LUA, numberOfKeys: 2 },
  tollgateBreakerClaim: { lua: CLAIM_LUA, numberOfKeys: 1 },
  tollgateBreakerResult: { lua: RESULT_LUA, numberOfKeys: 2 },
}
