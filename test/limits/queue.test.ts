import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { Config, makeTestConfig } from "../../src/config/Config.js"
import { LiveConfig } from "../../src/config/LiveConfig.js"
import type { QueueConfig, TenantConfig } from "../../src/config/model.js"
import { RateLimited } from "../../src/domain/errors.js"
import type { Queued } from "../../src/limits/gate.js"
import * as Limits from "../../src/limits/Limits.js"
import { makeMemoryStore } from "../../src/limits/memoryStore.js"
import { Store, type StoreService } from "../../src/limits/Store.js"
import { noopTelemetry, Telemetry, type TelemetryService } from "../../src/ops/Telemetry.js"
import { tenantConfig } from "../support/tenants.js"

/**
 * The waiting queue (ADR 0057) under TestClock: the Limits layer over the
 * memory store, its timers on the test's clock.
 */

const T0 = Date.UTC(2026, 11, 3, 10, 0, 0)

const tenant = (
  name: string,
  limits: Partial<TenantConfig["limits"]>,
  queue: Partial<QueueConfig> | undefined,
): TenantConfig =>
  tenantConfig(name, {
    ...limits,
    ...(queue === undefined ? {} : { queue: { maxWaitMs: 10_000, maxLength: 100, ...queue } }),
  })

/** Telemetry that records the queue's calls. */
const recording = () => {
  const queued = new Map<string, number>()
  const waits: Array<{ tenant: string; ms: number; timedOut: boolean }> = []
  const telemetry: TelemetryService = {
    ...noopTelemetry,
    queueEntered: (name) => {
      queued.set(name, (queued.get(name) ?? 0) + 1)
    },
    queueLeft: (name, ms, timedOut) => {
      queued.set(name, (queued.get(name) ?? 0) - 1)
      waits.push({ tenant: name, ms, timedOut })
    },
  }
  return { telemetry, queued, waits }
}

/** The memory store, counting admission calls. */
const countingStore = () => {
  const store = makeMemoryStore()
  const calls = { admit: 0 }
  const counted: StoreService = {
    ...store,
    admit: (request) => {
      calls.admit++
      return store.admit(request)
    },
  }
  return { store: counted, calls }
}

/** Runs `body` with the Limits layer (config `server`), the store and telemetry given. */
const withLimits = <A, E>(
  options: { server?: Record<string, unknown>; store?: StoreService; telemetry?: TelemetryService },
  body: (limits: Limits.Limits["Service"]) => Effect.Effect<A, E>,
) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(T0)
    const config = yield* makeTestConfig(options.server === undefined ? {} : { server: options.server })
    const layer = Limits.layer.pipe(
      Layer.provide(
        Layer.mergeAll(
          Layer.succeed(Store, options.store ?? makeMemoryStore()),
          Layer.succeed(Telemetry, options.telemetry ?? noopTelemetry),
          LiveConfig.layer.pipe(Layer.provide(Config.layerFrom(config))),
        ),
      ),
    )
    return yield* Effect.gen(function* () {
      return yield* body(yield* Limits.Limits)
    }).pipe(Effect.provide(layer))
  })

const input = (t: TenantConfig, waitUntil: number | undefined): Limits.AdmissionInput => ({
  tenant: t,
  tokenCost: 0,
  reserve: 1,
  sessionId: undefined,
  waitUntil,
})

/** Forks `n` admissions of `t` arriving at once; each resolves to the ms after T0 it was admitted, or its refusal. */
const burst = (limits: Limits.Limits["Service"], t: TenantConfig, n: number, waitUntil: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    () =>
      Effect.forkChild(
        limits.admit(input(t, waitUntil)).pipe(
          Effect.flatMap(() =>
            Effect.clockWith((clock) => Effect.succeed(clock.currentTimeMillisUnsafe() - T0)),
          ),
          Effect.uninterruptible,
        ),
      ),
  )

