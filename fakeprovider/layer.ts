/**
 * The fake provider as an Effect resource for in-process tests: started when the scope opens, closed (every
 * connection destroyed) when it closes.
 *
 * ```ts
 * it.layer(FakeProvider.layer({ name: "primary" }))((it) => {
 *   it.effect("answers", () => Effect.gen(function* () {
 *     const fake = yield* FakeProvider.FakeProvider
 *     // fake.url, fake.requests()
 *   }))
 * })
 * ```
 * For two fakes in one test, use {@link make} twice inside `Effect.scoped`.
 */
import { Context, Effect, Layer } from "effect"
import type { Scope } from "effect"
import { startFakeProvider } from "./server.js"
import type { FakeProviderHandle, FakeProviderOptions } from "./server.js"

export type { FakeProviderHandle, FakeProviderOptions, FakeRequest, FakeRequestLog } from "./server.js"

/** A running fake provider. */
export class FakeProvider extends Context.Service<FakeProvider, FakeProviderHandle>()(
  "fakeprovider/FakeProvider",
) {}

/**
 * Starts a fake provider for the life of the scope. A bad scenario or a port in use is a defect: it is a
 * broken test, not a condition to handle.
 */
export const make = (
  options: FakeProviderOptions = {},
): Effect.Effect<FakeProviderHandle, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeProvider(options)),
    (handle) => Effect.promise(() => handle.close()),
  )

/** A layer providing {@link FakeProvider}; defaults: `127.0.0.1`, a free port, scenario `ok`. */
export const layer = (options: FakeProviderOptions = {}): Layer.Layer<FakeProvider> =>
  Layer.effect(FakeProvider, make(options))
