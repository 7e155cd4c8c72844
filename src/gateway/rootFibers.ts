import type { Fiber } from "effect"

/**
 * Effect keeps every root fiber (every `Runtime.runFork`, so every request)
 * in one long-lived `Set`. A long-lived `Set` or `Map` that takes an entry
 * per request makes the young-generation collector promote much of what the
 * requests allocate (ADR 0032); this module moves Effect's root fibers into a
 * linked list.
 */

interface RootNode {
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  prev: RootNode | undefined
  next: RootNode | undefined
}

/**
 * The root fibers as a doubly linked list: what `Fiber.roots` reads, in
 * place of Effect's `Set`. A fiber's node is unlinked (and its links
 * cleared, so a dead node holds nothing) when the fiber ends.
 */
class RootList {
  private head: RootNode | undefined = undefined
  size = 0

  push(fiber: Fiber.RuntimeFiber<unknown, unknown>): RootNode {
    const node: RootNode = { fiber, prev: undefined, next: this.head }
    if (this.head !== undefined) this.head.prev = node
    this.head = node
    this.size++
    return node
  }

  unlink(node: RootNode): void {
    if (node.fiber === undefined) return
    if (node.prev !== undefined) node.prev.next = node.next
    else this.head = node.next
    if (node.next !== undefined) node.next.prev = node.prev
    node.fiber = node.prev = node.next = undefined
    this.size--
  }

  /** What Effect's own observer calls for a fiber added before the list replaced the set (linear; rare). */
  delete(fiber: unknown): boolean {
    for (let node = this.head; node !== undefined; node = node.next) {
      if (node.fiber === fiber) {
        this.unlink(node)
        return true
      }
    }
    return false
  }

  *[Symbol.iterator](): Iterator<Fiber.RuntimeFiber<unknown, unknown>> {
    for (let node = this.head; node !== undefined; node = node.next) {
      if (node.fiber !== undefined) yield node.fiber
    }
  }
}

interface GlobalScope {
  roots: unknown
  add: (runtimeFlags: unknown, child: Fiber.RuntimeFiber<unknown, unknown>) => void
}

const GLOBAL_SCOPE = Symbol.for("effect/FiberScope/Global")

/**
 * Makes `scope` — an object shaped like Effect's global fiber scope, with
 * `roots` and `add(runtimeFlags, child)` — keep its root fibers in a
 * `RootList` instead of a `Set`, moving the fibers it already holds.
 * Idempotent. False when `scope` is not shaped like that (nothing changed).
 */
export const listRootsOf = (scope: unknown): boolean => {
  if (typeof scope !== "object" || scope === null || !("roots" in scope) || !("add" in scope)) return false
  const global = scope as GlobalScope
  if (global.roots instanceof RootList) return true
  if (!(global.roots instanceof Set) || typeof global.add !== "function") return false
  const list = new RootList()
  for (const fiber of global.roots as Set<Fiber.RuntimeFiber<unknown, unknown>>) list.push(fiber)
  global.roots = list
  global.add = (_runtimeFlags, child) => {
    const node = list.push(child)
    child.addObserver(() => list.unlink(node))
  }
  return true
}

/**
 * `listRootsOf` on Effect's global fiber scope. False means this Effect
 * version keeps its global scope differently and nothing was changed (a test
 * fails on that, so an upgrade cannot lose this silently).
 */
export const listRootFibers = (): boolean => {
  const store = (globalThis as Record<string, unknown>)["effect/GlobalValue"]
  return store instanceof Map && listRootsOf(store.get(GLOBAL_SCOPE))
}
