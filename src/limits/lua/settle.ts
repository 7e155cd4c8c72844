import { LUA_PRELUDE } from "./prelude.js"

/**
 * The settle script: replaces a request's reservation with its real cost in
 * its month and session, and its token estimate with the reported tokens in
 * the minute it was counted in. Mirrors `memoryStore.ts`'s `settle`.
 *
 * KEYS: 1 month hash {spend, reserved}, 2 session hash {spend, reserved, last}
 * (any key of the tenant when there is no session), 3 session index,
 * 4 tokens counter of the admission minute.
 *
 * ARGV: 1 now (epoch ms), 2 reserved (micro-USD), 3 cost (micro-USD),
 * 4 token delta (may be negative), 5 session id ("" none), 6 session lifetime ms,
 * 7 month PEXPIRE ms, 8 session PEXPIRE ms.
 *
 * Reservations never go below 0; a session idle for its lifetime at `now`
 * is gone (nothing changes); a token counter that expired is skipped, and a
 * counter never goes below 0. Returns 1.
 */
export const SETTLE_LUA = `${LUA_PRELUDE}
local now = tonumber(ARGV[1])
local reserved = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local delta = tonumber(ARGV[4])
local sid = ARGV[5]
local ttl = tonumber(ARGV[6])

local month = redis.call("HMGET", KEYS[1], "spend", "reserved")
redis.call("HSET", KEYS[1], "spend", fmt(num(month[1]) + cost),
  "reserved", fmt(math.max(0, num(month[2]) - reserved)))
redis.call("PEXPIRE", KEYS[1], ARGV[7])

if sid ~= "" then
  local s = redis.call("HMGET", KEYS[2], "spend", "reserved", "last")
  if s[3] and now - tonumber(s[3]) < ttl then
    local last = math.max(tonumber(s[3]), now)
    redis.call("HSET", KEYS[2], "spend", fmt(num(s[1]) + cost),
      "reserved", fmt(math.max(0, num(s[2]) - reserved)), "last", fmt(last))
    redis.call("PEXPIRE", KEYS[2], ARGV[8])
    redis.call("ZADD", KEYS[3], fmt(last), sid)
    redis.call("PEXPIRE", KEYS[3], ARGV[8])
  end
end

if delta ~= 0 then
  local tokens = redis.call("GET", KEYS[4])
  if tokens then
    redis.call("SET", KEYS[4], fmt(math.max(0, tonumber(tokens) + delta)), "KEEPTTL")
  end
end
return 1
`
