import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { decodeEvent, encodeEvent, makeFileKeys, replay, type KeyEvent } from "../../src/keys/fileKeys.js"
import { hashKey } from "../../src/keys/keys.js"
import { FILE_FLUSH_MS, NO_KEY_BUDGETS, type RuntimeKey } from "../../src/keys/KeyStore.js"
import { decodeKey } from "../../src/keys/redisKeys.js"
import { KeyTable, LastUse } from "../../src/keys/table.js"
import { tempDir } from "../support/tempDirs.js"

/** The key store's logic on the test clock: expiry, revocation, last use (ADR 0050). */

const T0 = Date.parse("2026-12-02T10:00:00.000Z")
const tempFile = () => join(tempDir("tollgate-keystore-"), "keys.jsonl")
const sha = (secret: string) => hashKey(secret)

const key = (fields: Partial<RuntimeKey> = {}): RuntimeKey => ({
  tenant: "acme",
  id: "k",
  sha256: sha("k"),
  createdAt: T0,
  expiresAt: null,
  revokedAt: null,
  budgets: NO_KEY_BUDGETS,
  ...fields,
})

describe("file key store", () => {
  it.effect("a key is found until its expires_at on the layer's clock, then never", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* TestClock.setTime(T0)
        const store = yield* makeFileKeys(tempFile())
        const created = yield* store.create({
          tenant: "acme",
          id: "short",
          sha256: sha("short"),
          expiresAt: T0 + 1_000,
          budgets: NO_KEY_BUDGETS,
        })
        assert.strictEqual(created.createdAt, T0)
        assert.strictEqual(store.find(sha("short"))?.id, "short")
        yield* TestClock.adjust("999 millis")
        assert.isDefined(store.find(sha("short")))
        yield* TestClock.adjust("1 millis")
        assert.isUndefined(store.find(sha("short")))
        assert.isUndefined(store.find(sha("unknown")))
      }),
    ),
  )

  it.effect("revoke hides the key at once; ids stay taken; unknown ids are not found", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* TestClock.setTime(T0)
        const store = yield* makeFileKeys(tempFile())
        yield* store.create({
          tenant: "acme",
          id: "a",
          sha256: sha("a"),
          expiresAt: null,
          budgets: NO_KEY_BUDGETS,
        })
        yield* TestClock.adjust("2 seconds")
        const revoked = yield* store.revoke("acme", "a")
        assert.strictEqual(revoked.revokedAt, T0 + 2_000)
        assert.isUndefined(store.find(sha("a")))
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual((yield* store.revoke("acme", "a")).revokedAt, T0 + 2_000)
        const again = yield* Effect.exit(
          store.create({
            tenant: "acme",
            id: "a",
            sha256: sha("b"),
            expiresAt: null,
            budgets: NO_KEY_BUDGETS,
          }),
        )
        assert.isTrue(Exit.isFailure(again))
        const missing = yield* Effect.flip(store.revoke("acme", "nope"))
        assert.strictEqual(missing._tag, "KeyNotFound")
        assert.deepStrictEqual(
          (yield* store.list(undefined)).map((k) => [k.id, k.revokedAt]),
          [["a", T0 + 2_000]],
        )
      }),
    ),
  )

  it.effect(
    "last use: noted in memory, appended every FILE_FLUSH_MS once the file exists, and at close",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(T0)
        const file = tempFile()
        const usedLines = () =>
          existsSync(file)
            ? readFileSync(file, "utf8")
                .split("\n")
                .map(decodeEvent)
                .filter((e) => e?.event === "used")
            : []
        yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeFileKeys(file)
            store.used("acme", "ci")
            assert.strictEqual(store.lastUsed("acme", "ci"), T0)
            yield* TestClock.adjust(`${FILE_FLUSH_MS} millis`)
            // No runtime key yet, so no file.
            assert.isFalse(existsSync(file))
            yield* store.create({
              tenant: "acme",
              id: "rt",
              sha256: sha("rt"),
              expiresAt: null,
              budgets: NO_KEY_BUDGETS,
            })
            yield* TestClock.adjust("1 second")
            store.used("acme", "rt")
            assert.strictEqual(usedLines().length, 0)
            yield* TestClock.adjust(`${FILE_FLUSH_MS} millis`)
            assert.strictEqual(usedLines().length, 2)
            yield* TestClock.adjust("1 second")
            store.used("acme", "rt")
          }),
        )
        assert.strictEqual(usedLines().length, 3)
        // A new store on the file knows the times.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeFileKeys(file)
            assert.strictEqual(store.lastUsed("acme", "ci"), T0)
            assert.strictEqual(store.lastUsed("acme", "rt"), T0 + 2 * FILE_FLUSH_MS + 2_000)
            assert.strictEqual(store.find(sha("rt"))?.id, "rt")
          }),
        )
      }),
  )
})

describe("file key store compaction", () => {
  it.effect(
    "a file mostly of superseded lines is rewritten at start, keeping every key and the latest uses",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(T0)
        const file = tempFile()
        let text = encodeEvent({ event: "created", key: key({ id: "a", sha256: sha("a") }) })
        text += encodeEvent({ event: "created", key: key({ id: "b", sha256: sha("b") }) })
        text += encodeEvent({ event: "revoked", tenant: "acme", id: "b", at: T0 + 1 })
        for (let i = 0; i < 1_200; i++)
          text += encodeEvent({ event: "used", tenant: "acme", id: "a", at: T0 + i })
        writeFileSync(file, text)
        yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeFileKeys(file)
            assert.strictEqual(store.find(sha("a"))?.id, "a")
            assert.isUndefined(store.find(sha("b")))
            assert.strictEqual(store.lastUsed("acme", "a"), T0 + 1_199)
          }),
        )
        const lines = readFileSync(file, "utf8").trimEnd().split("\n")
        assert.strictEqual(lines.length, 4)
        const state = replay(lines.map((line) => decodeEvent(line)!))
        assert.strictEqual(state.keys.size, 2)
        assert.strictEqual(state.used.get("acme")?.get("a"), T0 + 1_199)
        assert.strictEqual(statSync(file).mode & 0o777, 0o600)
      }),
  )
})

