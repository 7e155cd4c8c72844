import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import {
  Deadlines,
  layer,
  SWEEP_INTERVAL_MS,
  type Deadline,
  type TimeoutKind,
} from "../../src/gateway/Deadlines.js"

/** Waits on the live clock (the sweeper ticks on it) until `done()`, at most 5 s. */
const until = (done: () => boolean) =>
  Effect.promise(async () => {
    for (let waited = 0; !done() && waited < 5_000; waited += SWEEP_INTERVAL_MS) {
      await new Promise((resolve) => setTimeout(resolve, SWEEP_INTERVAL_MS))
    }
  })

const deadline = (now: number, totalBy: number, expire: (kind: TimeoutKind) => void): Deadline => ({
  firstByteBy: Number.POSITIVE_INFINITY,
  totalBy,
  idleMs: 1_000_000,
  lastActivity: now,
  waitingForClientSince: 0,
  listIndex: -1,
  expire,
})

describe("Deadlines", () => {
  it.effect(
    "expires what is overdue, once, and skips a deadline an earlier expiry of the same sweep settled",
    () =>
      Effect.gen(function* () {
        const deadlines = yield* Deadlines
        const now = deadlines.now()
        const expired: Array<string> = []
        const b = deadline(now, now + 1_000, (kind) => expired.push(`b:${kind}`))
        // a's expiry settles b (as an attempt that fails may settle another's state): b must not expire as well.
        const a = deadline(now, now + 1_000, (kind) => {
          expired.push(`a:${kind}`)
          deadlines.unregister(b)
        })
        const c = deadline(now, now + 5_000, (kind) => expired.push(`c:${kind}`))
        deadlines.register(a)
        deadlines.register(b)
        deadlines.register(c)
        yield* TestClock.adjust("2 seconds")
        yield* until(() => expired.length > 0)
        // Several more sweeps: nothing else is overdue, and a is not expired twice.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, SWEEP_INTERVAL_MS * 6)))
        assert.deepStrictEqual(expired, ["a:total"])
        yield* TestClock.adjust("4 seconds")
        yield* until(() => expired.length > 1)
        assert.deepStrictEqual(expired, ["a:total", "c:total"])
      }).pipe(Effect.provide(layer)),
  )

  it.effect("sums the bytes the open relays hold, and forgets unregistered ones", () =>
    Effect.gen(function* () {
      const deadlines = yield* Deadlines
      const now = deadlines.now()
      const ds = [100, 20, 3].map((bytes) => ({
        ...deadline(now, now + 60_000, () => {}),
        buffered: () => bytes,
      }))
      for (const d of ds) deadlines.register(d)
      assert.strictEqual(deadlines.bufferedBytes(), 123)
      deadlines.unregister(ds[0]!)
      assert.strictEqual(deadlines.bufferedBytes(), 23)
      deadlines.unregister(ds[0]!)
      assert.strictEqual(deadlines.bufferedBytes(), 23)
    }).pipe(Effect.provide(layer)),
  )
})
