import { LUA_PRELUDE } from "./prelude.js"

/**
 * The admit script: checks every rate limit and budget of one request and,
 * only if all admit it, counts it (limits-and-budgets.md). One script, one
 * round trip, atomic. It mirrors `memoryStore.ts`'s `admit` rule for rule.
 *
 * KEYS: 1 requests counter of minute m, 2 of minute m − 1, 3 tokens counter
 * of minute m, 4 of minute m − 1, 5 session hash {spend, reserved, last}
 * (any key of the tenant when there is no session), 6 session index (sorted
 * set: session id → last request ms), 7… one spend hash {spend, reserved}
 * per periodic budget of the request, in the order they are checked.
 *
 * ARGV: 1 now (epoch ms), 2 ms into the minute, 3 requests limit (−1: none),
 * 4 tokens limit (−1: none, or token cost 0), 5 token cost, 6 reserve (micro-USD),
 * 7 session id ("" none), 8 session limit (−1: none), 9 session hard (1/0),
 * 10 session lifetime ms, 11 counter PEXPIRE ms, 12 session PEXPIRE ms,
 * 13 most live sessions of the tenant (≥ 1), 14 the position of the
 * tenant's month among the budgets (0: not there), then for budget i (KEYS[6 + i]):
 * 12 + 3i its limit (−1: none), 13 + 3i hard (1/0), 14 + 3i its PEXPIRE ms;
 * then 15 + 3n the lease asked for (k requests; 1: none), 16 + 3n its
 * margin (m) and 17 + 3n its slack (s).
 *
 * A lease (ADR 0063): a request without a session budget that is admitted, when
 * k × m requests, and k × s × m times its tokens and reservation, would
 * still fit under every limit and budget (hard or soft), is counted as k
 * requests with k × s times its tokens and reservation, and the copy admits
 * k − 1 more requests within those without asking; else it is counted once.
 * (Those write their sessions, if any, when they settle: ADR 0065.)
 *
 * An admitted request that starts a new session (none live under its id)
 * when the index already holds the most live sessions evicts the least
 * recently used ones (ZPOPMIN: lowest last request, then smallest id) and
 * deletes their hashes. Their key names are KEYS[5] with its session id
 * replaced by theirs (`tollgate:{TENANT}:session:ID`, as `redisStore.ts`
 * names a session's hash), so they share the tenant's hash slot.
 *
 * Returns integers only (Redis truncates Lua floats):
 * {admitted 1/0, reason (0 none, 1 requests, 2 tokens_too_large, 3 tokens,
 * 4 budget), requests current, requests previous, tokens current, tokens previous,
 * sessions evicted, settled month spend (−1 when refused before it was read),
 * the refusing budget (i, or n + 1 for the session; 0 none),
 * soft session exceeded 1/0, soft budget i exceeded 1/0 for each i, the
 * requests counted (k, or 1)}.
 * Counters are after counting when admitted, as seen when refused.
 */
