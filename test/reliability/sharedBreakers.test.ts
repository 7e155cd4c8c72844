/**
 * `breaker.shared: true` (issue #19, ADR 0055): three copies' breakers over
 * one real Redis, each with its own clock function (moved by the test) and
 * syncs run by the test, so every step is deterministic.
 */
import { Effect } from "effect"
import { Redis } from "ioredis"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import type { BreakerConfig } from "../../src/config/model.js"
import { eventually } from "../support/harness.js"
import { makeBreakers, type Blocked, type Outcome, type Permit } from "../../src/reliability/Breakers.js"
import {
  BREAKER_SCRIPTS,
  LOCAL_MS,
  makeSharedBreakers,
  type BreakerRedis,
} from "../../src/reliability/sharedBreakers.js"
import {
  scriptClient,
  startRedis,
  startRedisCluster,
  whileStopped,
  type RedisClusterHandle,
  type RedisHandle,
} from "../support/redis.js"

const SETTINGS: BreakerConfig = { minRequests: 20, failureRatio: 0.5, openForMs: 30_000, shared: true }
const LEASE_MS = 65_000
const P = "anthropic"
const M = "claude-sonnet-5-5"

let redis: RedisHandle
/** Set while the cluster's tests run: copies then connect to it. */
let cluster: RedisClusterHandle | undefined
const closers: Array<() => Promise<void>> = []
beforeAll(async () => {
  redis = await startRedis()
})
afterEach(async () => {
  // Every test starts from an empty Redis.
  for (const url of cluster === undefined ? [redis.url] : cluster.nodes.map((node) => node.url)) {
    const client = new Redis(url)
    await client.flushall()
    client.disconnect()
  }
})
afterAll(async () => {
  await Promise.all(closers.splice(0).map((close) => close()))
  await redis?.stop()
})

/** The gateway's own client, with the scripts: to the cluster while its tests run, else to the Redis. */
const client = async (): Promise<Redis & BreakerRedis> => {
  const made = await scriptClient<BreakerRedis>(
    cluster === undefined ? redis.url : cluster.url,
    BREAKER_SCRIPTS,
    { cluster: cluster !== undefined },
  )
  closers.push(made.close)
  return made.client
}

