/** Helpers every Tollgate Lua script starts with: integer formatting (Redis truncates Lua floats) and missing-as-zero reads. */
export const LUA_PRELUDE = `
local function fmt(n) return string.format("%d", n) end
local function num(v) return tonumber(v or "0") end
`
