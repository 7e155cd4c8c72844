import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { layerMemory, MAX_RESPONSE_OWNERS } from "../../src/limits/memoryStore.js"
import { RESPONSE_OWNER_TTL_MS, Store } from "../../src/limits/Store.js"
import { encodeRecord } from "../../src/meter/record.js"
import { sampleRecord } from "../meter/fixtures.js"
import { storeSuite } from "./store.conformance.js"
import { periodic } from "./store.fixture.js"
import { tempDir } from "../support/tempDirs.js"

storeSuite("memory", () => layerMemory())

describe("memory store response owners", () => {
  const owner = { tenant: "acme", provider: "openai" }

  it.effect("forgets an owner 30 days after it was remembered", () =>
    Effect.gen(function* () {
      const store = yield* Store
      yield* store.rememberResponse("resp_1", owner, 0)
      assert.deepStrictEqual(yield* store.responseOwner("resp_1", RESPONSE_OWNER_TTL_MS - 1), owner)
      assert.strictEqual(yield* store.responseOwner("resp_1", RESPONSE_OWNER_TTL_MS), undefined)
    }).pipe(Effect.provide(layerMemory())),
  )

  it.effect("remembers at most MAX_RESPONSE_OWNERS, forgetting the oldest first", () =>
    Effect.gen(function* () {
      const store = yield* Store
      for (let i = 0; i <= MAX_RESPONSE_OWNERS; i++) yield* store.rememberResponse(`resp_${i}`, owner, i)
      assert.strictEqual(yield* store.responseOwner("resp_0", MAX_RESPONSE_OWNERS), undefined)
      assert.deepStrictEqual(yield* store.responseOwner("resp_1", MAX_RESPONSE_OWNERS), owner)
      assert.deepStrictEqual(
        yield* store.responseOwner(`resp_${MAX_RESPONSE_OWNERS}`, MAX_RESPONSE_OWNERS),
        owner,
      )
    }).pipe(Effect.provide(layerMemory())),
  )
})

const usageFile = (lines: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = tempDir("tollgate-store-")
      const file = path.join(dir, "usage.jsonl")
      fs.writeFileSync(file, lines.join(""))
      return file
    }),
    (file) => Effect.sync(() => fs.rmSync(path.dirname(file), { recursive: true, force: true })),
  )

const record = (ts: string, tenant: string, cost: number, session: string | null) =>
  encodeRecord(sampleRecord({ ts, tenant, cost_micro_usd: cost, session, request_id: `${tenant}-${ts}` }))

/** The state of `tenants` at `now` in a memory store restored from `file` at `now`. */
const restoredState = (file: string, now: number, tenants: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(now)
    return yield* Effect.flatMap(Store, (store) =>
      Effect.forEach(tenants, (tenant) => store.tenantState(tenant, now)),
    ).pipe(Effect.provide(layerMemory({ usageFile: file })))
  })