export const ADMIT_BODY = `
local now = tonumber(ARGV[1])
local into = tonumber(ARGV[2])
local rpm = tonumber(ARGV[3])
local tpm = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local reserve = tonumber(ARGV[6])
local sid = ARGV[7]
local sLimit = tonumber(ARGV[8])
local sHard = ARGV[9] == "1"
local ttl = tonumber(ARGV[10])
local monthAt = tonumber(ARGV[14])
local n = #KEYS - 6
local leaseAsked = tonumber(ARGV[15 + 3 * n] or "1")
local leaseMargin = tonumber(ARGV[16 + 3 * n] or "1")
local leaseSlack = tonumber(ARGV[17 + 3 * n] or "1")

local rqCur = num(redis.call("GET", KEYS[1]))
local rqPrev = num(redis.call("GET", KEYS[2]))
local tkCur = num(redis.call("GET", KEYS[3]))
local tkPrev = num(redis.call("GET", KEYS[4]))

local function fits(limit, cur, prev, c)
  return prev * (60000 - into) + (cur + c) * 60000 <= limit * 60000
end
local mSpend = -1
local function refuse(reason, which)
  return {0, reason, rqCur, rqPrev, tkCur, tkPrev, 0, mSpend, which, 0}
end

if rpm >= 0 and not fits(rpm, rqCur, rqPrev, 1) then return refuse(1, 0) end
if tpm >= 0 then
  if cost > tpm then return refuse(2, 0) end
  if not fits(tpm, tkCur, tkPrev, cost) then return refuse(3, 0) end
end

local spend, reserved = {}, {}
for i = 1, n do
  local h = redis.call("HMGET", KEYS[6 + i], "spend", "reserved")
  spend[i] = num(h[1])
  reserved[i] = num(h[2])
end
mSpend = monthAt > 0 and spend[monthAt] or 0
for i = 1, n do
  local limit = tonumber(ARGV[12 + 3 * i])
  if limit >= 0 and ARGV[13 + 3 * i] == "1" and spend[i] + reserved[i] + reserve > limit then
    return refuse(4, i)
  end
end

local sSpend, sReserved, sLast, sNew = 0, 0, now, true
if sid ~= "" then
  local s = redis.call("HMGET", KEYS[5], "spend", "reserved", "last")
  if s[3] and now - tonumber(s[3]) < ttl then
    sNew = false
    sSpend = num(s[1])
    sReserved = num(s[2])
    sLast = math.max(tonumber(s[3]), now)
  end
  if sLimit >= 0 and sHard and sSpend + sReserved + reserve > sLimit then return refuse(4, n + 1) end
end

-- k requests counted; s times this request's tokens and reservation (s = k × slack for a lease).
local k, s = 1, 1
if leaseAsked > 1 and (sid == "" or sLimit < 0) then
  local m = leaseAsked * leaseMargin
  local sm = m * leaseSlack
  local room = not (rpm >= 0 and not fits(rpm, rqCur, rqPrev, m))
  if room and tpm >= 0 and not fits(tpm, tkCur, tkPrev, cost * sm) then room = false end
  for i = 1, n do
    local limit = tonumber(ARGV[12 + 3 * i])
    if limit >= 0 and spend[i] + reserved[i] + reserve * sm > limit then room = false end
  end
  if room then k, s = leaseAsked, leaseAsked * leaseSlack end
end

rqCur = redis.call("INCRBY", KEYS[1], fmt(k))
redis.call("PEXPIRE", KEYS[1], ARGV[11])
if cost > 0 then
  tkCur = redis.call("INCRBY", KEYS[3], fmt(cost * s))
  redis.call("PEXPIRE", KEYS[3], ARGV[11])
end
local soft = {}
for i = 1, n do
  local r = redis.call("HINCRBY", KEYS[6 + i], "reserved", fmt(reserve * s))
  redis.call("PEXPIRE", KEYS[6 + i], ARGV[14 + 3 * i])
  local limit = tonumber(ARGV[12 + 3 * i])
  soft[i] = (limit >= 0 and ARGV[13 + 3 * i] ~= "1" and spend[i] + r > limit) and 1 or 0
end

local softSession = 0
local evicted = 0
if sid ~= "" then
  if sNew then evicted = makeRoom(KEYS[6], KEYS[5], sid, now, ttl, tonumber(ARGV[13])) end
  sReserved = sReserved + reserve
  redis.call("HSET", KEYS[5], "spend", fmt(sSpend), "reserved", fmt(sReserved), "last", fmt(sLast))
  redis.call("PEXPIRE", KEYS[5], ARGV[12])
  redis.call("ZADD", KEYS[6], fmt(sLast), sid)
  redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", fmt(now - ttl))
  redis.call("PEXPIRE", KEYS[6], ARGV[12])
  if sLimit >= 0 and not sHard and sSpend + sReserved > sLimit then softSession = 1 end
end

local out = {1, 0, rqCur, rqPrev, tkCur, tkPrev, evicted, mSpend, 0, softSession}
for i = 1, n do out[10 + i] = soft[i] end
out[11 + n] = k
return out
`

/** The script as one command: the prelude, then the body. */
export const ADMIT_LUA = `${LUA_PRELUDE}${ADMIT_BODY}`
