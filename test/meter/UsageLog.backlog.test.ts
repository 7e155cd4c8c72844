import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Logger, References, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as fs from "node:fs"
import * as path from "node:path"
import { vi } from "vitest"
import { decodeRecord, encodeRecord } from "../../src/meter/record.js"
import { UsageLog } from "../../src/meter/UsageLog.js"
import { UsageBacklog } from "../../src/ops/UsageBacklog.js"
import { tempDir } from "../support/tempDirs.js"
import { sampleRecord } from "./fixtures.js"

/**
 * The bounded backlog of a usage file on a disk that fills (ADR 0070): while
 * `disk.full`, every write(2) fails with ENOSPC as a full filesystem does.
 */
const disk = { full: false }

vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>()
  const writeSync = (fd: number, data: string | Uint8Array, offset?: number): number => {
    if (disk.full)
      throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })
    return typeof data === "string" ? real.writeSync(fd, data) : real.writeSync(fd, data, offset ?? 0)
  }
  return { ...real, writeSync, default: { ...real, writeSync } }
})

const LINE = Buffer.byteLength(encodeRecord(sampleRecord({ request_id: "r-00000" })))

/** A log whose backlog holds `records` lines of sampleRecord's size, with its counts and what it logged. */
const open = (records: number) =>
  Effect.gen(function* () {
    const dir = tempDir("tollgate-backlog-")
    const file = path.join(dir, "usage.jsonl")
    const messages: Array<{ message: string; annotations: Record<string, unknown> }> = []
    const logger = Logger.make(({ message, fiber }) =>
      messages.push({
        message: (message as Array<string>)[0]!,
        annotations: { ...fiber.getRef(References.CurrentLogAnnotations) },
      }),
    )
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      UsageLog.layer(file, { backlogMaxBytes: records * LINE }).pipe(
        Layer.provideMerge(UsageBacklog.layer),
        Layer.provide(Logger.layer([logger])),
      ),
      scope,
    )
    return {
      log: Context.get(context, UsageLog),
      counts: Context.get(context, UsageBacklog),
      file,
      messages,
      close: Scope.close(scope, Exit.void),
    }
  })

const id = (i: number) => `r-${String(i).padStart(5, "0")}`
const ids = (file: string) =>
  fs
    .readFileSync(file, "utf8")
    .split("\n")
    .flatMap((l) => (l === "" ? [] : [decodeRecord(l)?.request_id ?? "torn"]))

describe("UsageLog on a disk that fills (ADR 0070)", () => {
  it.effect(
    "holds the records the file refuses up to the bound, in order, drops the rest counted; writes the backlog once the disk has room, and says so in a handful of lines",
    () =>
      Effect.gen(function* () {
        disk.full = false
        const { log, counts, file, messages, close } = yield* open(100)
        for (let i = 0; i < 10; i++) yield* log.append(sampleRecord({ request_id: id(i) }))
        disk.full = true
        for (let i = 10; i < 2_000; i++) yield* log.append(sampleRecord({ request_id: id(i) }))
        // The backlog holds the first 100 refused, the 1,890 after them are dropped.
        assert.strictEqual(counts.records, 100)
        assert.strictEqual(counts.bytes, 100 * LINE)
        assert.strictEqual(counts.dropped, 1_890)
        assert.isTrue(counts.full)
        // Retried every second; a line a minute while it lasts.
        yield* TestClock.adjust("150 seconds")
        assert.strictEqual(counts.records, 100)
        disk.full = false
        yield* TestClock.adjust("1 second")
        assert.strictEqual(counts.records, 0)
        assert.strictEqual(counts.bytes, 0)
        assert.isFalse(counts.full)
        assert.deepStrictEqual(
          ids(file),
          Array.from({ length: 110 }, (_, i) => id(i)),
        )
        // New records go straight to the file again.
        yield* log.append(sampleRecord({ request_id: "after" }))
        assert.strictEqual(ids(file).at(-1), "after")
        assert.deepStrictEqual(
          messages.map((m) => m.message),
          [
            "usage file refuses writes; records are kept in memory until it takes them",
            "usage backlog full: new records are dropped and counted, tenants with hard budgets refused, /readyz not ready",
            "usage file still refuses writes",
            "usage file still refuses writes",
            "usage file takes writes again; the records kept in memory are written",
          ],
        )
        assert.strictEqual(messages[0]!.annotations["error"], "ENOSPC: no space left on device, write")
        assert.strictEqual(messages[3]!.annotations["backlog_records"], 100)
        assert.strictEqual(messages[3]!.annotations["dropped"], 1_890)
        const recovered = messages[4]!.annotations
        assert.strictEqual(recovered["written_late"], 100)
        assert.strictEqual(recovered["dropped"], 1_890)
        assert.strictEqual(recovered["down_ms"], 151_000)
        yield* close
      }),
  )

  it.effect(
    "a disk full for a moment: nothing dropped, the records written late in order, at the next retry",
    () =>
      Effect.gen(function* () {
        disk.full = false
        const { log, counts, file, messages, close } = yield* open(100)
        disk.full = true
        log.queue(sampleRecord({ request_id: id(0) }))
        log.queue(sampleRecord({ request_id: id(1) }))
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        yield* log.append(sampleRecord({ request_id: id(2) }))
        assert.strictEqual(counts.records, 3)
        disk.full = false
        // No write before the retry: a request on a full disk costs no write(2).
        yield* log.append(sampleRecord({ request_id: id(3) }))
        assert.deepStrictEqual(ids(file), [])
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(ids(file), [id(0), id(1), id(2), id(3)])
        assert.strictEqual(counts.dropped, 0)
        assert.strictEqual(messages.at(-1)!.annotations["written_late"], 4)
        assert.strictEqual(messages.length, 2)
        yield* close
      }),
  )

  it.effect(
    "closing while the disk is still full logs the backlog's lines once, the last chance to recover them",
    () =>
      Effect.gen(function* () {
        disk.full = true
        const { log, messages, close } = yield* open(100)
        yield* log.append(sampleRecord({ request_id: id(0) }))
        yield* log.append(sampleRecord({ request_id: id(1) }))
        yield* close
        disk.full = false
        const last = messages.at(-1)!
        assert.strictEqual(last.message, "usage records not written at shutdown")
        const records = last.annotations["records"] as Array<string>
        assert.deepStrictEqual(
          records.map((line) => decodeRecord(line.trimEnd())?.request_id),
          [id(0), id(1)],
        )
      }),
  )
})