/** One copy: its own local breakers and Redis connection, the shared clock `time`. */
const copy = async (time: { now: number }, tenants = 1) => {
  const now = () => time.now
  const local = makeBreakers(SETTINGS, now, tenants)
  const events: Array<boolean> = []
  const { service, sync } = makeSharedBreakers({
    local,
    redis: await client(),
    settings: () => SETTINGS,
    now,
    leaseMs: () => LEASE_MS,
    targets: () => [{ provider: P, model: M, region: "" }],
    onStore: ({ ok }) => events.push(ok),
  })
  /** `acquire`, running the claim when it is one. */
  const acquire = async (tenant = "acme"): Promise<Permit | Blocked> => {
    const result = service.acquire(P, M, "", tenant)
    return Effect.isEffect(result) ? Effect.runPromise(result) : result
  }
  /** `n` attempts that each end with `outcome` (permitted ones only). */
  const attempts = async (n: number, outcome: Outcome, tenant = "acme") => {
    for (let i = 0; i < n; i++) {
      const permit = await acquire(tenant)
      if (permit._tag === "Permit") service.record(permit, outcome)
    }
  }
  const state = () => service.view().find((v) => v.tenant === null)?.state
  /** Opens the fleet's breaker with 20 failures, lets `open_for` pass, and claims its test (which it must get). */
  const openAndClaim = async (): Promise<Permit> => {
    await attempts(20, "failure")
    await sync()
    time.now += SETTINGS.openForMs
    const test = await acquire()
    expect(test).toMatchObject({ _tag: "Permit", fleet: { probe: true } })
    return test as Permit
  }
  /** Reports an attempt's result (it must have been permitted), and gives a test's call to Redis a moment. */
  const report = async (permit: Permit | Blocked, outcome: Outcome) => {
    expect(permit._tag).toBe("Permit")
    service.record(permit as Permit, outcome)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { service, sync, acquire, attempts, state, events, openAndClaim, report }
}

const START = Date.parse("2026-12-03T10:00:00.000Z")

describe("shared breakers (three copies, one Redis)", () => {
  it("the fleet's attempts open the breaker at the rule, which no copy meets alone; every copy then skips it", async () => {
    const time = { now: START }
    const [a, b, c] = await Promise.all([copy(time), copy(time), copy(time)])
    await Promise.all([a.sync(), b.sync(), c.sync()])
    await a.attempts(7, "failure")
    await b.attempts(7, "failure")
    await c.attempts(6, "success")
    // Each copy alone has fewer than min_requests: its own breaker stays closed.
    await a.sync()
    await b.sync()
    expect(a.state()).toBe("closed")
    await c.sync()
    expect(c.state()).toBe("open")
    await Promise.all([a.sync(), b.sync()])
    for (const x of [a, b, c])
      expect(await x.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_open" })
  })

  it("one test for the whole fleet after open_for; its failure opens again, its success closes for all", async () => {
    const time = { now: START }
    const [a, b, c] = await Promise.all([copy(time), copy(time), copy(time)])
    await a.attempts(20, "failure")
    await a.sync()
    await Promise.all([b.sync(), c.sync()])
    time.now += SETTINGS.openForMs
    const test = await b.acquire()
    expect(test).toMatchObject({ _tag: "Permit", fleet: { probe: true } })
    // The others' claims find the test taken.
    expect(await a.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_testing" })
    expect(await c.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_testing" })
    await b.report(test, "failure")
    await Promise.all([a.sync(), c.sync()])
    for (const x of [a, b, c])
      expect(await x.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_open" })
    time.now += SETTINGS.openForMs
    const second = await c.acquire()
    expect(second).toMatchObject({ _tag: "Permit", fleet: { probe: true } })
    await c.report(second, "success")
    await Promise.all([a.sync(), b.sync()])
    for (const x of [a, b, c]) {
      expect(x.state()).toBe("closed")
      expect(await x.acquire()).toMatchObject({ _tag: "Permit", fleet: { probe: false } })
    }
  })

  it("a neutral test frees the slot for another request; a holder that never answers is replaced after its lease", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    const first = await a.openAndClaim()
    await a.report(first, "neutral")
    await b.sync()
    const next = await b.acquire()
    expect(next).toMatchObject({ fleet: { probe: true } })
    // b never reports; within the lease nobody else tests, after it a gets the test.
    time.now += LEASE_MS - 1
    await a.sync()
    expect(await a.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_testing" })
    time.now += 1
    await a.sync()
    expect(await a.acquire()).toMatchObject({ fleet: { probe: true } })
    // The late result of b's test belongs to an older generation: it changes nothing.
    await b.report(next, "success")
    await a.sync()
    expect(a.state()).toBe("half_open")
  })

  it("counts made before the fleet's state changed are dropped", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    await Promise.all([a.sync(), b.sync()])
    // a's 19 failures were made under the closed generation b is about to end.
    const stale: Array<Permit> = []
    for (let i = 0; i < 19; i++) stale.push((await a.acquire()) as Permit)
    const test = await b.openAndClaim()
    await b.report(test, "success")
    await b.sync()
    expect(b.state()).toBe("closed")
    for (const permit of stale) a.service.record(permit, "failure")
    await a.sync()
    // 19 failures plus one fresh one would open a breaker that counted them; the window has only the fresh one.
    await b.attempts(1, "failure")
    await b.sync()
    expect(b.state()).toBe("closed")
    expect(b.service.view()[0]!.attempts).toBe(1)
  })

  it("a retry-after cooldown told by one copy skips the target on every copy", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    a.service.cooldown(P, M, "", time.now + 7_000)
    await new Promise((resolve) => setTimeout(resolve, 50))
    await b.sync()
    expect(await b.acquire()).toMatchObject({ _tag: "Blocked", reason: "cooldown", until: START + 7_000 })
    time.now += 7_000
    expect(await b.acquire()).toMatchObject({ _tag: "Permit" })
  })

  it("with two tenants configured, one tenant's failures on every copy do not open it; two tenants' do", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time, 2), copy(time, 2)])
    await a.attempts(10, "failure", "noisy")
    await b.attempts(10, "failure", "noisy")
    await a.sync()
    await b.sync()
    expect(b.state()).toBe("closed")
    await a.attempts(1, "failure", "other")
    await a.sync()
    expect(a.state()).toBe("open")
  })

  it("while Redis fails, each copy decides with its own breakers (fed all along) and counts the failures", async () => {
    const time = { now: START }
    const a = await copy(time)
    await a.sync()
    await a.attempts(20, "failure")
    await whileStopped(redis, async () => {
      await a.sync()
      expect(a.service.storeErrors()).toBeGreaterThan(0)
      expect(a.events).toEqual([false])
      // Its own breaker counted the 20 failures: open.
      expect(await a.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_open" })
    })
    // Until the client has reconnected (it retries every second at most).
    await eventually(async () => {
      await a.sync()
      return a.events.at(-1) === true
    })
    expect(a.events).toEqual([false, true])
    time.now += LOCAL_MS
    // The fleet's state decides again: Redis restarted empty, so the breaker is closed.
    expect(await a.acquire()).toMatchObject({ _tag: "Permit", fleet: { probe: false } })
  })

  it("a test's result that Redis did not take is sent again with the next sync, not left to hold the test for its lease", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    const test = await a.openAndClaim()
    // Redis stops answering for a while: the result's call times out (500 ms).
    const admin = new Redis(redis.url)
    await admin.call("CLIENT", "PAUSE", "1200", "ALL")
    a.service.record(test as Permit, "success")
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    admin.disconnect()
    expect(a.service.storeErrors()).toBeGreaterThan(0)
    await a.sync()
    await b.sync()
    expect(b.state()).toBe("closed")
    expect(await b.acquire()).toMatchObject({ _tag: "Permit", fleet: { probe: false } })
  })

  it("a late result of an attempt permitted before a state change neither counts nor drops what was counted since", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    await Promise.all([a.sync(), b.sync()])
    const stale = (await a.acquire()) as Permit
    // b opens it, tests it, closes it: three generations later.
    const test = await b.openAndClaim()
    await b.report(test, "success")
    await a.sync()
    // Counted since: 3 failures and a cooldown; then the stale result arrives.
    await a.attempts(3, "failure")
    a.service.cooldown(P, M, "", time.now + 5_000)
    a.service.record(stale, "failure")
    await a.sync()
    await b.sync()
    expect(b.service.view()[0]).toMatchObject({
      state: "closed",
      attempts: 3,
      cooldownUntil: time.now + 5_000,
    })
  })
})