/** Advances the clock `seconds` one second at a time, then collects every outcome. */
const settle = <E>(fibers: ReadonlyArray<Fiber.Fiber<number, E>>, seconds: number) =>
  Effect.gen(function* () {
    for (let s = 0; s < seconds; s++) yield* TestClock.adjust(1_000)
    return yield* Effect.forEach(fibers, (fiber) => Fiber.await(fiber))
  })

describe("the waiting queue: a burst over the rate limit", () => {
  it.effect("is served as the window allows, first come first served, one store call per window step", () => {
    const { store, calls } = countingStore()
    const { telemetry, queued, waits } = recording()
    const a = tenant("a", { requestsPerMinute: 60 }, { maxWaitMs: 120_000, maxLength: 100 })
    return withLimits({ store, telemetry }, (limits) =>
      Effect.gen(function* () {
        const fibers = yield* burst(limits, a, 90, T0 + 120_000)
        const exits = yield* settle(fibers, 125)
        const times = exits.map((exit) => {
          assert.isTrue(Exit.isSuccess(exit), "every request of the burst is served within max_wait")
          return (exit as Exit.Success<number>).value
        })
        // The window's 60 at once, then the sliding window lets one more in per second of the next minute.
        assert.deepStrictEqual(times.slice(0, 60), Array(60).fill(0))
        for (let k = 1; k <= 30; k++) {
          const at = times[59 + k]!
          assert.isAtLeast(
            at,
            60_000 + (k - 1) * 1_000,
            `request ${60 + k} is admitted no earlier than the window allows`,
          )
          assert.isAtMost(
            at,
            60_000 + (k + 1) * 1_000,
            `request ${60 + k} is admitted as soon as the window allows`,
          )
        }
        // In order of arrival.
        assert.deepStrictEqual(
          times,
          [...times].sort((x, y) => x - y),
        )
        // Only the head asks the store: not one call per waiter per step.
        assert.isAtMost(calls.admit, 90 + 2 * 30)
        assert.strictEqual(queued.get("a"), 0)
        assert.strictEqual(waits.length, 30)
        assert.isFalse(waits.some((w) => w.timedOut))
      }),
    )
  })

  it.effect(
    "no request waits past max_wait: the ones the window cannot admit in time get 429 by their deadline",
    () => {
      const { telemetry, waits } = recording()
      const a = tenant("a", { requestsPerMinute: 60 }, { maxWaitMs: 65_000, maxLength: 100 })
      return withLimits({ telemetry }, (limits) =>
        Effect.gen(function* () {
          const fibers = yield* burst(limits, a, 90, T0 + 65_000)
          // The clock runs well past the deadline: any request still waiting would show.
          const exits = yield* settle(fibers, 200)
          let served = 0
          for (const exit of exits) {
            if (Exit.isSuccess(exit)) {
              served++
              assert.isAtMost(exit.value, 65_000)
            } else {
              const error = exit.cause.reasons[0]
              assert.isTrue(
                error !== undefined && error._tag === "Fail" && error.error instanceof RateLimited,
              )
            }
          }
          // 60 at once, then the ones the next minute lets in before the deadline (61 s … 65 s).
          assert.isAtLeast(served, 64)
          assert.isAtMost(served, 66)
          for (const w of waits) assert.isAtMost(w.ms, 65_000)
          assert.strictEqual(waits.filter((w) => w.timedOut).length, 90 - served)
        }),
      )
    },
  )

  it.effect("while requests wait, a new one queues behind them without asking the store", () => {
    const { store, calls } = countingStore()
    const a = tenant("a", { requestsPerMinute: 2 }, { maxWaitMs: 120_000 })
    return withLimits({ store }, (limits) =>
      Effect.gen(function* () {
        const first = yield* burst(limits, a, 3, T0 + 120_000)
        yield* TestClock.adjust(1_000)
        assert.strictEqual(calls.admit, 3)
        const later = yield* burst(limits, a, 10, T0 + 121_000)
        yield* TestClock.adjust(0)
        assert.strictEqual(calls.admit, 3, "the ten behind the waiting one asked nothing yet")
        const exits = yield* settle([...first, ...later], 125)
        const times = exits.filter(Exit.isSuccess).map((exit) => exit.value)
        assert.deepStrictEqual(
          times,
          [...times].sort((x, y) => x - y),
          "served in order of arrival",
        )
      }),
    )
  })

  it.effect("past max_length requests waiting for their window, more get 429 at once naming it", () => {
    const { telemetry, queued } = recording()
    const a = tenant("a", { requestsPerMinute: 1 }, { maxWaitMs: 120_000, maxLength: 2 })
    return withLimits({ telemetry }, (limits) =>
      Effect.gen(function* () {
        const fibers = yield* burst(limits, a, 5, T0 + 120_000)
        yield* TestClock.adjust(0)
        assert.strictEqual(queued.get("a"), 2)
        const exits = yield* settle(fibers, 130)
        const messages = exits.filter(Exit.isFailure).map((exit) => {
          const reason = exit.cause.reasons[0]
          return reason !== undefined && reason._tag === "Fail" ? (reason.error as RateLimited).message : ""
        })
        // One at once; two wait (the window lets one in per minute); two are refused at once.
        assert.strictEqual(messages.filter((m) => m.includes("limits.queue.max_length")).length, 2)
        assert.strictEqual(queued.get("a"), 0)
      }),
    )
  })

  it.effect(
    "a request the store's retry time shows cannot be served within max_wait gets 429 at once",
    () => {
      const a = tenant("a", { requestsPerMinute: 10 }, { maxWaitMs: 5_000 })
      return withLimits({}, (limits) =>
        Effect.gen(function* () {
          const fibers = yield* burst(limits, a, 12, T0 + 5_000)
          yield* TestClock.adjust(0)
          const exits = yield* Effect.forEach(fibers, (fiber) => Fiber.await(fiber))
          assert.strictEqual(exits.filter(Exit.isSuccess).length, 10)
          const refused = exits.filter(Exit.isFailure)
          assert.strictEqual(refused.length, 2)
        }),
      )
    },
  )
})

