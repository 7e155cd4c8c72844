import { ConfigProvider, Effect } from "effect"

/** Runs `effect` with `env` as its environment variables (Effect's `ConfigProvider`; the process env is not read). */
export const withEnv =
  (env: Readonly<Record<string, string>>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(effect, ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
