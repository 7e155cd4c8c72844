import { LUA_PRELUDE } from "./prelude.js"

/**
 * The tenant-state script: the rate counters, the month's spend, the spend
 * of each budget asked for and the ids of the live sessions, in one atomic
 * read (sessions idle for their lifetime at `now` are trimmed from the
 * index first).
 *
 * KEYS: 1 requests counter of minute m, 2 of minute m − 1, 3 tokens counter
 * of minute m, 4 of minute m − 1, 5 month hash {spend, reserved}, 6 session
 * index, 7… one spend hash {spend, reserved} per budget asked for.
 *
 * ARGV: 1 now (epoch ms), 2 session lifetime ms.
 *
 * Returns {requests current, requests previous, tokens current,
 * tokens previous, month spend, month reserved, n, then spend and reserved
 * of each of the n budgets, then session id…}.
 */
export const TENANT_STATE_LUA = `${LUA_PRELUDE}
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", string.format("%d", now - ttl))
local month = redis.call("HMGET", KEYS[5], "spend", "reserved")
local out = {
  num(redis.call("GET", KEYS[1])), num(redis.call("GET", KEYS[2])),
  num(redis.call("GET", KEYS[3])), num(redis.call("GET", KEYS[4])),
  num(month[1]), num(month[2]), #KEYS - 6,
}
for i = 7, #KEYS do
  local h = redis.call("HMGET", KEYS[i], "spend", "reserved")
  out[#out + 1] = num(h[1])
  out[#out + 1] = num(h[2])
end
for _, id in ipairs(redis.call("ZRANGE", KEYS[6], 0, -1)) do out[#out + 1] = id end
return out
`
