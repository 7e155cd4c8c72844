/**
 * Helpers every Tollgate Lua script starts with: integer formatting (Redis truncates Lua floats),
 * missing-as-zero reads, and the start of a session (the admit script's, and the settle script's for a
 * session a lease left to it, ADR 0065).
 */
export const LUA_PRELUDE = `
local function fmt(n) return string.format("%d", n) end
local function num(v) return tonumber(v or "0") end
-- Makes room for new session sid in index (sorted set: id -> last request ms) when it already holds most
-- live sessions: the least recently used go (ZPOPMIN: lowest last request, then smallest id), with their
-- hashes, named as key (sid's hash) with sid replaced by theirs. Expired entries and an old entry of sid
-- do not count. Returns the number evicted.
local function makeRoom(index, key, sid, now, ttl, most)
  redis.call("ZREMRANGEBYSCORE", index, "-inf", fmt(now - ttl))
  redis.call("ZREM", index, sid)
  local over = redis.call("ZCARD", index) - most + 1
  local evicted = 0
  if over > 0 then
    local base = string.sub(key, 1, #key - #sid)
    local popped = redis.call("ZPOPMIN", index, over)
    for i = 1, #popped, 2 do
      redis.call("DEL", base .. popped[i])
      evicted = evicted + 1
    end
  end
  return evicted
end
`
