import { LUA_PRELUDE } from "./prelude.js"

/**
 * The admit script: checks every rate limit and budget of one request and,
 * only if all admit it, counts it (limits-and-budgets.md). One script, one
 * round trip, atomic. It mirrors `memoryStore.ts`'s `admit` rule for rule.
 *
 * KEYS: 1 requests counter of minute m, 2 of minute m − 1, 3 tokens counter
 * of minute m, 4 of minute m − 1, 5 month hash {spend, reserved},
 * 6 session hash {spend, reserved, last} (any key of the tenant when there is
 * no session), 7 session index (sorted set: session id → last request ms).
 *
 * ARGV: 1 now (epoch ms), 2 ms into the minute, 3 requests limit (−1: none),
 * 4 tokens limit (−1: none, or token cost 0), 5 token cost, 6 reserve (micro-USD),
 * 7 month limit (−1: none), 8 month hard (1/0), 9 session id ("" none),
 * 10 session limit (−1: none), 11 session hard (1/0), 12 session lifetime ms,
 * 13 counter PEXPIRE ms, 14 month PEXPIRE ms, 15 session PEXPIRE ms,
 * 16 most live sessions of the tenant (≥ 1).
 *
 * An admitted request that starts a new session (none live under its id)
 * when the index already holds the most live sessions evicts the least
 * recently used ones (ZPOPMIN: lowest last request, then smallest id) and
 * deletes their hashes. Their key names are KEYS[6] with its session id
 * replaced by theirs (`tollgate:{TENANT}:session:ID`, as `redisStore.ts`
 * names a session's hash), so they share the tenant's hash slot.
 *
 * Returns integers only (Redis truncates Lua floats):
 * {admitted 1/0, reason (0 none, 1 requests, 2 tokens_too_large, 3 tokens,
 * 4 month_budget, 5 session_budget), requests current, requests previous,
 * tokens current, tokens previous, soft month exceeded 1/0, soft session exceeded 1/0,
 * sessions evicted, settled month spend (−1 when refused before it was read)}.
 * Counters are after counting when admitted, as seen when refused.
 */
export const ADMIT_LUA = `${LUA_PRELUDE}
local now = tonumber(ARGV[1])
local into = tonumber(ARGV[2])
local rpm = tonumber(ARGV[3])
local tpm = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local reserve = tonumber(ARGV[6])
local mLimit = tonumber(ARGV[7])
local mHard = ARGV[8] == "1"
local sid = ARGV[9]
local sLimit = tonumber(ARGV[10])
local sHard = ARGV[11] == "1"
local ttl = tonumber(ARGV[12])

local rqCur = num(redis.call("GET", KEYS[1]))
local rqPrev = num(redis.call("GET", KEYS[2]))
local tkCur = num(redis.call("GET", KEYS[3]))
local tkPrev = num(redis.call("GET", KEYS[4]))

local function fits(limit, cur, prev, c)
  return prev * (60000 - into) + (cur + c) * 60000 <= limit * 60000
end
local mSpend = -1
local function refuse(reason)
  return {0, reason, rqCur, rqPrev, tkCur, tkPrev, 0, 0, 0, mSpend}
end

if rpm >= 0 and not fits(rpm, rqCur, rqPrev, 1) then return refuse(1) end
if tpm >= 0 then
  if cost > tpm then return refuse(2) end
  if not fits(tpm, tkCur, tkPrev, cost) then return refuse(3) end
end

local month = redis.call("HMGET", KEYS[5], "spend", "reserved")
mSpend = num(month[1])
local mReserved = num(month[2])
if mLimit >= 0 and mHard and mSpend + mReserved + reserve > mLimit then return refuse(4) end

local sSpend, sReserved, sLast, sNew = 0, 0, now, true
if sid ~= "" then
  local s = redis.call("HMGET", KEYS[6], "spend", "reserved", "last")
  if s[3] and now - tonumber(s[3]) < ttl then
    sNew = false
    sSpend = num(s[1])
    sReserved = num(s[2])
    sLast = math.max(tonumber(s[3]), now)
  end
  if sLimit >= 0 and sHard and sSpend + sReserved + reserve > sLimit then return refuse(5) end
end

rqCur = redis.call("INCR", KEYS[1])
redis.call("PEXPIRE", KEYS[1], ARGV[13])
if cost > 0 then
  tkCur = redis.call("INCRBY", KEYS[3], ARGV[5])
  redis.call("PEXPIRE", KEYS[3], ARGV[13])
end
mReserved = redis.call("HINCRBY", KEYS[5], "reserved", ARGV[6])
redis.call("PEXPIRE", KEYS[5], ARGV[14])
local softMonth = 0
if mLimit >= 0 and not mHard and mSpend + mReserved > mLimit then softMonth = 1 end

local softSession = 0
local evicted = 0
if sid ~= "" then
  if sNew then
    -- Expired sessions do not count; an expired entry of this id is replaced.
    redis.call("ZREMRANGEBYSCORE", KEYS[7], "-inf", fmt(now - ttl))
    redis.call("ZREM", KEYS[7], sid)
    local over = redis.call("ZCARD", KEYS[7]) - tonumber(ARGV[16]) + 1
    if over > 0 then
      local base = string.sub(KEYS[6], 1, #KEYS[6] - #sid)
      local popped = redis.call("ZPOPMIN", KEYS[7], over)
      for i = 1, #popped, 2 do
        redis.call("DEL", base .. popped[i])
        evicted = evicted + 1
      end
    end
  end
  sReserved = sReserved + reserve
  redis.call("HSET", KEYS[6], "spend", fmt(sSpend), "reserved", fmt(sReserved), "last", fmt(sLast))
  redis.call("PEXPIRE", KEYS[6], ARGV[15])
  redis.call("ZADD", KEYS[7], fmt(sLast), sid)
  redis.call("ZREMRANGEBYSCORE", KEYS[7], "-inf", fmt(now - ttl))
  redis.call("PEXPIRE", KEYS[7], ARGV[15])
  if sLimit >= 0 and not sHard and sSpend + sReserved > sLimit then softSession = 1 end
end

return {1, 0, rqCur, rqPrev, tkCur, tkPrev, softMonth, softSession, evicted, mSpend}
`
