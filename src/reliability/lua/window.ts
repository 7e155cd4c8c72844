/**
 * The recent-minute window of two counters in Redis (the twin of
 * src/reliability/Window.ts for the fleet, ADR 0055): fields `A:BUCKET` and
 * `B:BUCKET` of a hash, bucket = floor(now / bucket ms). Lua functions the
 * shared breakers' and the retry budget's scripts start with.
 */
export const WINDOW_LUA = `
-- Adds n triples (bucket, a, b) from ARGV[i…] to the window's fields; buckets outside it are ignored.
-- Returns the index after the triples.
local function windowAdd(key, a, b, current, buckets, i, n)
  for _ = 1, n do
    local bucket = tonumber(ARGV[i])
    if bucket > current - buckets and bucket <= current then
      local x, y = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
      if x > 0 then redis.call("HINCRBY", key, a .. ":" .. bucket, x) end
      if y > 0 then redis.call("HINCRBY", key, b .. ":" .. bucket, y) end
    end
    i = i + 3
  end
  return i
end

-- Forgets the buckets that just left the window, and sums each counter over it.
local function windowSum(key, a, b, current, buckets)
  for bucket = current - buckets - 5, current - buckets do
    redis.call("HDEL", key, a .. ":" .. bucket, b .. ":" .. bucket)
  end
  local x, y = 0, 0
  for bucket = current - buckets + 1, current do
    local v = redis.call("HMGET", key, a .. ":" .. bucket, b .. ":" .. bucket)
    x = x + tonumber(v[1] or "0")
    y = y + tonumber(v[2] or "0")
  end
  return x, y
end
`