describe("shared breakers on a Redis Cluster", () => {
  beforeAll(async () => {
    cluster = await startRedisCluster()
  }, 60_000)
  afterAll(async () => {
    const started = cluster
    cluster = undefined
    await started?.stop()
  })

  it("the fleet opens a target's breaker and tests it once; targets in other slots are untouched", async () => {
    const time = { now: START }
    const [a, b] = await Promise.all([copy(time), copy(time)])
    await Promise.all([a.sync(), b.sync()])
    await a.attempts(10, "failure")
    await b.attempts(10, "failure")
    await a.sync()
    await b.sync()
    await a.sync()
    expect(a.state()).toBe("open")
    // Another target (another slot, likely another node) has its own breaker, closed.
    const other = a.service.acquire(P, "claude-haiku-5", "", "acme")
    expect(other).toMatchObject({ _tag: "Permit", fleet: { probe: false } })
    time.now += SETTINGS.openForMs
    const test = await a.acquire()
    expect(test).toMatchObject({ fleet: { probe: true } })
    expect(await b.acquire()).toMatchObject({ _tag: "Blocked", reason: "breaker_testing" })
    await a.report(test, "success")
    await b.sync()
    expect(b.state()).toBe("closed")
    expect(a.service.storeErrors() + b.service.storeErrors()).toBe(0)
  })
})
