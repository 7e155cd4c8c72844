/**
 * The release body (run through `many.ts`): gives back what a lease
 * (ADR 0063) counted and no request used — requests and tokens in the
 * counters of the lease's minute, reservation in every budget it reserved
 * against. A counter or hash that has expired is left alone; nothing goes
 * below 0.
 *
 * KEYS: 1 requests counter of the lease's minute, 2 its tokens counter,
 * 3… one spend hash {spend, reserved} per periodic budget of the lease.
 *
 * ARGV: 1 requests unused, 2 tokens unused, 3 reservation unused (micro-USD).
 *
 * Returns 1.
 */
export const RELEASE_BODY = `
local function down(key, by)
  if by <= 0 then return end
  local v = redis.call("GET", key)
  if v then redis.call("SET", key, fmt(math.max(0, tonumber(v) - by)), "KEEPTTL") end
end
down(KEYS[1], tonumber(ARGV[1]))
down(KEYS[2], tonumber(ARGV[2]))
local money = tonumber(ARGV[3])
if money > 0 then
  for i = 3, #KEYS do
    if redis.call("EXISTS", KEYS[i]) == 1 then
      local r = num(redis.call("HGET", KEYS[i], "reserved"))
      redis.call("HSET", KEYS[i], "reserved", fmt(math.max(0, r - money)))
    end
  end
end
return 1
`