/** A test driver for the gate: requests that hold their place `holdMs`, granted at once or from the queue. */
const gateDriver = (limits: Limits.Limits["Service"]) => {
  const holding: Array<{ t: TenantConfig; until: number }> = []
  const served = new Map<string, Array<number>>()
  const refused = new Map<string, number>()
  let now = T0
  const grant = (t: TenantConfig, holdMs: number) => {
    holding.push({ t, until: now + holdMs })
    served.set(t.name, [...(served.get(t.name) ?? []), now - T0])
  }
  const send = (t: TenantConfig, holdMs: number) => {
    const outcome = limits.enter(t, "/v1/messages")
    if (outcome === undefined) return grant(t, holdMs)
    if (outcome._tag !== "Queued") {
      refused.set(t.name, (refused.get(t.name) ?? 0) + 1)
      return
    }
    ;(outcome as Queued).resume = (refusal) => {
      if (refusal === undefined) grant(t, holdMs)
      else refused.set(t.name, (refused.get(t.name) ?? 0) + 1)
    }
  }
  /** Moves the clock on in steps of `stepMs`, ending requests whose time is up (which frees their places). */
  const run = (ms: number, stepMs = 100) =>
    Effect.gen(function* () {
      for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
        yield* TestClock.adjust(stepMs)
        now += stepMs
        for (let i = 0; i < holding.length;) {
          const h = holding[i]!
          if (h.until <= now) {
            holding.splice(i, 1)
            limits.leave(h.t)
          } else i++
        }
      }
    })
  return { send, run, served, refused }
}

