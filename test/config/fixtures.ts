import { ConfigProvider, Effect, Result } from "effect"
import { decodeConfig, type DecodeOptions, type Loaded } from "../../src/config/decode.js"
import type { ConfigInvalid } from "../../src/config/problems.js"

export const HASH_A = "a".repeat(64)
export const HASH_B = "b".repeat(64)

export const PRICES = {
  prices: [
    { model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 },
    { model: "gpt-5-mini", input: 0.25, output: 2 },
  ],
}

/** A small valid config: one route per API, one tenant with key HASH_A. */
export const baseConfig = (): Record<string, unknown> => ({
  providers: {
    anthropic: { kind: "anthropic" },
    openai: { kind: "openai" },
  },
  routes: {
    claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
    gpt: { api: "openai", targets: [{ provider: "openai", model: "gpt-5-mini" }] },
  },
  tenants: {
    acme: { keys: [{ id: "ci", sha256: HASH_A }], routes: "*" },
  },
})

export const FULL_ENV = { ANTHROPIC_API_KEY: "sk-ant", OPENAI_API_KEY: "sk-oai" }

export interface Options extends Partial<DecodeOptions> {
  readonly env?: Record<string, string>
}

/** decodeConfig with an in-memory env (default: both provider keys set) and inline prices. */
export const decode = (raw: unknown, options: Options = {}): Effect.Effect<Loaded, ConfigInvalid> => {
  const { env = FULL_ENV, ...rest } = options
  return decodeConfig(raw, {
    path: "/etc/tollgate/tollgate.yaml",
    mode: "serve",
    prices: PRICES,
    cwd: "/srv/tollgate",
    ...rest,
  }).pipe(Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })))
}

/** The problems of a config that must fail (an empty list if it decoded). */
export const problemsOf = (raw: unknown, options: Options = {}): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(
    Effect.result(decode(raw, options)),
    Result.match({ onFailure: (e) => e.problems, onSuccess: () => [] }),
  )

/**
 * A deep copy of `raw` with `value` at `path` (created as needed); `undefined` deletes the key.
 * E.g. `patch(baseConfig(), ["routes", "claude", "targets"], [])`.
 */
export const patch = (
  raw: unknown,
  path: ReadonlyArray<string | number>,
  value: unknown,
): Record<string, unknown> => {
  const copy = structuredClone(raw) as Record<string, unknown>
  let node: Record<string | number, unknown> = copy
  path.slice(0, -1).forEach((key) => {
    const next = node[key]
    if (typeof next !== "object" || next === null) node[key] = {}
    node = node[key] as Record<string | number, unknown>
  })
  const last = path[path.length - 1]!
  if (value === undefined) delete node[last]
  else node[last] = value
  return copy
}