describe("memory store restore from the usage file", () => {
  it.effect("restores current-month spend and 24-hour sessions; skips last month and a torn last line", () =>
    Effect.gen(function* () {
      const file = yield* usageFile([
        record("2026-11-30T23:00:00.000Z", "acme", 5_000, "s-november"),
        record("2026-12-01T05:00:00.000Z", "acme", 1_000, "s-old"),
        record("2026-12-02T01:00:00.000Z", "acme", 300, "s1"),
        record("2026-12-02T08:00:00.000Z", "beta", 42, null),
        record("2026-12-02T09:00:00.000Z", "acme", 200, "s1"),
        record("2026-12-02T09:30:00.000Z", "acme", 0, "s2"),
        '{"ts":"2026-12-02T09:59:00.000Z","request_id":"torn","tenant":"acme","cost_mi',
      ])
      const now = Date.parse("2026-12-02T10:00:00.000Z")
      const [acme, beta] = yield* restoredState(file, now, ["acme", "beta"])
      assert.strictEqual(acme?.month, "2026-12")
      assert.strictEqual(acme?.monthSpend, 1_500)
      assert.strictEqual(acme?.monthReserved, 0)
      assert.deepStrictEqual(acme?.sessions, [
        { id: "s2", spend: 0, reserved: 0, lastMs: Date.parse("2026-12-02T09:30:00.000Z") },
        { id: "s1", spend: 500, reserved: 0, lastMs: Date.parse("2026-12-02T09:00:00.000Z") },
      ])
      assert.deepStrictEqual(acme?.requests, { current: 0, previous: 0 })
      assert.strictEqual(beta?.monthSpend, 42)
      assert.deepStrictEqual(beta?.sessions, [])
    }),
  )

  it.effect(
    "a session of the last 24 h that began last month keeps its spend; the new month starts at 0",
    () =>
      Effect.gen(function* () {
        const file = yield* usageFile([
          record("2026-11-29T12:00:00.000Z", "acme", 9_000, "s-edge"),
          record("2026-11-30T20:00:00.000Z", "acme", 300, "s-edge"),
        ])
        const now = Date.parse("2026-12-01T10:00:00.000Z")
        const [acme] = yield* restoredState(file, now, ["acme"])
        assert.strictEqual(acme?.monthSpend, 0)
        assert.deepStrictEqual(acme?.sessions, [
          { id: "s-edge", spend: 300, reserved: 0, lastMs: Date.parse("2026-11-30T20:00:00.000Z") },
        ])
      }),
  )

  it.effect(
    "restored session spend counts against a hard session budget and ends 24 h after its last request",
    () =>
      Effect.gen(function* () {
        const file = yield* usageFile([record("2026-12-02T09:00:00.000Z", "acme", 900, "s1")])
        const now = Date.parse("2026-12-02T10:00:00.000Z")
        yield* TestClock.setTime(now)
        const admit = (at: number) =>
          Effect.flatMap(Store, (store) =>
            store.admit({
              tenant: "acme",
              now: at,
              requestsPerMinute: undefined,
              tokensPerMinute: undefined,
              tokenCost: 0,
              reserve: 200,
              budgets: [periodic("month", undefined, { limit: 1_100, hard: true }, at)],
              session: { id: "s1", budget: { limit: 1_000, hard: true } },
              maxSessions: 10_000,
            }),
          )
        const results = yield* Effect.all([admit(now), admit(Date.parse("2026-12-03T09:00:00.000Z"))]).pipe(
          Effect.provide(layerMemory({ usageFile: file })),
        )
        assert.deepStrictEqual(
          results.map((r) => (r._tag === "Refused" ? r.budget : r._tag)),
          ["session", "Admitted"],
        )
      }),
  )

  it.effect("restores each tenant's and key's spend of the current UTC day, ISO week and month", () =>
    Effect.gen(function* () {
      const keyed = (ts: string, key: string, cost: number) =>
        encodeRecord(
          sampleRecord({
            ts,
            tenant: "acme",
            key_id: key,
            cost_micro_usd: cost,
            session: null,
            request_id: ts + key,
          }),
        )
      const file = yield* usageFile([
        keyed("2026-11-29T23:00:00.000Z", "ci", 1), // last week (Sunday), last month
        keyed("2026-11-30T01:00:00.000Z", "ci", 10), // this week (Monday), last month
        keyed("2026-12-01T09:00:00.000Z", "ci", 100), // this week and month, yesterday
        keyed("2026-12-02T00:00:00.000Z", "ci", 1_000), // today
        keyed("2026-12-02T09:00:00.000Z", "web", 10_000), // today, another key
      ])
      const now = Date.parse("2026-12-02T10:00:00.000Z")
      yield* TestClock.setTime(now)
      const refs = (key: string | undefined) => [
        { name: "day" as const, key, period: "2026-12-02" },
        { name: "week" as const, key, period: "2026-W49" },
        { name: "month" as const, key, period: "2026-12" },
      ]
      const states = yield* Effect.flatMap(Store, (store) =>
        Effect.forEach([undefined, "ci", "web"], (key) => store.tenantState("acme", now, refs(key))),
      ).pipe(Effect.provide(layerMemory({ usageFile: file })))
      const spends = states.map((state) => state.budgets.map((b) => b.spend))
      assert.deepStrictEqual(spends, [
        [11_000, 11_110, 11_100],
        [1_000, 1_110, 1_100],
        [10_000, 10_000, 10_000],
      ])
      assert.strictEqual(states[0]?.monthSpend, 11_100)
    }),
  )

  it.effect("a missing usage file restores nothing", () =>
    Effect.gen(function* () {
      const now = Date.parse("2026-12-02T10:00:00.000Z")
      const file = path.join(os.tmpdir(), `tollgate-missing-${process.pid}`, "usage.jsonl")
      const [acme] = yield* restoredState(file, now, ["acme"])
      assert.strictEqual(acme?.monthSpend, 0)
      assert.deepStrictEqual(acme?.sessions, [])
    }),
  )
})

describe("memory store restore of sticky session targets", () => {
  const served = (ts: string, session: string, provider: string, status = 200) =>
    encodeRecord(
      sampleRecord({ ts, session, provider, status, route: "claude", request_id: `${session}-${ts}` }),
    )

  it.effect("remembers each session's last 2xx target of the last 24 h, at most maxSessions per tenant", () =>
    Effect.gen(function* () {
      const file = yield* usageFile([
        served("2026-12-01T08:00:00.000Z", "s-old", "a"),
        served("2026-12-02T07:00:00.000Z", "s2", "a"),
        served("2026-12-02T07:30:00.000Z", "s3", "b"),
        served("2026-12-02T08:00:00.000Z", "s1", "a"),
        served("2026-12-02T08:30:00.000Z", "s1", "b"),
        served("2026-12-02T08:40:00.000Z", "s1", "a", 529),
      ])
      const now = Date.parse("2026-12-02T10:00:00.000Z")
      yield* TestClock.setTime(now)
      const found = yield* Effect.flatMap(Store, (store) =>
        Effect.forEach(["s-old", "s1", "s2", "s3"], (session) =>
          store.sessionTarget({ tenant: "acme", route: "claude", session }, now, 2),
        ),
      ).pipe(Effect.provide(layerMemory({ usageFile: file, maxSessions: 2 })))
      // s-old is older than 24 h; s1's last served request was b's (the 529 served nothing); of s1, s2 and
      // s3 the least recently used (s2) is forgotten to keep 2.
      assert.deepStrictEqual(found, [undefined, "b\nclaude-sonnet-5-5", undefined, "b\nclaude-sonnet-5-5"])
    }),
  )
})
