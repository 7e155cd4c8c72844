import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { LiveConfig } from "../../src/config/LiveConfig.js"
import { Config, makeTestConfig } from "../../src/config/Config.js"
import type { TenantConfig } from "../../src/config/model.js"
import * as Limits from "../../src/limits/Limits.js"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { Store } from "../../src/limits/Store.js"
import { noopTelemetry, Telemetry, type TelemetryService } from "../../src/ops/Telemetry.js"

/** The Limits facade and the per-tenant session cap (`sessions.max_per_tenant`). */

const tenant: TenantConfig = {
  name: "acme",
  keys: [],
  routes: "*",
  limits: { requestsPerMinute: undefined, tokensPerMinute: undefined, concurrentRequests: undefined },
  budgets: { month: undefined, session: undefined },
}

/** Telemetry that records the `sessionsEvicted` calls (and ignores the rest). */
const recording = () => {
  const evicted: Array<[string, number]> = []
  const telemetry: TelemetryService = {
    ...noopTelemetry,
    sessionsEvicted: (name, count) => {
      evicted.push([name, count])
    },
  }
  return { telemetry, evicted }
}

const input = (sessionId: string | undefined, over: Partial<Limits.AdmissionInput> = {}) => ({
  tenant,
  tokenCost: 10,
  reserve: 100,
  sessionId,
  ...over,
})

describe("Limits session cap", () => {
  it.effect("an admission that evicts sessions reports the count to telemetry; others report nothing", () =>
    Effect.gen(function* () {
      const store = makeMemoryStore()
      const { telemetry, evicted } = recording()
      let now = Date.UTC(2026, 11, 2, 10, 0, 0)
      const limits = Limits.make(store, () => now, telemetry, 2)
      for (const id of ["s1", "s2"]) {
        const admission = yield* limits.admit(input(id))
        assert.strictEqual(admission.admitted.sessionsEvicted, 0)
        now += 1_000
      }
      // A request in a live session at the cap, and one without a session: no eviction.
      yield* limits.admit(input("s1"))
      yield* limits.admit(input(undefined))
      // count_tokens (no tokens, no money) has no session in the store: no eviction either.
      yield* limits.admit(input("s3", { tokenCost: 0, reserve: 0 }))
      assert.deepStrictEqual(evicted, [])
      now += 1_000
      const third = yield* limits.admit(input("s3"))
      assert.strictEqual(third.admitted.sessionsEvicted, 1)
      assert.deepStrictEqual(evicted, [["acme", 1]])
      const state = yield* store.tenantState("acme", now)
      assert.deepStrictEqual(state.sessions.map((s) => s.id).sort(), ["s1", "s3"])
    }),
  )

  it.effect("the layer caps sessions at the config's sessions.max_per_tenant", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.UTC(2026, 11, 2, 10, 0, 0))
      const config = yield* makeTestConfig({ sessions: { max_per_tenant: 1 } })
      assert.strictEqual(config.sessions.maxPerTenant, 1)
      const store = makeMemoryStore()
      const { telemetry, evicted } = recording()
      const layer = Limits.layer.pipe(
        Layer.provide(
          Layer.mergeAll(
            Layer.succeed(Store, store),
            Layer.succeed(Telemetry, telemetry),
            LiveConfig.layer.pipe(Layer.provide(Config.layerFrom(config))),
          ),
        ),
      )
      yield* Effect.gen(function* () {
        const limits = yield* Limits.Limits
        yield* limits.admit(input("s1"))
        yield* TestClock.adjust(1_000)
        yield* limits.admit(input("s2"))
        yield* TestClock.adjust(1_000)
        yield* limits.admit(input("s3"))
      }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(evicted, [
        ["acme", 1],
        ["acme", 1],
      ])
    }),
  )
})

describe("Limits: admission before the body learns from the store's answers", () => {
  const hardTenant: TenantConfig = {
    ...tenant,
    name: "spent",
    budgets: { month: { limitMicroUsd: 100, mode: "hard" }, session: undefined },
  }

  it.effect("a refusal read before midnight and answered after it does not lock the new month", () =>
    Effect.gen(function* () {
      const store = makeMemoryStore()
      let now = Date.UTC(2026, 0, 31, 23, 59, 59, 995)
      // January is spent.
      const first = yield* Limits.make(store, () => now).admit({ ...input(undefined), tenant: hardTenant })
      yield* store.settle({
        tenant: "spent",
        now,
        minute: first.admitted.minute,
        month: first.admitted.month,
        sessionId: undefined,
        reserved: 100,
        cost: 100,
        tokenDelta: 0,
      })
      // The store reads January at 23:59:59.995; its answer arrives at 00:00:00.010.
      const slow = {
        ...store,
        admit: (request: Parameters<typeof store.admit>[0]) =>
          Effect.tap(store.admit(request), () =>
            Effect.sync(() => {
              now = Date.UTC(2026, 1, 1, 0, 0, 0, 10)
            }),
          ),
      }
      const limits = Limits.make(slow, () => now)
      now = Date.UTC(2026, 0, 31, 23, 59, 59, 995)
      const refused = yield* Effect.flip(limits.admit({ ...input(undefined), tenant: hardTenant }))
      assert.strictEqual(refused._tag, "BudgetExceeded")
      // February: nothing spent, and the gate knows nothing against it.
      assert.strictEqual(limits.enter(hardTenant, "/v1/messages"), undefined)
    }),
  )

  it.effect(
    "after a request-limit refusal the gate refuses until the window admits one more, measured from the store's read",
    () =>
      Effect.gen(function* () {
        const store = makeMemoryStore()
        let now = Date.UTC(2026, 11, 2, 10, 0, 30)
        const limited: TenantConfig = {
          ...tenant,
          name: "limited",
          limits: { ...tenant.limits, requestsPerMinute: 2 },
        }
        const limits = Limits.make(store, () => now)
        yield* limits.admit({ ...input(undefined), tenant: limited })
        yield* limits.admit({ ...input(undefined), tenant: limited })
        const refused = yield* Effect.flip(limits.admit({ ...input(undefined), tenant: limited }))
        assert.strictEqual(refused._tag, "RateLimited")
        assert.strictEqual(limits.enter(limited, "/v1/messages")?._tag, "RateLimited")
        // Two in the current minute, none before: one more fits once this minute becomes the previous one
        // and weighs (1 − elapsed) × 2 ≤ 1, that is 30 s into the next minute.
        now = Date.UTC(2026, 11, 2, 10, 1, 29, 990)
        assert.strictEqual(limits.enter(limited, "/v1/messages")?._tag, "RateLimited")
        now = Date.UTC(2026, 11, 2, 10, 1, 30)
        assert.strictEqual(limits.enter(limited, "/v1/messages"), undefined)
        assert.strictEqual((yield* limits.admit({ ...input(undefined), tenant: limited })).via, "store")
      }),
  )
})
