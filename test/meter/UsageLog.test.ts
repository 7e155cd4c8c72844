import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Logger, References, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { decodeRecord, encodeRecord } from "../../src/meter/record.js"
import { MAX_RECORD_LINE_BYTES, readUsageFile, UsageLog } from "../../src/meter/UsageLog.js"
import { sampleRecord } from "./fixtures.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-usage-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })),
)

/** Builds the layer in its own scope, so a test can close it (flush + close) before reading the file. */
const openLog = (file: string) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(UsageLog.layer(file), scope)
    return { log: Context.get(context, UsageLog), scope }
  })

const lines = (file: string) => fs.readFileSync(file, "utf8").split("\n")

describe("UsageLog", () => {
  it.live("creates the folder and appends a line that is in the file when append completes", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "nested", "data", "usage.jsonl")
      const { log, scope } = yield* openLog(file)
      yield* log.append(sampleRecord({ request_id: "a" }))
      assert.strictEqual(fs.readFileSync(file, "utf8"), encodeRecord(sampleRecord({ request_id: "a" })))
      yield* log.append(sampleRecord({ request_id: "b" }))
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(
        lines(file).map((l) => (l === "" ? "" : decodeRecord(l)?.request_id)),
        ["a", "b", ""],
      )
    }),
  )

  it.live("writes concurrent appends as whole lines", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const { log, scope } = yield* openLog(file)
      const ids = Array.from({ length: 500 }, (_, i) => `req-${i}-${"x".repeat(i % 97)}`)
      yield* Effect.forEach(ids, (id) => log.append(sampleRecord({ request_id: id })), {
        concurrency: "unbounded",
      })
      yield* Scope.close(scope, Exit.void)
      const written = lines(file)
      assert.strictEqual(written.pop(), "")
      assert.strictEqual(written.length, 500)
      const seen = written.map((l) => decodeRecord(l)?.request_id)
      assert.deepStrictEqual([...seen].sort(), [...ids].sort())
    }),
  )

  it.live("puts a newline after a torn last line before the next append", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const whole = encodeRecord(sampleRecord({ request_id: "before" }))
      const torn = encodeRecord(sampleRecord({ request_id: "torn" })).slice(0, 70)
      fs.writeFileSync(file, whole + torn)
      const { log, scope } = yield* openLog(file)
      yield* log.append(sampleRecord({ request_id: "after" }))
      yield* log.append(sampleRecord({ request_id: "later" }))
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(
        fs.readFileSync(file, "utf8"),
        whole +
          torn +
          "\n" +
          encodeRecord(sampleRecord({ request_id: "after" })) +
          encodeRecord(sampleRecord({ request_id: "later" })),
      )
      const read = yield* readUsageFile(file)
      assert.deepStrictEqual(
        read.records.map((r) => r.request_id),
        ["before", "after", "later"],
      )
      assert.strictEqual(read.skipped, 1)
    }),
  )

  it.live("adds no newline when the file already ends with one", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const whole = encodeRecord(sampleRecord({ request_id: "before" }))
      fs.writeFileSync(file, whole)
      const { log, scope } = yield* openLog(file)
      yield* log.append(sampleRecord({ request_id: "after" }))
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(
        fs.readFileSync(file, "utf8"),
        whole + encodeRecord(sampleRecord({ request_id: "after" })),
      )
    }),
  )

  it.live("fails the layer when the file cannot be opened", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const exit = yield* Effect.exit(Layer.build(UsageLog.layer(dir)))
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(Layer.build(UsageLog.layer(dir)))
      assert.strictEqual(error._tag, "UsageFileError")
      assert.strictEqual(error.file, dir)
    }),
  )

  it.live("logs a write error once for the episode, not per record, instead of failing the caller", () =>
    Effect.gen(function* () {
      const { log, scope, messages } = yield* openFullLog()
      for (let i = 0; i < 5; i++) yield* log.append(sampleRecord({ request_id: `r${i}` }))
      // The episode's line is forked: give it its turn.
      yield* Effect.sleep("20 millis")
      const episode = messages.filter((m) =>
        (m.message as Array<string>)[0]!.startsWith("usage file refuses"),
      )
      assert.strictEqual(episode.length, 1)
      assert.strictEqual(episode[0]!.annotations["error"], "ENOSPC: no space left on device, write")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(messages.length, 2)
    }),
  )
})

/**
 * A log on a disk that is always full (/dev/full), built with a logger that
 * keeps each entry's message and annotations: what the layer logs (its
 * finalizer, its queued writes) goes there.
 */
