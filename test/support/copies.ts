import { Context, Effect, Layer } from "effect"
import { join } from "node:path"
import type { FakeProviderHandle } from "../../fakeprovider/server.js"
import { appLayer } from "../../src/app.js"
import { decodeConfig } from "../../src/config/load.js"
import { Server } from "../../src/http/Server.js"
import type { Store } from "../../src/limits/Store.js"
import { withEnv } from "./env.js"
import { PRICES, UPSTREAM_KEY, UPSTREAM_KEY_ENV } from "./harness.js"

/**
 * Tollgate copies built inside the calling Effect, so they run on its
 * services — under @effect/vitest that is `TestClock`, and the window math
 * of every copy moves with `TestClock.adjust`. Each copy is a whole gateway
 * (HTTP server included) on its own port; copies share the store they are
 * given.
 */

export interface CopyOptions {
  readonly fake: FakeProviderHandle
  readonly keyHash: string
  readonly dir: string
  readonly tenants: Record<string, unknown>
  readonly reservationOutputTokens?: number
}

export const copyConfig = (options: CopyOptions) => ({
  server: { listen: "127.0.0.1:0" },
  usage: { file: join(options.dir, "usage.jsonl") },
  ...(options.reservationOutputTokens !== undefined
    ? { reservation: { output_tokens: options.reservationOutputTokens } }
    : {}),
  providers: { a: { kind: "anthropic", base_url: options.fake.url, api_key_env: UPSTREAM_KEY_ENV } },
  routes: { claude: { api: "anthropic", targets: [{ provider: "a", model: "claude-sonnet-5-5" }] } },
  tenants: options.tenants,
})

/** Starts one copy in the current scope; returns its URL. */
export const startCopy = (raw: Record<string, unknown>, dir: string, store: Layer.Layer<Store, unknown>) =>
  Effect.gen(function* () {
    const { config } = yield* decodeConfig(raw, {
      path: join(dir, "tollgate.yaml"),
      mode: "serve",
      prices: PRICES,
    })
    const context = yield* Layer.build(appLayer(config, { store }))
    return Context.get(context, Server).url
  }).pipe(withEnv({ [UPSTREAM_KEY_ENV]: UPSTREAM_KEY }))

/** One Anthropic request; resolves with the status (the body is read to the end). */
export const sendTo = (
  url: string,
  key: string,
  body: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", ...headers },
      body: JSON.stringify({
        model: "claude",
        max_tokens: 8,
        messages: [{ role: "user", content: "hi" }],
        ...body,
      }),
    })
    await response.text()
    return response.status
  })
