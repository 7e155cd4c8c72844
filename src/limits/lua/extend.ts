import { LUA_PRELUDE } from "./prelude.js"

/**
 * The extend script: adds to an open request's reservation when every hard
 * budget allows it (the stream cutoff). Mirrors `memoryStore.ts`'s `extend`.
 *
 * KEYS: 1 session hash {spend, reserved, last} (any key of the tenant when
 * there is no session), 2… one spend hash {spend, reserved} per periodic
 * budget of the admission, in the order they are checked.
 *
 * ARGV: 1 now (epoch ms), 2 amount (micro-USD), 3 session id ("" none),
 * 4 session limit (−1: none), 5 session hard (1/0), 6 session lifetime ms,
 * then for budget i (KEYS[1 + i]): 4 + 3i its limit (−1: none), 5 + 3i hard
 * (1/0), 6 + 3i its PEXPIRE ms.
 *
 * A hard budget refuses when spend + reserved + amount passes its limit;
 * soft budgets never refuse. A session idle for its lifetime at `now` is
 * gone: it neither refuses nor receives the amount.
 * Returns 0 (reserved on all) or the first that refused (i, or n + 1 for
 * the session; nothing changed).
 */
export const EXTEND_LUA = `${LUA_PRELUDE}
local now = tonumber(ARGV[1])
local amount = tonumber(ARGV[2])
local sid = ARGV[3]
local sLimit = tonumber(ARGV[4])
local ttl = tonumber(ARGV[6])
local n = #KEYS - 1

for i = 1, n do
  local limit = tonumber(ARGV[4 + 3 * i])
  if limit >= 0 and ARGV[5 + 3 * i] == "1" then
    local h = redis.call("HMGET", KEYS[1 + i], "spend", "reserved")
    if num(h[1]) + num(h[2]) + amount > limit then return i end
  end
end

local live = false
if sid ~= "" then
  local s = redis.call("HMGET", KEYS[1], "spend", "reserved", "last")
  if s[3] and now - tonumber(s[3]) < ttl then
    live = true
    if sLimit >= 0 and ARGV[5] == "1" and num(s[1]) + num(s[2]) + amount > sLimit then return n + 1 end
  end
end

for i = 1, n do
  redis.call("HINCRBY", KEYS[1 + i], "reserved", ARGV[2])
  redis.call("PEXPIRE", KEYS[1 + i], ARGV[6 + 3 * i])
end
if live then redis.call("HINCRBY", KEYS[1], "reserved", ARGV[2]) end
return 0
`
