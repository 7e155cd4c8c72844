import { LUA_PRELUDE } from "./prelude.js"

/**
 * The settle script: replaces a request's reservation with its real cost in
 * every periodic budget it reserved against and in its session, and its
 * token estimate with the reported tokens in the minute it was counted in.
 * Mirrors `memoryStore.ts`'s `settle`.
 *
 * KEYS: 1 session hash {spend, reserved, last} (any key of the tenant when
 * there is no session), 2 session index, 3 tokens counter of the admission
 * minute, 4… one spend hash {spend, reserved} per periodic budget of the
 * admission (its periods, not today's).
 *
 * ARGV: 1 now (epoch ms), 2 reserved (micro-USD), 3 cost (micro-USD),
 * 4 token delta (may be negative), 5 session id ("" none), 6 session lifetime ms,
 * 7 session PEXPIRE ms, 7 + i the PEXPIRE ms of budget i (KEYS[3 + i]).
 *
 * Reservations never go below 0; a session idle for its lifetime at `now`
 * is gone (nothing changes); a token counter that expired is skipped, and a
 * counter never goes below 0. Returns 1.
 */
export const SETTLE_BODY = `
local now = tonumber(ARGV[1])
local reserved = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local delta = tonumber(ARGV[4])
local sid = ARGV[5]
local ttl = tonumber(ARGV[6])

for i = 1, #KEYS - 3 do
  local h = redis.call("HMGET", KEYS[3 + i], "spend", "reserved")
  redis.call("HSET", KEYS[3 + i], "spend", fmt(num(h[1]) + cost),
    "reserved", fmt(math.max(0, num(h[2]) - reserved)))
  redis.call("PEXPIRE", KEYS[3 + i], ARGV[7 + i])
end

if sid ~= "" then
  local s = redis.call("HMGET", KEYS[1], "spend", "reserved", "last")
  if s[3] and now - tonumber(s[3]) < ttl then
    local last = math.max(tonumber(s[3]), now)
    redis.call("HSET", KEYS[1], "spend", fmt(num(s[1]) + cost),
      "reserved", fmt(math.max(0, num(s[2]) - reserved)), "last", fmt(last))
    redis.call("PEXPIRE", KEYS[1], ARGV[7])
    redis.call("ZADD", KEYS[2], fmt(last), sid)
    redis.call("PEXPIRE", KEYS[2], ARGV[7])
  end
end

if delta ~= 0 then
  local tokens = redis.call("GET", KEYS[3])
  if tokens then
    redis.call("SET", KEYS[3], fmt(math.max(0, tonumber(tokens) + delta)), "KEEPTTL")
  end
end
return 1
`

/** The script as one command: the prelude, then the body. */
export const SETTLE_LUA = `${LUA_PRELUDE}${SETTLE_BODY}`
