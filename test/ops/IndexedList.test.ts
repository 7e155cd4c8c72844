import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { IndexedList } from "../../src/ops/IndexedList.js"

interface Item {
  readonly id: number
  listIndex: number
}

const item = (id: number): Item => ({ id, listIndex: -1 })
const ids = (list: IndexedList<Item>) =>
  list
    .snapshot()
    .map((i) => i.id)
    .sort((a, b) => a - b)

describe("IndexedList", () => {
  it("holds what was added and not removed, each item knowing its place", () => {
    const list = new IndexedList<Item>()
    const [a, b, c] = [item(1), item(2), item(3)]
    list.add(a)
    list.add(b)
    list.add(c)
    list.remove(a)
    expect(ids(list)).toEqual([2, 3])
    expect(list.size).toBe(2)
    expect(a.listIndex).toBe(-1)
    // The last item moved into the hole and was told so.
    expect(list.snapshot()[c.listIndex]).toBe(c)
  })

  it("ignores removing an item it does not hold, and adding one twice", () => {
    const list = new IndexedList<Item>()
    const a = item(1)
    list.add(a)
    list.add(a)
    list.remove(item(2))
    expect(list.size).toBe(1)
    list.remove(a)
    list.remove(a)
    expect(list.size).toBe(0)
  })

  it("does not remove another list's item that has the same index", () => {
    const one = new IndexedList<Item>()
    const two = new IndexedList<Item>()
    const a = item(1)
    const b = item(2)
    one.add(a)
    two.add(b)
    one.remove(b)
    expect(ids(one)).toEqual([1])
    expect(b.listIndex).toBe(0)
  })

  it("lets the caller remove items while going through a snapshot", () => {
    const list = new IndexedList<Item>()
    const items = [1, 2, 3, 4].map(item)
    for (const i of items) list.add(i)
    for (const i of list.snapshot()) if (i.id % 2 === 0) list.remove(i)
    expect(ids(list)).toEqual([1, 3])
  })

  it("agrees with a Set under any sequence of adds and removes", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 15 })), { maxLength: 200 }),
        (ops) => {
          const pool = Array.from({ length: 16 }, (_, i) => item(i))
          const list = new IndexedList<Item>()
          const model = new Set<number>()
          for (const [add, id] of ops) {
            if (add) {
              list.add(pool[id]!)
              model.add(id)
            } else {
              list.remove(pool[id]!)
              model.delete(id)
            }
            expect(list.size).toBe(model.size)
          }
          expect(ids(list)).toEqual([...model].sort((a, b) => a - b))
          let seen = 0
          list.forEach((i) => {
            expect(list.snapshot()[i.listIndex]).toBe(i)
            seen++
          })
          expect(seen).toBe(model.size)
          for (const i of pool) if (!model.has(i.id)) expect(i.listIndex).toBe(-1)
        },
      ),
    )
  })
})
