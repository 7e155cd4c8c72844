/**
 * The session-target scripts of sticky routes (ADR 0073). A tenant's
 * session targets are one hash (`route\nsession` → target) and one sorted
 * set of the same fields scored by their last use (epoch ms), so the
 * tenant's count stays bounded and the least recently used go first; both
 * keys are hash-tagged by the tenant and expire when the tenant has used
 * none of them for a session's lifetime.
 *
 * KEYS: 1 the targets hash, 2 the last-use sorted set.
 */

/**
 * Lookup. ARGV: 1 field, 2 now (epoch ms), 3 lifetime ms. Returns the
 * target, or false when none is remembered or it was last used a lifetime
 * ago (then it is forgotten); a target found counts as used at `now`.
 */
export const SESSION_TARGET_BODY = `
local target = redis.call("HGET", KEYS[1], ARGV[1])
if not target then return false end
local now = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local last = tonumber(redis.call("ZSCORE", KEYS[2], ARGV[1]))
if last == nil or now - last >= ttl then
  redis.call("HDEL", KEYS[1], ARGV[1])
  redis.call("ZREM", KEYS[2], ARGV[1])
  return false
end
if now > last then redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1]) end
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("PEXPIRE", KEYS[2], ttl)
return target
`

/**
 * Remember. ARGV: 1 field, 2 target, 3 now (epoch ms), 4 lifetime ms, 5 most
 * targets the tenant keeps. Forgets, on the way, up to 100 targets idle for
 * their lifetime and then the least recently used beyond the bound.
 */
export const REMEMBER_SESSION_TARGET_LUA = `
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[1])
local idle = redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", string.format("%d", now - ttl), "LIMIT", 0, 100)
for _, field in ipairs(idle) do
  redis.call("HDEL", KEYS[1], field)
  redis.call("ZREM", KEYS[2], field)
end
local over = redis.call("ZCARD", KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  local gone = redis.call("ZPOPMIN", KEYS[2], over)
  for i = 1, #gone, 2 do redis.call("HDEL", KEYS[1], gone[i]) end
end
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("PEXPIRE", KEYS[2], ttl)
return 1
`