describe("events and tables", () => {
  it("an event survives encoding; replay keeps the first creation and the first revocation", () => {
    const created = key({ expiresAt: T0 + 5_000 })
    const events: Array<KeyEvent> = [
      { event: "created", key: created },
      { event: "created", key: key({ sha256: sha("other") }) },
      { event: "revoked", tenant: "acme", id: "k", at: T0 + 1 },
      { event: "revoked", tenant: "acme", id: "k", at: T0 + 2 },
      { event: "revoked", tenant: "acme", id: "ghost", at: T0 },
      { event: "used", tenant: "acme", id: "k", at: T0 + 9 },
      { event: "used", tenant: "acme", id: "k", at: T0 + 3 },
    ]
    const decoded = events.map((e) => decodeEvent(encodeEvent(e).trimEnd()))
    assert.deepStrictEqual(decoded, events)
    const state = replay(events)
    assert.deepStrictEqual([...state.keys.values()], [{ ...created, revokedAt: T0 + 1 }])
    assert.strictEqual(state.used.get("acme")?.get("k"), T0 + 9)
  })

  it("decodeEvent refuses what is not a whole event", () => {
    for (const line of ["", "null", "[]", '{"event":"created"}', '{"event":"used","tenant":"a","id":"b"}']) {
      assert.isUndefined(decodeEvent(line), line)
    }
    const line = encodeEvent({ event: "created", key: key() }).replace(
      /"sha256":"[0-9a-f]+"/,
      '"sha256":"tg_x"',
    )
    assert.isUndefined(decodeEvent(line))
  })

  it("a Redis hash field decodes to its key, with its revocation time", () => {
    const json = JSON.stringify({ sha256: sha("k"), created_at: T0, expires_at: null })
    assert.deepStrictEqual(decodeKey("acme", "k", json, undefined), key())
    assert.deepStrictEqual(decodeKey("acme", "k", json, String(T0 + 7)), key({ revokedAt: T0 + 7 }))
    assert.isUndefined(decodeKey("acme", "k", "{", undefined))
  })

  it("a key's budgets survive the keys file and the Redis hash, in integer micro-USD", () => {
    const budgets = {
      day: { limitMicroUsd: 2_500_000, mode: "hard" as const },
      week: undefined,
      month: { limitMicroUsd: 40_000_000, mode: "soft" as const },
    }
    const line = encodeEvent({ event: "created", key: key({ budgets }) })
    assert.include(
      line,
      '"budgets":{"day":{"limit_micro_usd":2500000,"mode":"hard"},"month":{"limit_micro_usd":40000000,"mode":"soft"}}',
    )
    assert.deepStrictEqual(decodeEvent(line.trimEnd()), { event: "created", key: key({ budgets }) })
    // A key without budgets writes none (older lines read back with none).
    assert.notInclude(encodeEvent({ event: "created", key: key() }), "budgets")
    const json = JSON.stringify({
      sha256: sha("k"),
      created_at: T0,
      expires_at: null,
      budgets: {
        day: { limit_micro_usd: 2_500_000, mode: "hard" },
        month: { limit_micro_usd: 40_000_000, mode: "soft" },
      },
    })
    assert.deepStrictEqual(decodeKey("acme", "k", json, undefined), key({ budgets }))
    // Budgets not in that form make the entry unreadable rather than a key without its limits.
    const bad = JSON.stringify({
      sha256: sha("k"),
      created_at: T0,
      expires_at: null,
      budgets: { day: { limit_micro_usd: 1.5, mode: "hard" } },
    })
    assert.isUndefined(decodeKey("acme", "k", bad, undefined))
  })

  it("the table finds live keys only, and a replaced key leaves no stale hash behind", () => {
    const table = new KeyTable()
    table.put(key())
    assert.isDefined(table.find(sha("k"), T0))
    table.put(key({ sha256: sha("k2") }))
    assert.isUndefined(table.find(sha("k"), T0))
    assert.isDefined(table.find(sha("k2"), T0))
    table.put(key({ sha256: sha("k2"), revokedAt: T0 }))
    assert.isUndefined(table.find(sha("k2"), T0))
    table.put(key({ id: "e", sha256: sha("e"), expiresAt: T0 + 10 }))
    assert.isDefined(table.find(sha("e"), T0 + 9))
    assert.isUndefined(table.find(sha("e"), T0 + 10))
    assert.strictEqual(table.size, 2)
  })

  it("last use keeps the later of this copy's time and the stored one; a failed write is given back", () => {
    const times = new LastUse()
    times.note("acme", "k", T0 + 5)
    times.setStored(new Map([["acme", new Map([["k", T0 + 9]])]]))
    assert.strictEqual(times.get("acme", "k"), T0 + 9)
    // Within a second of the last noted use nothing is written (this runs on every request).
    times.note("acme", "k", T0 + 20)
    assert.strictEqual(times.get("acme", "k"), T0 + 9)
    times.note("acme", "k", T0 + 2_000)
    assert.strictEqual(times.get("acme", "k"), T0 + 2_000)
    const pending = times.takePending()
    assert.strictEqual(pending.get("acme")?.get("k"), T0 + 2_000)
    assert.isFalse(times.hasPending)
    times.putBack(pending)
    assert.isTrue(times.hasPending)
    assert.isNull(times.get("acme", "other"))
  })
})
