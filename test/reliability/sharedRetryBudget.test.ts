/**
 * The fleet's retry budget (`breaker.shared: true`, issue #19, ADR 0055):
 * two copies over one real Redis, with a clock the test moves and syncs the
 * test runs.
 */
import { Redis } from "ioredis"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { makeRetryBudget } from "../../src/reliability/RetryBudget.js"
import { LOCAL_MS } from "../../src/reliability/sharedBreakers.js"
import {
  makeSharedRetryBudget,
  RETRY_SCRIPTS,
  type RetryRedis,
} from "../../src/reliability/sharedRetryBudget.js"
import { eventually } from "../support/harness.js"
import { scriptClient, startRedis, whileStopped, type RedisHandle } from "../support/redis.js"

let redis: RedisHandle
const closers: Array<() => Promise<void>> = []
beforeAll(async () => {
  redis = await startRedis()
})
afterEach(async () => {
  const client = new Redis(redis.url)
  await client.flushall()
  client.disconnect()
})
afterAll(async () => {
  await Promise.all(closers.splice(0).map((close) => close()))
  await redis?.stop()
})

const START = Date.parse("2026-12-03T10:00:00.000Z")

const copy = async (time: { now: number }) => {
  const { client, close } = await scriptClient<RetryRedis>(redis.url, RETRY_SCRIPTS)
  closers.push(close)
  const now = () => time.now
  const events: Array<boolean> = []
  const shared = makeSharedRetryBudget({
    local: makeRetryBudget(0.1, now),
    redis: client,
    ratio: () => 0.1,
    now,
    onStore: ({ ok }) => events.push(ok),
  })
  /** Extra attempts this copy may spend now (consumes them). */
  const spend = (max: number) => {
    let spent = 0
    while (spent < max && shared.service.tryConsume()) spent++
    return spent
  }
  return { ...shared, spend, events }
}

describe("the fleet's retry budget", () => {
  it("permits 10 + ratio × the fleet's requests to the whole fleet, not to each copy", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    for (let i = 0; i < 100; i++) {
      a.service.recordRequest()
      b.service.recordRequest()
    }
    await a.sync()
    await b.sync()
    // a reads the fleet's sums (b's requests included) at its next sync.
    await a.sync()
    // 10 + 0.1 × 200 = 30 for the fleet.
    expect(a.spend(100)).toBe(30)
    await a.sync()
    await b.sync()
    expect(b.spend(100)).toBe(0)
    expect(b.service.remaining()).toBe(0)
    // A minute later the window is empty: the floor is there again, for the fleet.
    time.now += 60_000
    await Promise.all([a.sync(), b.sync()])
    expect(a.spend(5)).toBe(5)
    await new Promise((resolve) => setTimeout(resolve, 100))
    await b.sync()
    expect(b.spend(100)).toBe(5)
  })

  it("extra attempts on their way to Redis still count: none is spent twice while a sync is out", async () => {
    const time = { now: START }
    const a = await copy(time)
    for (let i = 0; i < 100; i++) a.service.recordRequest()
    await a.sync()
    expect(a.spend(100)).toBe(20)
    const sending = a.sync()
    expect(a.spend(100)).toBe(0)
    await sending
    expect(a.spend(100)).toBe(0)
  })

  it("an extra attempt reaches the fleet at once, without waiting for the tick", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    expect(a.spend(10)).toBe(10)
    // The syncs a's spending asked for run on the next turns of the event loop.
    await new Promise((resolve) => setTimeout(resolve, 100))
    await b.sync()
    expect(b.spend(10)).toBe(0)
  })

  it("while Redis fails, a copy spends from its own budget; its counts reach the fleet once Redis answers", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    await Promise.all([a.sync(), b.sync()])
    await whileStopped(redis, async () => {
      await a.sync()
      expect(a.events).toEqual([false])
      // Its own budget: the floor of 10.
      expect(a.spend(100)).toBe(10)
    })
    // Until the client has reconnected (it retries every second at most).
    await eventually(async () => {
      await a.sync()
      return a.events.at(-1) === true
    })
    expect(a.events).toEqual([false, true])
    time.now += LOCAL_MS
    await b.sync()
    // a's 10 extra attempts reached the fleet: nothing is left for b.
    expect(b.spend(100)).toBe(0)
  })
})
