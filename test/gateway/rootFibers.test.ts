import { Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { listRootFibers, listRootsOf } from "../../src/gateway/rootFibers.js"

describe("listRootFibers", () => {
  it("finds Effect's global fiber scope in this Effect version (an upgrade that moves it fails here)", () => {
    expect(listRootFibers()).toBe(true)
    expect(listRootFibers()).toBe(true)
  })

  it("replaces an add that does what this module does in its place (an Effect upgrade that changes it fails here)", () => {
    const store = (globalThis as Record<string, unknown>)["effect/GlobalValue"] as Map<symbol, object>
    const scope = store.get(Symbol.for("effect/FiberScope/Global"))!
    const original = (Object.getPrototypeOf(scope) as { add: () => void }).add
    // Effect's own add: into the set, and out of it when the fiber ends; nothing else to keep.
    expect(original.toString().replace(/\s+/g, "")).toBe(
      "add(_runtimeFlags,child){this.roots.add(child);child.addObserver(()=>{this.roots.delete(child);});}",
    )
  })

  it("keeps Fiber.roots true: a forked fiber is listed while it runs and gone once it ended", async () => {
    expect(listRootFibers()).toBe(true)
    const before = (await Effect.runPromise(Fiber.roots)).length
    const fiber = Effect.runFork(Effect.never)
    const running = await Effect.runPromise(Fiber.roots)
    expect(running).toContain(fiber)
    expect(running.length).toBe(before + 1)
    await Effect.runPromise(Fiber.interrupt(fiber))
    const after = await Effect.runPromise(Fiber.roots)
    expect(after).not.toContain(fiber)
    expect(after.length).toBe(before)
  })

  it("lists many fibers that end in any order", async () => {
    expect(listRootFibers()).toBe(true)
    const before = (await Effect.runPromise(Fiber.roots)).length
    const fibers = Array.from({ length: 50 }, () => Effect.runFork(Effect.never))
    expect((await Effect.runPromise(Fiber.roots)).length).toBe(before + 50)
    for (const i of [7, 0, 49, 25, 1]) await Effect.runPromise(Fiber.interrupt(fibers[i]!))
    const left = await Effect.runPromise(Fiber.roots)
    expect(left.length).toBe(before + 45)
    for (const i of [7, 0, 49, 25, 1]) expect(left).not.toContain(fibers[i])
    await Effect.runPromise(Fiber.interruptAll(fibers))
    expect((await Effect.runPromise(Fiber.roots)).length).toBe(before)
  })

  it("moves the fibers a set already held, and they leave the list through the set's own observer", async () => {
    // Shaped like Effect's FiberScope Global: a Set, and an add that removes the fiber when it ends.
    const scope = {
      roots: new Set<Fiber.RuntimeFiber<unknown, unknown>>(),
      add(_flags: unknown, child: Fiber.RuntimeFiber<unknown, unknown>) {
        this.roots.add(child)
        child.addObserver(() => this.roots.delete(child))
      },
    }
    const early = Effect.runFork(Effect.never)
    scope.add(undefined, early)
    expect(listRootsOf(scope)).toBe(true)
    expect(scope.roots).not.toBeInstanceOf(Set)
    const late = Effect.runFork(Effect.never)
    scope.add(undefined, late)
    expect([...(scope.roots as Iterable<unknown>)]).toEqual([late, early])
    await Effect.runPromise(Fiber.interrupt(early))
    expect([...(scope.roots as Iterable<unknown>)]).toEqual([late])
    await Effect.runPromise(Fiber.interrupt(late))
    expect([...(scope.roots as Iterable<unknown>)]).toEqual([])
  })

  it("changes nothing on an object that is not shaped like the global scope", () => {
    const notAScope = { roots: [] as Array<unknown>, add: () => {} }
    expect(listRootsOf(notAScope)).toBe(false)
    expect(notAScope.roots).toEqual([])
    expect(listRootsOf(undefined)).toBe(false)
  })
})