const openFullLog = () =>
  Effect.gen(function* () {
    const messages: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
    const logger = Logger.make(({ message, fiber }) =>
      messages.push({ message, annotations: { ...fiber.getRef(References.CurrentLogAnnotations) } }),
    )
    const opened = yield* openLog("/dev/full").pipe(Effect.provide(Logger.layer([logger])))
    return { ...opened, messages }
  })

describe("UsageLog write errors", () => {
  it.live("keeps the lines the file refused, tries them again first, and logs them at close", () =>
    Effect.gen(function* () {
      // The layer's finalizer logs with the logger the layer was built with; the appends, with the default one.
      const { log, scope, messages } = yield* openFullLog()
      yield* log.append(sampleRecord({ request_id: "one" }))
      yield* log.append(sampleRecord({ request_id: "two" }))
      yield* Scope.close(scope, Exit.void)
      const atShutdown = messages.filter(
        (m) => (m.message as Array<string>)[0] === "usage records not written at shutdown",
      )
      assert.strictEqual(atShutdown.length, 1)
      const records = atShutdown[0]!.annotations["records"] as Array<string>
      assert.deepStrictEqual(
        records.map((line) => decodeRecord(line.trimEnd())?.request_id),
        ["one", "two"],
      )
    }),
  )
})

/** One turn of the event loop: what `queue` schedules with `setImmediate` has run after this. */
const nextCheckPhase = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const ids = (text: string) => text.split("\n").flatMap((l) => (l === "" ? [] : [decodeRecord(l)?.request_id]))

describe("UsageLog queued records (ADR 0037)", () => {
  it.live(
    "writes the records of one turn together on the check phase, in order, before what waits for them",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const file = path.join(dir, "usage.jsonl")
        const { log } = yield* openLog(file)
        // Nothing queued: at once.
        let early = false
        log.afterWrite(() => (early = true))
        assert.isTrue(early)
        log.queue(sampleRecord({ request_id: "a" }))
        log.queue(sampleRecord({ request_id: "b" }))
        const seen: Array<Array<string | undefined>> = []
        log.afterWrite(() => seen.push(ids(fs.readFileSync(file, "utf8"))))
        log.queue(sampleRecord({ request_id: "c" }))
        log.afterWrite(() => seen.push(ids(fs.readFileSync(file, "utf8"))))
        // Not yet written, nothing run: the write is on the check phase.
        assert.strictEqual(fs.readFileSync(file, "utf8"), "")
        assert.deepStrictEqual(seen, [])
        yield* nextCheckPhase
        assert.deepStrictEqual(seen, [
          ["a", "b", "c"],
          ["a", "b", "c"],
        ])
        // The next turn's records are a new batch.
        log.queue(sampleRecord({ request_id: "d" }))
        yield* nextCheckPhase
        assert.deepStrictEqual(ids(fs.readFileSync(file, "utf8")), ["a", "b", "c", "d"])
      }),
  )

  it.live(
    "a record appended at once goes after the queued ones (the file keeps the order of the calls)",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const file = path.join(dir, "usage.jsonl")
        const { log } = yield* openLog(file)
        log.queue(sampleRecord({ request_id: "queued" }))
        yield* log.append(sampleRecord({ request_id: "now" }))
        assert.deepStrictEqual(ids(fs.readFileSync(file, "utf8")), ["queued", "now"])
        yield* nextCheckPhase
        assert.deepStrictEqual(ids(fs.readFileSync(file, "utf8")), ["queued", "now"])
      }),
  )

  it.live("closing the log writes what is queued, then runs what waits for it", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const { log, scope } = yield* openLog(file)
      log.queue(sampleRecord({ request_id: "last" }))
      let found: Array<string | undefined> = []
      log.afterWrite(() => (found = ids(fs.readFileSync(file, "utf8"))))
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(found, ["last"])
    }),
  )

  it.live(
    "a refused write of queued records begins the episode (one line), keeps them for the next write, and still runs what waits",
    () =>
      Effect.gen(function* () {
        // The queued write logs through the runtime the layer was built with.
        const { log, scope, messages } = yield* openFullLog()
        log.queue(sampleRecord({ request_id: "one" }))
        log.queue(sampleRecord({ request_id: "two" }))
        let ran = false
        log.afterWrite(() => (ran = true))
        yield* nextCheckPhase
        // The failure's logging is forked: give it its turn.
        yield* Effect.yieldNow
        yield* Effect.sleep("10 millis")
        assert.isTrue(ran)
        assert.deepStrictEqual(messages[0]?.message, [
          "usage file refuses writes; records are kept in memory until it takes them",
        ])
        assert.strictEqual(messages[0]?.annotations["backlog_records"], 2)
        yield* Scope.close(scope, Exit.void)
        const atShutdown = messages.find(
          (m) => (m.message as Array<string>)[0] === "usage records not written at shutdown",
        )
        const kept = (atShutdown?.annotations["records"] as Array<string>).join("")
        assert.deepStrictEqual(ids(kept), ["one", "two"])
      }),
  )
})

