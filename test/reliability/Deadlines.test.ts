import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import {
  Deadlines,
  layer,
  SWEEP_INTERVAL_MS,
  type Deadline,
  type TimeoutKind,
} from "../../src/reliability/Deadlines.js"

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
        // The sweeper sleeps on the test clock: moving it runs the sweeps of that time, no real waiting.
        yield* TestClock.adjust("999 millis")
        assert.deepStrictEqual(expired, [])
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(expired, ["a:total"])
        // Many more sweeps: nothing else is overdue, and a is not expired twice.
        yield* TestClock.adjust(`${SWEEP_INTERVAL_MS * 40} millis`)
        assert.deepStrictEqual(expired, ["a:total"])
        yield* TestClock.adjust("4 seconds")
        assert.deepStrictEqual(expired, ["a:total", "c:total"])
      }).pipe(Effect.provide(layer)),
  )

  it.effect("tells the holder, not the deadline's own expire, while a relay holds it", () =>
    Effect.gen(function* () {
      const deadlines = yield* Deadlines
      const now = deadlines.now()
      const expired: Array<string> = []
      const held = deadline(now, now + 1_000, (kind) => expired.push(`own:${kind}`))
      held.holder = { expire: (kind) => expired.push(`holder:${kind}`), buffered: () => 0 }
      deadlines.register(held)
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual(expired, ["holder:total"])
    }).pipe(Effect.provide(layer)),
  )

  it.effect("sums the bytes the open relays hold, and forgets unregistered ones", () =>
    Effect.gen(function* () {
      const deadlines = yield* Deadlines
      const now = deadlines.now()
      const ds = [100, 20, 3].map((bytes) => ({
        ...deadline(now, now + 60_000, () => {}),
        holder: { expire: () => {}, buffered: () => bytes },
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
