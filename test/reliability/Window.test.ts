import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { BUCKET_MS, BUCKETS, Window } from "../../src/reliability/Window.js"

/** The test clock as the `now` the window expects (epoch ms). */
const testNow = Effect.map(Clock.Clock, (clock) => () => clock.currentTimeMillisUnsafe())

describe("Window", () => {
  it("has six 10-second buckets", () => {
    assert.strictEqual(BUCKET_MS, 10_000)
    assert.strictEqual(BUCKETS, 6)
  })

  it.effect(
    "an event at every 1 s offset in its bucket counts until the start of the 6th bucket after it",
    () =>
      Effect.gen(function* () {
        const now = yield* testNow
        const bucketStart = 1_000 * BUCKET_MS
        for (let offset = 0; offset < 10; offset++) {
          yield* TestClock.setTime(bucketStart + offset * 1_000)
          const window = new Window(1)
          const at = now()
          window.add(at, 0)
          assert.strictEqual(window.sum(now(), 0), 1, `offset ${offset}s: counted when it happens`)
          yield* TestClock.adjust(49_999)
          assert.strictEqual(window.sum(now(), 0), 1, `offset ${offset}s: counted at +49.999 s`)
          const expiry = bucketStart + 6 * BUCKET_MS
          yield* TestClock.setTime(expiry - 1)
          assert.strictEqual(
            window.sum(now(), 0),
            1,
            `offset ${offset}s: counted 1 ms before the 6th bucket after`,
          )
          yield* TestClock.adjust(1)
          assert.strictEqual(
            window.sum(now(), 0),
            0,
            `offset ${offset}s: gone at the start of the 6th bucket after`,
          )
          const lived = expiry - at
          assert.strictEqual(lived, 60_000 - offset * 1_000)
          assert.isTrue(lived > 50_000 && lived <= 60_000, `offset ${offset}s: lived ${lived} ms`)
        }
      }),
  )

  it.effect("an event at the last millisecond of its bucket expires 50.001 s later", () =>
    Effect.gen(function* () {
      const now = yield* testNow
      yield* TestClock.setTime(BUCKET_MS - 1)
      const window = new Window(1)
      window.add(now(), 0)
      yield* TestClock.adjust(50_000)
      assert.strictEqual(window.sum(now(), 0), 1)
      yield* TestClock.adjust(1)
      assert.strictEqual(window.sum(now(), 0), 0)
    }),
  )

  it.effect("sums every bucket of the recent minute and drops each one as it expires", () =>
    Effect.gen(function* () {
      const now = yield* testNow
      const window = new Window(1)
      for (let i = 0; i < BUCKETS; i++) {
        window.add(now(), 0, i + 1)
        yield* TestClock.adjust(BUCKET_MS)
      }
      // Now at 60 s: the bucket of 0 s (1 event) has expired; 2 + 3 + 4 + 5 + 6 remain.
      assert.strictEqual(window.sum(now(), 0), 20)
      yield* TestClock.adjust(BUCKET_MS)
      assert.strictEqual(window.sum(now(), 0), 18)
      yield* TestClock.adjust(3 * BUCKET_MS)
      // At 100 s only the bucket of 50 s (6 events) remains; it expires at 110 s.
      assert.strictEqual(window.sum(now(), 0), 6)
      yield* TestClock.adjust(BUCKET_MS)
      assert.strictEqual(window.sum(now(), 0), 0)
    }),
  )

  it.effect("reuses a slot for a new bucket without keeping the old bucket's events", () =>
    Effect.gen(function* () {
      const now = yield* testNow
      const window = new Window(1)
      window.add(now(), 0, 5)
      // Bucket 6 shares bucket 0's slot.
      yield* TestClock.adjust(BUCKETS * BUCKET_MS)
      window.add(now(), 0)
      assert.strictEqual(window.sum(now(), 0), 1)
      // After a long idle time, no stale slot comes back.
      yield* TestClock.adjust(100 * BUCKETS * BUCKET_MS)
      assert.strictEqual(window.sum(now(), 0), 0)
      window.add(now(), 0, 2)
      assert.strictEqual(window.sum(now(), 0), 2)
    }),
  )

  it.effect("keeps its counters independent", () =>
    Effect.gen(function* () {
      const now = yield* testNow
      const window = new Window(3)
      window.add(now(), 0)
      window.add(now(), 0)
      window.add(now(), 2, 5)
      yield* TestClock.adjust(15_000)
      window.add(now(), 2)
      assert.strictEqual(window.sum(now(), 0), 2)
      assert.strictEqual(window.sum(now(), 1), 0)
      assert.strictEqual(window.sum(now(), 2), 6)
      // The first bucket expires at 60 s, the second (10–20 s) at 70 s.
      yield* TestClock.setTime(60_000)
      assert.strictEqual(window.sum(now(), 0), 0)
      assert.strictEqual(window.sum(now(), 2), 1)
    }),
  )

  it.effect("clear() forgets every event and the window counts again afterwards", () =>
    Effect.gen(function* () {
      const now = yield* testNow
      const window = new Window(2)
      window.add(now(), 0, 3)
      yield* TestClock.adjust(20_000)
      window.add(now(), 1, 4)
      window.clear()
      assert.strictEqual(window.sum(now(), 0), 0)
      assert.strictEqual(window.sum(now(), 1), 0)
      window.add(now(), 1)
      assert.strictEqual(window.sum(now(), 1), 1)
      assert.strictEqual(window.sum(now(), 0), 0)
    }),
  )
})
