import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { baseConfig, decode, patch, problemsOf } from "./fixtures.js"

/** `tenants.NAME.limits.queue` and `server.max_concurrent_requests` (ADR 0057). */
describe("the waiting queue's config", () => {
  it.effect(
    "queue.max_wait is a duration; max_length defaults to 100; the gateway-wide cap is optional",
    () =>
      Effect.gen(function* () {
        let raw = patch(baseConfig(), ["tenants", "acme", "limits"], {
          concurrent_requests: 4,
          queue: { max_wait: "2s" },
        })
        raw = patch(raw, ["server", "max_concurrent_requests"], 100)
        const { config } = yield* decode(raw)
        assert.deepStrictEqual(config.tenants.get("acme")!.limits.queue, { maxWaitMs: 2_000, maxLength: 100 })
        assert.strictEqual(config.server.maxConcurrentRequests, 100)
        const plain = yield* decode(
          patch(baseConfig(), ["tenants", "acme", "limits"], { queue: { max_wait: "500ms", max_length: 7 } }),
        )
        assert.deepStrictEqual(plain.config.tenants.get("acme")!.limits.queue, {
          maxWaitMs: 500,
          maxLength: 7,
        })
        assert.strictEqual(plain.config.server.maxConcurrentRequests, undefined)
        assert.strictEqual((yield* decode(baseConfig())).config.tenants.get("acme")!.limits.queue, undefined)
      }),
  )

  it.effect(
    "reports a missing or bad max_wait, a bad max_length and a bad gateway cap with their paths",
    () =>
      Effect.gen(function* () {
        let raw = patch(baseConfig(), ["tenants", "acme", "limits", "queue"], { max_length: 0 })
        raw = patch(raw, ["server", "max_concurrent_requests"], -1)
        const problems = yield* problemsOf(raw)
        assert.isTrue(
          problems.some((p) => p.startsWith("server.max_concurrent_requests:")),
          problems.join("\n"),
        )
        assert.isTrue(
          problems.some((p) => p.startsWith("tenants.acme.limits.queue.max_length:")),
          problems.join("\n"),
        )
        assert.isTrue(
          problems.some((p) => p.startsWith("tenants.acme.limits.queue.max_wait:")),
          problems.join("\n"),
        )
        const zero = yield* problemsOf(
          patch(baseConfig(), ["tenants", "acme", "limits", "queue"], { max_wait: "0s" }),
        )
        assert.strictEqual(zero.length, 1)
        assert.match(zero[0]!, /^tenants\.acme\.limits\.queue\.max_wait: /)
      }),
  )
})
