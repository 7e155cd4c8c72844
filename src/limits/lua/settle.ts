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
 * 7 session PEXPIRE ms, 8 what leaves the session's reservation (micro-USD;
 * ARGV 2 unless a lease admitted the request), 9 most live sessions of the
 * tenant when the admission left the session to this settlement (a lease
 * admitted it, ADR 0065), else 0, 9 + i the PEXPIRE ms of budget i (KEYS[3 + i]).
 *
 * Reservations never go below 0; a session idle for its lifetime at `now`
 * is gone (nothing changes), unless ARGV 9 is set: then the session starts
 * here, evicting the tenant's least recently used sessions beyond ARGV 9 as
 * an admission would; a token counter that expired is skipped, and a counter
 * never goes below 0. Returns the number of sessions evicted.
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
  redis.call("PEXPIRE", KEYS[3 + i], ARGV[9 + i])
end

local evicted = 0
if sid ~= "" then
  local unreserve = tonumber(ARGV[8])
  local most = tonumber(ARGV[9])
  local s = redis.call("HMGET", KEYS[1], "spend", "reserved", "last")
  local live = s[3] and now - tonumber(s[3]) < ttl
  if live or most > 0 then
    local sSpend, sReserved, last = 0, 0, now
    if live then
      sSpend, sReserved, last = num(s[1]), num(s[2]), math.max(tonumber(s[3]), now)
    else
      -- A new session, as the admit script starts one.
      evicted = makeRoom(KEYS[2], KEYS[1], sid, now, ttl, most)
    end
    redis.call("HSET", KEYS[1], "spend", fmt(sSpend + cost),
      "reserved", fmt(math.max(0, sReserved - unreserve)), "last", fmt(last))
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
return evicted
`

/** The script as one command: the prelude, then the body. */
export const SETTLE_LUA = `${LUA_PRELUDE}${SETTLE_BODY}`