describe("the waiting queue: places under the concurrency caps", () => {
  it.effect("two tenants flooding a gateway-wide cap get shares within 10 % of equal", () => {
    const { telemetry, queued } = recording()
    const queue = { maxWaitMs: 600_000, maxLength: 1_000 }
    const a = tenant("a", {}, queue)
    const b = tenant("b", {}, queue)
    return withLimits({ server: { max_concurrent_requests: 4 }, telemetry }, (limits) =>
      Effect.gen(function* () {
        const driver = gateDriver(limits)
        // a floods first and harder: 1,000 waiting against b's 300.
        for (let i = 0; i < 1_000; i++) driver.send(a, 1_000)
        for (let i = 0; i < 300; i++) driver.send(b, 1_000)
        yield* driver.run(60_000)
        const servedA = driver.served.get("a")!.length
        const servedB = driver.served.get("b")!.length
        // 4 places × 60 one-second requests: 240 served, half each.
        assert.isAtLeast(servedA + servedB, 236)
        assert.isAtMost(Math.abs(servedA - servedB) / ((servedA + servedB) / 2), 0.1)
        assert.strictEqual(queued.get("a")! + queued.get("b")!, 1_300 - servedA - servedB)
      }),
    )
  })

  it.effect("a tenant with one request waiting is not starved by one with 1,000", () => {
    const queue = { maxWaitMs: 600_000, maxLength: 1_000 }
    const a = tenant("a", {}, queue)
    const b = tenant("b", {}, queue)
    return withLimits({ server: { max_concurrent_requests: 2 } }, (limits) =>
      Effect.gen(function* () {
        const driver = gateDriver(limits)
        for (let i = 0; i < 1_000; i++) driver.send(a, 1_000)
        yield* driver.run(500)
        driver.send(b, 1_000)
        yield* driver.run(1_500)
        // b's one request took the first place that freed (at 1 s), not the 999th.
        assert.deepStrictEqual(driver.served.get("b"), [1_000])
      }),
    )
  })

  it.effect(
    "concurrent_requests: a request waits for its tenant's place, and no longer than max_wait",
    () => {
      const { telemetry, waits } = recording()
      const a = tenant("a", { concurrentRequests: 1 }, { maxWaitMs: 2_000, maxLength: 5 })
      const plain = tenant("plain", { concurrentRequests: 1 }, undefined)
      return withLimits({ telemetry }, (limits) =>
        Effect.gen(function* () {
          const driver = gateDriver(limits)
          driver.send(a, 1_500) // served at 0, ends at 1.5 s
          driver.send(a, 10_000) // waits 1.5 s, then holds the place 10 s
          driver.send(a, 1_000) // waits: times out at 2 s
          for (let i = 0; i < 10; i++) driver.send(a, 1_000) // 3 more fit the queue (max_length 5), 7 refused at once
          assert.strictEqual(driver.refused.get("a"), 7)
          driver.send(plain, 1_000)
          driver.send(plain, 1_000) // no queue: 429 at once, as before
          assert.strictEqual(driver.refused.get("plain"), 1)
          yield* driver.run(5_000)
          assert.deepStrictEqual(driver.served.get("a"), [0, 1_500])
          assert.strictEqual(driver.refused.get("a"), 7 + 4)
          const timedOut = waits.filter((w) => w.timedOut)
          assert.strictEqual(timedOut.length, 4)
          for (const w of timedOut) assert.strictEqual(w.ms, 2_000)
          assert.strictEqual(
            limits.enter(plain, "/v1/messages"),
            undefined,
            "the plain tenant's place was given back",
          )
        }),
      )
    },
  )

  it.effect("a waiting request whose client leaves gives up its place in the queue", () => {
    const a = tenant("a", { concurrentRequests: 1 }, { maxWaitMs: 60_000 })
    return withLimits({}, (limits) =>
      Effect.gen(function* () {
        assert.strictEqual(limits.enter(a, "/v1/messages"), undefined)
        const first = limits.enter(a, "/v1/messages") as Queued
        const second = limits.enter(a, "/v1/messages") as Queued
        const resumed: Array<string> = []
        first.resume = () => resumed.push("first")
        second.resume = (refusal) => resumed.push(refusal === undefined ? "second" : "second refused")
        first.cancel()
        limits.leave(a)
        assert.deepStrictEqual(resumed, ["second"])
      }),
    )
  })
})
