import { Effect, Fiber, FiberRef, Runtime, Scheduler } from "effect"
import { describe, expect, it } from "vitest"
import { MAX_OPS_BEFORE_YIELD, makeSharedScheduler } from "../../src/gateway/scheduler.js"

const runtimeWith = (scheduler: Scheduler.Scheduler) =>
  Runtime.setFiberRef(Runtime.defaultRuntime, FiberRef.currentScheduler, scheduler)

describe("makeSharedScheduler", () => {
  it("runs every task scheduled in one turn in one microtask, in priority order", async () => {
    const scheduler = makeSharedScheduler()
    const ran: Array<string> = []
    scheduler.scheduleTask(() => ran.push("b@1"), 1)
    scheduler.scheduleTask(() => ran.push("a@0"), 0)
    scheduler.scheduleTask(() => ran.push("c@1"), 1)
    expect(ran).toEqual([])
    await Promise.resolve()
    expect(ran).toEqual(["a@0", "b@1", "c@1"])
  })

  it("lets I/O callbacks run while a fiber yields forever (a timer turn after 2048 microtask drains)", async () => {
    const fiber = Runtime.runFork(runtimeWith(makeSharedScheduler()))(Effect.forever(Effect.yieldNow()))
    // With no timer turn, this callback would never run and the test would time out.
    await new Promise<void>((resolve) => setImmediate(resolve))
    await Effect.runPromise(Fiber.interrupt(fiber))
  })

  it("carries many fibers through asynchronous resumptions to the right results", async () => {
    const run = Runtime.runPromise(runtimeWith(makeSharedScheduler()))
    const step = (n: number) =>
      Effect.async<number>((resume) => {
        setImmediate(() => resume(Effect.succeed(n + 1)))
      })
    const results = await Promise.all(
      Array.from({ length: 500 }, (_, i) => run(Effect.flatMap(step(i), (n) => step(n * 2)))),
    )
    expect(results).toEqual(Array.from({ length: 500 }, (_, i) => (i + 1) * 2 + 1))
  })

  it(`a fiber that never suspends yields to the others every ${MAX_OPS_BEFORE_YIELD} operations`, async () => {
    const run = Runtime.runFork(runtimeWith(makeSharedScheduler()))
    let spins = 0
    // Not Effect.forever, which yields at every turn of its loop: this one never would by itself.
    const spin = (): Effect.Effect<never> =>
      Effect.flatMap(
        Effect.sync(() => spins++),
        spin,
      )
    const spinner = run(spin())
    let otherRanAfter = -1
    // Scheduled behind the spinner on the same queue: it runs only if the spinner yields.
    run(Effect.sync(() => (otherRanAfter = spins)))
    await new Promise<void>((resolve) => setImmediate(resolve))
    await Effect.runPromise(Fiber.interrupt(spinner))
    expect(otherRanAfter).toBeGreaterThan(0)
    // Two operations per spin (the flatMap and the sync): the first yield comes after ~2048 of them.
    expect(otherRanAfter).toBeLessThanOrEqual(MAX_OPS_BEFORE_YIELD)
  })
})
