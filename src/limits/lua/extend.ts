import { LUA_PRELUDE } from "./prelude.js"

/**
 * The extend script: adds to an open request's reservation when every hard
 * budget allows it (the stream cutoff). Mirrors `memoryStore.ts`'s `extend`.
 *
 * KEYS: 1 month hash {spend, reserved}, 2 session hash {spend, reserved, last}
 * (any key of the tenant when there is no session).
 *
 * ARGV: 1 now (epoch ms), 2 amount (micro-USD), 3 month limit (−1: none),
 * 4 month hard (1/0), 5 session id ("" none), 6 session limit (−1: none),
 * 7 session hard (1/0), 8 session lifetime ms, 9 month PEXPIRE ms.
 *
 * A hard budget refuses when spend + reserved + amount passes its limit;
 * soft budgets never refuse. A session idle for its lifetime at `now` is
 * gone: it neither refuses nor receives the amount.
 * Returns 1 (reserved on both) or 0 (refused; nothing changed).
 */
export const EXTEND_LUA = `${LUA_PRELUDE}
local now = tonumber(ARGV[1])
local amount = tonumber(ARGV[2])
local mLimit = tonumber(ARGV[3])
local sid = ARGV[5]
local sLimit = tonumber(ARGV[6])
local ttl = tonumber(ARGV[8])

local month = redis.call("HMGET", KEYS[1], "spend", "reserved")
if mLimit >= 0 and ARGV[4] == "1" and num(month[1]) + num(month[2]) + amount > mLimit then return 0 end

local live = false
if sid ~= "" then
  local s = redis.call("HMGET", KEYS[2], "spend", "reserved", "last")
  if s[3] and now - tonumber(s[3]) < ttl then
    live = true
    if sLimit >= 0 and ARGV[7] == "1" and num(s[1]) + num(s[2]) + amount > sLimit then return 0 end
  end
end

redis.call("HINCRBY", KEYS[1], "reserved", ARGV[2])
redis.call("PEXPIRE", KEYS[1], ARGV[9])
if live then redis.call("HINCRBY", KEYS[2], "reserved", ARGV[2]) end
return 1
`
