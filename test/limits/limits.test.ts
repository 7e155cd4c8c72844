import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { LiveConfig } from "../../src/config/LiveConfig.js"
import { Config, makeTestConfig } from "../../src/config/Config.js"
import type { TenantConfig } from "../../src/config/model.js"
import * as Limits from "../../src/limits/Limits.js"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { Store, StoreError, type StoreService } from "../../src/limits/Store.js"
import { noopTelemetry, Telemetry, type TelemetryService } from "../../src/ops/Telemetry.js"

/** The Limits facade and the per-tenant session cap (`sessions.max_per_tenant`). */

const tenant: TenantConfig = {
  name: "acme",
  keys: [],
  routes: "*",
  limits: { requestsPerMinute: undefined, tokensPerMinute: undefined, concurrentRequests: undefined },
  budgets: { day: undefined, week: undefined, month: undefined, session: undefined },
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
    budgets: { ...tenant.budgets, month: { limitMicroUsd: 100, mode: "hard" } },
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
        budgets: first.budgets,
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

describe("Limits: day, week and key budgets (issue #19)", () => {
  const hard = (limitMicroUsd: number) => ({ limitMicroUsd, mode: "hard" as const })
  const noKeyBudgets = { day: undefined, week: undefined, month: undefined }
  const weekly: TenantConfig = {
    ...tenant,
    name: "weekly",
    budgets: { ...tenant.budgets, week: hard(400) },
  }
  const ci = { keyId: "ci", keyBudgets: { ...noKeyBudgets, day: hard(250) } }
  const other = { keyId: "other", keyBudgets: noKeyBudgets }

  it.effect("a key's day budget refuses with 402 naming it; the tenant's week refuses the other key", () =>
    Effect.gen(function* () {
      const store = makeMemoryStore()
      const limits = Limits.make(store, () => Date.UTC(2026, 11, 2, 10, 0, 0))
      const admit = (key: Limits.AdmissionKey) => limits.admit({ ...input(undefined), tenant: weekly, key })
      const first = yield* admit(ci)
      assert.deepStrictEqual(
        first.budgets.map((b) => [b.name, b.key ?? null, b.period, b.check?.limit ?? null]),
        [
          ["day", "ci", "2026-12-02", 250],
          ["week", null, "2026-W49", 400],
          ["month", null, "2026-12", null],
        ],
      )
      assert.isTrue(first.hard)
      yield* admit(ci)
      const byKey = yield* Effect.flip(admit(ci))
      if (byKey._tag !== "BudgetExceeded") return assert.fail(`expected BudgetExceeded, got ${byKey._tag}`)
      assert.strictEqual(byKey.budget, "key.day")
      assert.strictEqual(byKey.message, "the key's day budget has no money left for this request")
      // The week holds 200 of ci's; the other key has no budget of its own, so the tenant's week stops it at 400.
      yield* admit(other)
      yield* admit(other)
      const byTenant = yield* Effect.flip(admit(other))
      if (byTenant._tag !== "BudgetExceeded")
        return assert.fail(`expected BudgetExceeded, got ${byTenant._tag}`)
      assert.strictEqual(byTenant.budget, "week")
      assert.strictEqual(byTenant.message, "the tenant's week budget has no money left for this request")
    }),
  )

  it.effect(
    "settle goes to the day the request reserved in, after midnight too; extend names the key's day",
    () =>
      Effect.gen(function* () {
        const store = makeMemoryStore()
        let now = Date.UTC(2026, 11, 2, 23, 59, 59, 900)
        const limits = Limits.make(store, () => now)
        const admission = yield* limits.admit({ ...input(undefined), tenant: weekly, key: ci })
        assert.deepStrictEqual(yield* limits.extend(admission, 200), { refused: "key.day" })
        assert.strictEqual(yield* limits.extend(admission, 150), "extended")
        now = Date.UTC(2026, 11, 3, 0, 0, 0, 100)
        yield* limits.settle(admission, 180, 10)
        const state = yield* store.tenantState("weekly", now, [
          { name: "day", key: "ci", period: "2026-12-02" },
          { name: "day", key: "ci", period: "2026-12-03" },
          { name: "week", key: undefined, period: "2026-W49" },
        ])
        assert.deepStrictEqual(state.budgets, [
          { spend: 180, reserved: 0 },
          { spend: 0, reserved: 0 },
          { spend: 180, reserved: 0 },
        ])
        // The new day starts at 0: the key may reserve its whole day budget again.
        const next = yield* limits.admit({ ...input(undefined), tenant: weekly, key: ci, reserve: 200 })
        assert.strictEqual(next.budgets[0]!.period, "2026-12-03")
      }),
  )

  it.effect("while the store is down a key's hard budget gets 503, a key without one is served locally", () =>
    Effect.gen(function* () {
      const down: StoreService = {
        ...makeMemoryStore(),
        admit: () => Effect.fail(new StoreError({ message: "down" })),
      }
      const limits = Limits.make(down, () => Date.UTC(2026, 11, 2, 10, 0, 0))
      const refused = yield* Effect.flip(limits.admit({ ...input(undefined), key: ci }))
      assert.strictEqual(refused._tag, "StoreUnavailable")
      const local = yield* limits.admit({ ...input(undefined), key: other })
      assert.strictEqual(local.via, "local")
      assert.deepStrictEqual(local.budgets, [])
    }),
  )
})
