import { Effect, Exit, Fiber, FiberId, type FiberRefs, Runtime, type RuntimeFlags, Supervisor } from "effect"

/**
 * Forks the request fibers (ADR 0041). `Runtime.runFork` derives each new
 * root fiber's FiberRefs from the runtime's: it copies them, forks every
 * one (a patch and an equality check per FiberRef) and sets the context —
 * the same result for every fiber of one runtime, bar the new fiber's id in
 * the stacks. FiberRefs values are immutable (a fiber that sets a FiberRef
 * gets a new value), so the request fibers can all start from one value
 * computed once: the FiberRefs of a first fiber forked by `runFork`.
 *
 * This builds Effect's fiber the way `Runtime.runFork` does without options
 * (the class is a forked fiber's constructor; it is added to the global
 * scope's root fibers and started at once). It reaches into Effect's
 * internals, so it checks their shape first and falls back to
 * `Runtime.runFork` when they differ, and test/gateway/requestFibers.test.ts
 * fails if it does, so an Effect upgrade cannot lose this silently.
 */

/** The part of Effect's fiber class this module uses. */
interface FiberRuntimeLike<A, E> extends Fiber.RuntimeFiber<A, E> {
  readonly start: (effect: Effect.Effect<A, E>) => void
}

type FiberRuntimeClass = new (
  fiberId: FiberId.Runtime,
  fiberRefs: FiberRefs.FiberRefs,
  runtimeFlags: RuntimeFlags.RuntimeFlags,
) => FiberRuntimeLike<unknown, unknown>

interface GlobalScope {
  readonly add: (runtimeFlags: RuntimeFlags.RuntimeFlags, child: Fiber.RuntimeFiber<unknown, unknown>) => void
}

const GLOBAL_SCOPE = Symbol.for("effect/FiberScope/Global")

export interface RequestForker<R> {
  readonly fork: <A, E>(effect: Effect.Effect<A, E, R>) => Fiber.RuntimeFiber<A, E>
  /** True when the fibers share their initial FiberRefs; false when this Effect version got `Runtime.runFork`. */
  readonly shared: boolean
}

/** `Runtime.runFork(runtime)` for many fibers with no options, sharing their initial FiberRefs where possible. */
export const makeRequestForker = <R>(runtime: Runtime.Runtime<R>): RequestForker<R> => {
  const runFork = Runtime.runFork(runtime)
  const fallback: RequestForker<R> = { fork: (effect) => runFork(effect), shared: false }
  // A first fiber, forked the usual way: its class, and the FiberRefs every fiber of this runtime starts with.
  const probe = runFork(Effect.getFiberRefs) as unknown as FiberRuntimeLike<FiberRefs.FiberRefs, never>
  const exit = probe.unsafePoll()
  const store = (globalThis as Record<string, unknown>)["effect/GlobalValue"]
  const scope =
    store instanceof Map ? (store.get(GLOBAL_SCOPE) as Partial<GlobalScope> | undefined) : undefined
  const FiberRuntime = (probe as { constructor?: unknown }).constructor
  if (
    exit === null ||
    !Exit.isSuccess(exit) ||
    typeof FiberRuntime !== "function" ||
    FiberRuntime.length !== 3 ||
    typeof probe.start !== "function" ||
    // A supervisor is told of every fiber by `runFork`; this path does not, so it is not taken with one.
    probe.currentSupervisor !== Supervisor.none ||
    typeof scope?.add !== "function"
  ) {
    return fallback
  }
  const refs = exit.value
  const FiberClass = FiberRuntime as FiberRuntimeClass
  const global = scope as GlobalScope
  const flags = runtime.runtimeFlags
  return {
    fork: <A, E>(effect: Effect.Effect<A, E, R>): Fiber.RuntimeFiber<A, E> => {
      const fiber = new FiberClass(FiberId.unsafeMake(), refs, flags)
      // Looked up per fiber, as runFork does: `listRootFibers` (ADR 0032) may replace it at any time.
      global.add(flags, fiber)
      fiber.start(effect as Effect.Effect<unknown, unknown>)
      return fiber as unknown as Fiber.RuntimeFiber<A, E>
    },
    shared: true,
  }
}
