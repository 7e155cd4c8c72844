import { type Fiber, Scheduler } from "effect"

/**
 * Operations a request fiber runs before it yields to others: Effect's
 * default `FiberRef.currentMaxOpsBeforeYield` (2048), read here once instead
 * of from the fiber's refs at every operation (`Scheduler.defaultShouldYield`
 * does a map lookup per operation, about 40 per request). Request fibers
 * never change it, nor their scheduling priority (0, the default); an
 * `Effect.withMaxOpsBeforeYield` or `withSchedulingPriority` inside a request
 * fiber would be ignored (ADR 0033).
 */
export const MAX_OPS_BEFORE_YIELD = 2048

const shouldYield = (fiber: Fiber.RuntimeFiber<unknown, unknown>): number | false =>
  fiber.currentOpCount > MAX_OPS_BEFORE_YIELD ? 0 : false

/**
 * The scheduler of request fibers (ADR 0033): one task queue for all of
 * them, drained in one microtask, and through a timer after 2048 microtask
 * drains in a row so I/O is never starved — Effect's `MixedScheduler` as it
 * was before 3.20.
 *
 * Effect 3.20's default gives each fiber its own queue, found through a
 * `WeakMap` keyed by the fiber, and its own microtask per resumption, to
 * keep the `AsyncLocalStorage` contexts of concurrent fibers apart
 * (Effect-TS/effect#6124). Request fibers use no `AsyncLocalStorage`, and
 * each of them resumes twice (the attempt, the relay): with this queue,
 * every fiber resumed in the same event-loop turn shares one microtask and no
 * `WeakMap` entry is made. A task that throws ends the process (an
 * unhandled rejection), as with Effect's own schedulers; the tasks Effect
 * schedules (a fiber's run) catch what the fiber throws.
 */
export const makeSharedScheduler = (maxNextTickBeforeTimer = 2048): Scheduler.Scheduler => {
  const tasks = new Scheduler.PriorityBuckets()
  let running = false
  const drain = (depth: number): void => {
    const buckets = tasks.buckets
    tasks.buckets = []
    for (const [, toRun] of buckets) {
      for (let i = 0; i < toRun.length; i++) toRun[i]!()
    }
    if (tasks.buckets.length === 0) running = false
    else starve(depth)
  }
  const starve = (depth: number): void => {
    if (depth >= maxNextTickBeforeTimer) setTimeout(() => drain(0), 0)
    else void Promise.resolve().then(() => drain(depth + 1))
  }
  return Scheduler.make((task, priority) => {
    tasks.scheduleTask(task, priority)
    if (!running) {
      running = true
      starve(0)
    }
  }, shouldYield)
}
