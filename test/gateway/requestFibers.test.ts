import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import {
  Context,
  Deferred,
  Effect,
  Exit,
  Fiber,
  FiberRef,
  FiberRefs,
  Layer,
  LogLevel,
  Runtime,
  Supervisor,
} from "effect"
import { describe, expect, it } from "vitest"
import { makeRequestForker } from "../../src/gateway/requestFibers.js"
import { listRootFibers } from "../../src/gateway/rootFibers.js"

class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}
const marker = FiberRef.unsafeMake("initial")

/** A runtime with a service, a FiberRef set away from its initial value, and root fibers in a list (as the gateway's). */
const makeRuntime = () => {
  listRootFibers()
  const runtime = Effect.runSync(Effect.scoped(Layer.toRuntime(Layer.succeed(Greeting, "hello"))))
  return Runtime.setFiberRef(runtime, marker, "runtime")
}

const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)

describe("makeRequestForker", () => {
  it("shares the initial FiberRefs on this Effect version (an upgrade that changes the shape falls back, and fails here)", () => {
    expect(makeRequestForker(makeRuntime()).shared).toBe(true)
  })

  it("copies what Effect's runFork does without options (an Effect upgrade that changes it fails here)", () => {
    const require = createRequire(import.meta.url)
    const dist = dirname(require.resolve("effect"))
    const source = readFileSync(join(dist, "..", "esm", "internal", "runtime.js"), "utf8")
    const start = source.indexOf("export const unsafeFork = ")
    const body = source.slice(start, source.indexOf("\n});", start) + 4).replace(/\s+/g, "")
    // What `fork` repeats (a new fiber id, the class, the global scope's add, start) and what it takes
    // from the first fiber instead (the FiberRefs); the supervisor case falls back.
    expect(body).toBe(
      (
        "export const unsafeFork = /*#__PURE__*/makeDual((runtime, self, options) => {" +
        "const fiberId = FiberId.unsafeMake();" +
        "const fiberRefUpdates = [[core.currentContext, [[fiberId, runtime.context]]]];" +
        "if (options?.scheduler) {fiberRefUpdates.push([scheduler_.currentScheduler, [[fiberId, options.scheduler]]]);}" +
        "let fiberRefs = FiberRefs.updateManyAs(runtime.fiberRefs, {entries: fiberRefUpdates,forkAs: fiberId});" +
        "if (options?.updateRefs) {fiberRefs = options.updateRefs(fiberRefs, fiberId);}" +
        "const fiberRuntime = new FiberRuntime.FiberRuntime(fiberId, fiberRefs, runtime.runtimeFlags);" +
        "let effect = self;" +
        "if (options?.scope) {effect = core.flatMap(scope_.fork(options.scope, executionStrategy.sequential), closeableScope => core.zipRight(core.scopeAddFinalizer(closeableScope, core.fiberIdWith(id => equals(id, fiberRuntime.id()) ? core.void : core.interruptAsFiber(fiberRuntime, id))), core.onExit(self, exit => scope_.close(closeableScope, exit))));}" +
        "const supervisor = fiberRuntime.currentSupervisor;" +
        "// we can compare by reference here as _supervisor.none is wrapped with globalValue\n" +
        "if (supervisor !== supervisor_.none) {supervisor.onStart(runtime.context, effect, Option.none(), fiberRuntime);fiberRuntime.addObserver(exit => supervisor.onEnd(exit, fiberRuntime));}" +
        "fiberScope.globalScope.add(runtime.runtimeFlags, fiberRuntime);" +
        "// Only an explicit false will prevent immediate execution\n" +
        "if (options?.immediate === false) {fiberRuntime.resume(effect);} else {fiberRuntime.start(effect);}" +
        "return fiberRuntime;" +
        "});"
      ).replace(/\s+/g, ""),
    )
  })

  it("gives each fiber what runFork gives it: the services, the FiberRefs, a fresh id, a result", async () => {
    const runtime = makeRuntime()
    const { fork } = makeRequestForker(runtime)
    const read = Effect.all([Greeting, FiberRef.get(marker), Effect.fiberId])
    const viaFork = await run(Fiber.join(fork(read)))
    const viaRunFork = await run(Fiber.join(Runtime.runFork(runtime)(read)))
    expect(viaFork[0]).toBe("hello")
    expect(viaFork[1]).toBe("runtime")
    expect(viaFork.slice(0, 2)).toEqual(viaRunFork.slice(0, 2))
    const other = await run(Fiber.join(fork(read)))
    expect(other[2]).not.toEqual(viaFork[2])
  })

  it("keeps the fibers apart: a FiberRef one sets is not what the next one starts with", async () => {
    const { fork } = makeRequestForker(makeRuntime())
    const set = await run(Deferred.make<void>())
    const release = await run(Deferred.make<void>())
    const first = fork(
      Effect.zipRight(
        FiberRef.set(marker, "changed by the first"),
        Effect.zipRight(Deferred.succeed(set, undefined), Deferred.await(release)),
      ),
    )
    await run(Deferred.await(set))
    expect(await run(Fiber.join(fork(FiberRef.get(marker))))).toBe("runtime")
    await run(Deferred.succeed(release, undefined))
    await run(Fiber.join(first))
  })

  it("is a root fiber while it runs, can be interrupted, and runs its finalizers", async () => {
    const { fork } = makeRequestForker(makeRuntime())
    let finalized = false
    const fiber = fork(Effect.never.pipe(Effect.ensuring(Effect.sync(() => void (finalized = true)))))
    expect(await run(Fiber.roots)).toContain(fiber)
    const exit = await run(Fiber.interrupt(fiber))
    expect(Exit.isInterrupted(exit)).toBe(true)
    expect(finalized).toBe(true)
    expect(await run(Fiber.roots)).not.toContain(fiber)
  })

  it("is interrupted as the gateway interrupts it (unsafeInterruptAsFork), and its finalizers run", async () => {
    const { fork } = makeRequestForker(makeRuntime())
    let finalized = false
    const fiber = fork(Effect.never.pipe(Effect.ensuring(Effect.sync(() => void (finalized = true)))))
    fiber.unsafeInterruptAsFork(fiber.id())
    expect(Exit.isInterrupted(await run(Fiber.await(fiber)))).toBe(true)
    expect(finalized).toBe(true)
  })

  it("starts each fiber with the same FiberRefs as runFork (the scheduler, the log level, every other one)", async () => {
    const runtime = Runtime.setFiberRef(makeRuntime(), FiberRef.currentMinimumLogLevel, LogLevel.Error)
    const { fork } = makeRequestForker(runtime)
    const values = Effect.map(
      Effect.getFiberRefs,
      (refs) =>
        new Map([...FiberRefs.fiberRefs(refs)].map((ref) => [ref, FiberRefs.getOrDefault(refs, ref)])),
    )
    const viaFork = await run(Fiber.join(fork(values)))
    const viaRunFork = await run(Fiber.join(Runtime.runFork(runtime)(values)))
    expect([...viaFork.keys()]).toEqual([...viaRunFork.keys()])
    for (const [ref, value] of viaRunFork) expect(viaFork.get(ref)).toBe(value)
    expect(viaFork.get(FiberRef.currentMinimumLogLevel)).toBe(LogLevel.Error)
  })

  it("leaves the shared value as it was, whatever its fibers do with FiberRefs", async () => {
    const { fork } = makeRequestForker(makeRuntime())
    const initial = await run(Fiber.join(fork(Effect.getFiberRefs)))
    const snapshot = () =>
      [...FiberRefs.fiberRefs(initial)].map((ref) => [ref, FiberRefs.getOrDefault(initial, ref)] as const)
    const before = snapshot()
    const busy = Effect.gen(function* () {
      yield* FiberRef.set(marker, "set")
      yield* Effect.locally(Effect.yieldNow(), marker, "locally")
      yield* Effect.logDebug("x").pipe(Effect.annotateLogs("k", "v"))
      yield* Effect.provideService(Effect.yieldNow(), Greeting, "provided")
      const child = yield* Effect.fork(FiberRef.set(marker, "child"))
      yield* Fiber.join(child)
      yield* FiberRef.delete(marker)
      yield* Effect.sleep(1)
    })
    const fibers = Array.from({ length: 20 }, () => fork(busy))
    // Half of them interrupted midway, as a client that leaves.
    for (const fiber of fibers.slice(0, 10)) fiber.unsafeInterruptAsFork(fiber.id())
    await run(Fiber.awaitAll(fibers))
    expect(snapshot()).toEqual(before)
    const next = await run(Fiber.join(fork(Effect.all([FiberRef.get(marker), Greeting]))))
    expect(next).toEqual(["runtime", "hello"])
  })

  it("adds its fibers to the root fibers through the global scope's add as it is at each fork", async () => {
    const store = (globalThis as Record<string, unknown>)["effect/GlobalValue"] as Map<
      symbol,
      { add: unknown }
    >
    const scope = store.get(Symbol.for("effect/FiberScope/Global"))!
    const { fork } = makeRequestForker(makeRuntime())
    const original = scope.add
    const added: Array<unknown> = []
    scope.add = function (this: unknown, flags: unknown, child: unknown) {
      added.push(child)
      return (original as (flags: unknown, child: unknown) => void).call(this, flags, child)
    }
    try {
      const fiber = fork(Effect.void)
      expect(added).toEqual([fiber])
      await run(Fiber.await(fiber))
    } finally {
      scope.add = original
    }
  })

  it("falls back to runFork when the runtime has a supervisor (which must see every fiber)", async () => {
    const supervisor = await run(Supervisor.track)
    const runtime = makeRuntime()
    const supervised = Runtime.make({
      context: runtime.context,
      runtimeFlags: runtime.runtimeFlags,
      fiberRefs: Runtime.setFiberRef(runtime, FiberRef.currentSupervisor, supervisor).fiberRefs,
    })
    const forker = makeRequestForker(supervised)
    expect(forker.shared).toBe(false)
    const fiber = forker.fork(Effect.never)
    expect(await run(supervisor.value)).toContain(fiber)
    await run(Fiber.interrupt(fiber))
  })
})
