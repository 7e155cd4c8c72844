import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Agent, type Dispatcher } from "undici"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import type { TimeoutsConfig } from "../../src/config/model.js"
import { AttemptFailed, openAttempt } from "../../src/gateway/attempt.js"
import { Meter } from "../../src/meter/Meter.js"
import { dispatchUpstream, type UpstreamRequest } from "../../src/providers/transport.js"
import { Deadlines, layer as deadlinesLayer } from "../../src/reliability/Deadlines.js"
import { defaultConfig, eventually, startHarness } from "../support/harness.js"

const TIMEOUTS: TimeoutsConfig = { connectMs: 5_000, firstTokenMs: 60_000, idleMs: 30_000, totalMs: 600_000 }

/** What an attempt sends through: the gateway's side of a provider client, over `agent`. */
const clientOver = (agent: Agent) => ({
  api: "anthropic" as const,
  dispatch: (upstream: UpstreamRequest, handler: Dispatcher.DispatchHandler) =>
    dispatchUpstream(agent, upstream, handler),
})

/** The attempt's services: the deadline sweeper (on the test's Clock) and the meters. */
const attemptEnv = Effect.all({ deadlines: Deadlines, meters: Meter })
const envLayer = Layer.merge(deadlinesLayer, Meter.layer)

/** A fake provider and a keep-alive pool, for the life of the test's scope. */
const upstream = Effect.acquireRelease(
  Effect.promise(async () => ({
    fake: await startFakeProvider(),
    agent: new Agent({ headersTimeout: 0, bodyTimeout: 0 }),
  })),
  ({ fake, agent }) => Effect.promise(() => Promise.all([fake.close(), agent.destroy()])),
)

const request = (fake: FakeProviderHandle, scenario: string) => ({
  endpoint: "/v1/messages" as const,
  origin: fake.url,
  path: "/v1/messages",
  headers: { "content-type": "application/json", "x-fake-scenario": scenario },
  body: Buffer.from(
    JSON.stringify({ model: "m", max_tokens: 16, stream: true, messages: [{ role: "user", content: "hi" }] }),
  ),
})

/** Waits (real time, for real sockets) until the fake has `n` requests, at most 5 s. */
const requestsReach = (fake: FakeProviderHandle, n: number) =>
  Effect.promise(async () => {
    for (let waited = 0; fake.requests().count < n && waited < 5_000; waited += 10)
      await new Promise((r) => setTimeout(r, 10))
  })

/** Waits (real time) until the fake saw its last request aborted; the time it took, ms (fails past 1 s). */
const abortedWithin1s = (fake: FakeProviderHandle) =>
  Effect.promise(async () => {
    const start = performance.now()
    while (fake.requests().recent.at(-1)?.aborted !== true) {
      if (performance.now() - start > 1_000)
        throw new Error("the upstream request was not aborted within 1 s")
      await new Promise((r) => setTimeout(r, 10))
    }
    return performance.now() - start
  })

describe("attempt timeouts run on the Clock service (TestClock, no real waiting for them)", () => {
  for (const [name, scenario, timeouts, reason] of [
    ["first_token", "hang-before-headers", TIMEOUTS, "first_token"],
    ["idle (a stream prelude that stalls)", "hang-after:0-tokens", TIMEOUTS, "idle"],
    ["total", "hang-before-headers", { ...TIMEOUTS, totalMs: 10_000 }, "total"],
  ] as const) {
    it.effect(
      `${name}: the attempt fails with ${reason} when the test clock passes it, and the upstream is aborted`,
      () =>
        Effect.gen(function* () {
          const { fake, agent } = yield* upstream
          const env = yield* attemptEnv
          const scope = yield* Scope.make()
          const fiber = yield* Effect.forkChild(
            Scope.provide(openAttempt(env, clientOver(agent), request(fake, scenario), timeouts), scope),
          )
          yield* requestsReach(fake, 1)
          // A millisecond before the deadline nothing has fired.
          const limit =
            reason === "total"
              ? timeouts.totalMs
              : reason === "idle"
                ? timeouts.idleMs
                : timeouts.firstTokenMs
          yield* TestClock.adjust(`${limit - 1} millis`)
          assert.isUndefined(fiber.pollUnsafe())
          yield* TestClock.adjust("100 millis")
          yield* Effect.yieldNow
          // Done in this turn: the sweep that found it overdue ran when the test clock moved.
          assert.isDefined(fiber.pollUnsafe())
          const failed = yield* Fiber.join(fiber)
          assert.instanceOf(failed, AttemptFailed)
          assert.strictEqual((failed as AttemptFailed).reason, reason)
          yield* abortedWithin1s(fake)
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(envLayer)),
    )
  }
})

describe("cancellation is structure: interrupting or closing aborts the upstream request", () => {
  it.live("Effect.timeout around an attempt aborts the upstream request within 1 s", () =>
    Effect.gen(function* () {
      const { fake, agent } = yield* upstream
      const env = yield* attemptEnv
      const result = yield* openAttempt(
        env,
        clientOver(agent),
        request(fake, "hang-before-headers"),
        TIMEOUTS,
      ).pipe(Effect.scoped, Effect.timeoutOption("100 millis"))
      assert.strictEqual(result._tag, "None")
      yield* abortedWithin1s(fake)
    }).pipe(Effect.provide(envLayer)),
  )

  it.live("closing the attempt's scope aborts a response that arrived but was never read", () =>
    Effect.gen(function* () {
      const { fake, agent } = yield* upstream
      const env = yield* attemptEnv
      const scope = yield* Scope.make()
      const response = yield* Scope.provide(
        openAttempt(env, clientOver(agent), request(fake, "hang-after:2-tokens"), TIMEOUTS),
        scope,
      )
      assert.notInstanceOf(response, AttemptFailed)
      assert.isFalse(fake.requests().recent.at(-1)?.aborted ?? true)
      yield* Scope.close(scope, Exit.void)
      yield* abortedWithin1s(fake)
    }).pipe(Effect.provide(envLayer)),
  )
})

describe("the drain interrupts what is still open after the grace", () => {
  it("a stream still open when shutdown_grace ends gets the error event and its upstream request is aborted within 1 s", async () => {
    const h = await startHarness({
      config: (fakes, keyHash, dir) => ({
        ...defaultConfig(fakes, keyHash, dir),
        server: { listen: "127.0.0.1:0", shutdown_grace: "100ms" },
      }),
    })
    try {
      const response = await fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: {
          "x-api-key": h.key,
          "content-type": "application/json",
          "x-fake-scenario": "hang-after:2-tokens",
        },
        body: JSON.stringify({
          model: "claude",
          max_tokens: 16,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
        }),
      })
      const reader = response.body!.getReader()
      expect((await reader.read()).done).toBe(false)
      const start = performance.now()
      const closing = h.close()
      await eventually(() => h.fakes[0]!.requests().recent.at(-1)?.aborted === true, 2_000)
      // The grace (100 ms), then the interruption closes the request's scope, which aborts the upstream call.
      expect(performance.now() - start).toBeLessThan(1_100)
      let rest = ""
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        rest += Buffer.from(chunk.value).toString("utf8")
      expect(rest).toContain("event: error")
      expect(rest).toContain("overloaded_error")
      await closing
      expect(h.records().at(-1)).toMatchObject({ status: 200, incomplete: true, error: "shutdown" })
    } finally {
      await h.close()
    }
  })
})