describe("readUsageFile", () => {
  it.effect("reads a missing file as empty", () =>
    Effect.gen(function* () {
      const read = yield* readUsageFile(path.join(os.tmpdir(), "tollgate-no-such-dir", "usage.jsonl"))
      assert.deepStrictEqual(read, { records: [], skipped: 0 })
    }),
  )

  it.live("skips torn and corrupt lines with a warning and ignores blank lines", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const a = encodeRecord(sampleRecord({ request_id: "a" }))
      const b = encodeRecord(sampleRecord({ request_id: "b" }))
      fs.writeFileSync(file, a + "\n" + "garbage\n" + b + b.slice(0, 40))
      const warnings: Array<unknown> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(message)
      })
      const read = yield* readUsageFile(file).pipe(Effect.provide(Logger.layer([logger])))
      assert.deepStrictEqual(
        read.records.map((r) => r.request_id),
        ["a", "b"],
      )
      assert.strictEqual(read.skipped, 2)
      assert.strictEqual(warnings.length, 2)
    }),
  )

  it.live(
    "a 20 MB line without a newline (a NUL tail) is skipped, not held; the records around it stay",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const file = path.join(dir, "usage.jsonl")
        const a = encodeRecord(sampleRecord({ request_id: "a" }))
        const b = encodeRecord(sampleRecord({ request_id: "b" }))
        const fd = fs.openSync(file, "w")
        fs.writeSync(fd, a + "x".repeat(MAX_RECORD_LINE_BYTES + 1) + "\n" + b)
        fs.writeSync(fd, Buffer.alloc(20 * 1024 * 1024))
        fs.closeSync(fd)
        const heapBefore = process.memoryUsage().heapUsed
        const read = yield* readUsageFile(file).pipe(Effect.provide(Logger.layer([])))
        assert.deepStrictEqual(
          read.records.map((r) => r.request_id),
          ["a", "b"],
        )
        // The 64 KiB+ line and the NUL tail (a line of its own after b's newline) are skipped.
        assert.strictEqual(read.skipped, 2)
        assert.isBelow(process.memoryUsage().heapUsed - heapBefore, 10 * 1024 * 1024)
      }),
  )

  it.live("many bad lines: each is counted, the warnings stay few", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      fs.writeFileSync(file, "garbage\n".repeat(5_000))
      const warnings: Array<unknown> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(message)
      })
      const read = yield* readUsageFile(file).pipe(Effect.provide(Logger.layer([logger])))
      assert.strictEqual(read.skipped, 5_000)
      assert.strictEqual(warnings.length, 21)
    }),
  )

  it.live("with since, keeps only records at or after that time", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const at = (ts: string, id: string) => encodeRecord(sampleRecord({ ts, request_id: id }))
      fs.writeFileSync(
        file,
        at("2026-11-30T23:59:59.999Z", "old") +
          at("2026-12-01T00:00:00.000Z", "edge") +
          at("2026-12-02T10:04:05.123Z", "new"),
      )
      const read = yield* readUsageFile(file, { since: "2026-12-01T00:00:00.000Z" })
      assert.deepStrictEqual(
        read.records.map((r) => r.request_id),
        ["edge", "new"],
      )
    }),
  )

  it.live("reads a large file", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const file = path.join(dir, "usage.jsonl")
      const line = encodeRecord(sampleRecord())
      fs.writeFileSync(file, line.repeat(20_000))
      const read = yield* readUsageFile(file)
      assert.strictEqual(read.records.length, 20_000)
      assert.strictEqual(read.records[19_999].cost_micro_usd, 6700)
    }),
  )

  it.live("fails with UsageFileError when the path is a folder", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const error = yield* Effect.flip(readUsageFile(dir))
      assert.strictEqual(error._tag, "UsageFileError")
    }),
  )
})
