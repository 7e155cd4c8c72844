import { ADMIT_BODY } from "./admit.js"
import { LUA_PRELUDE } from "./prelude.js"
import { RELEASE_BODY } from "./release.js"
import { SESSION_TARGET_BODY } from "./sessionTarget.js"
import { SETTLE_BODY } from "./settle.js"

/** Operation codes of {@link MANY_LUA}. */
export const MANY_ADMIT = 1
export const MANY_SETTLE = 2
export const MANY_RELEASE = 3
/** A sticky route's session-target lookup (`sessionTarget.ts`; ADR 0073). */
export const MANY_SESSION_TARGET = 4

/**
 * Many admissions and settlements in one script call (ADR 0062): the calls
 * of one event-loop turn, run one after the other in the order they were
 * made, each exactly as its own script would run it (the admit and settle
 * bodies, as functions over their own KEYS and ARGV). Atomic as a whole.
 *
 * KEYS: every call's keys, one call after the other.
 * ARGV: 1 the number of calls, then per call: its operation
 * ({@link MANY_ADMIT}, {@link MANY_SETTLE}, {@link MANY_RELEASE} or {@link MANY_SESSION_TARGET}), its number of keys, its
 * number of arguments, then its arguments.
 *
 * Returns one reply per call, in order: what its own script returns.
 */
export const MANY_LUA = `${LUA_PRELUDE}
local function admit(KEYS, ARGV)
${ADMIT_BODY}
end
local function settle(KEYS, ARGV)
${SETTLE_BODY}
end
local function release(KEYS, ARGV)
${RELEASE_BODY}
end
local function sessionTarget(KEYS, ARGV)
${SESSION_TARGET_BODY}
end
local run = {admit, settle, release, sessionTarget}
local out = {}
local k, a = 0, 2
for r = 1, tonumber(ARGV[1]) do
  local op, nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  local keys, argv = {}, {}
  for i = 1, nk do keys[i] = KEYS[k + i] end
  for i = 1, na do argv[i] = ARGV[a + i - 1] end
  k = k + nk
  a = a + na
  out[r] = run[op](keys, argv)
end
return out
`
