import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { vi } from "vitest"
import { decodeRecord } from "../../src/meter/record.js"
import { UsageLog } from "../../src/meter/UsageLog.js"
import { sampleRecord } from "./fixtures.js"

/**
 * What the disk does to the next writes, as write(2) can: take only `bytes` of them (a short write), or
 * fail without taking any. Each entry is used once; past the plan, writes take everything.
 */
const plan: Array<{ readonly bytes: number } | "fail"> = []

vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>()
  const writeSync = (fd: number, data: string | Uint8Array, offset?: number): number => {
    const step = plan.shift()
    const bytes = typeof data === "string" ? Buffer.from(data) : Buffer.from(data.subarray(offset ?? 0))
    if (step === undefined) return real.writeSync(fd, bytes)
    if (step === "fail") throw Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" })
    const n = Math.min(step.bytes, bytes.length)
    return n > 0 ? real.writeSync(fd, bytes.subarray(0, n)) : 0
  }
  return { ...real, writeSync, default: { ...real, writeSync } }
})

const withLog = <A>(f: (log: UsageLog["Service"], file: string) => Effect.Effect<A>) =>
  Effect.gen(function* () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-short-"))
    const file = path.join(dir, "usage.jsonl")
    const scope = yield* Scope.make()
    const log = Context.get(yield* Layer.buildWithScope(UsageLog.layer(file), scope), UsageLog)
    yield* f(log, file)
    yield* Scope.close(scope, Exit.void)
    const text = fs.readFileSync(file, "utf8")
    fs.rmSync(dir, { recursive: true, force: true })
    return text
  })

const appendOneAndTwo = (log: UsageLog["Service"]) =>
  Effect.andThen(
    log.append(sampleRecord({ request_id: "one" })),
    log.append(sampleRecord({ request_id: "two" })),
  )

const ids = (text: string) =>
  text.split("\n").map((line) => (line === "" ? "" : (decodeRecord(line)?.request_id ?? "torn")))

describe("UsageLog on a disk that takes less than asked", () => {
  it.effect("continues a short write at once: one whole line", () =>
    Effect.gen(function* () {
      plan.length = 0
      plan.push({ bytes: 40 })
      const text = yield* withLog((log) => log.append(sampleRecord({ request_id: "one" })))
      assert.deepStrictEqual(ids(text), ["one", ""])
    }),
  )

  it.effect(
    "after an error that left all but the newline in the file, writes the newline, never the record again",
    () =>
      Effect.gen(function* () {
        plan.length = 0
        const line = Buffer.byteLength(JSON.stringify(sampleRecord({ request_id: "one" })))
        // The first record's JSON reaches the file, its "\n" does not: the disk is full by then.
        plan.push({ bytes: line }, "fail")
        const text = yield* withLog((log) =>
          Effect.andThen(
            log.append(sampleRecord({ request_id: "one" })),
            log.append(sampleRecord({ request_id: "two" })),
          ),
        )
        assert.deepStrictEqual(ids(text), ["one", "two", ""])
      }),
  )

  it.effect("after an error halfway through a line, continues that line, then writes the next", () =>
    Effect.gen(function* () {
      plan.length = 0
      plan.push({ bytes: 30 }, "fail")
      const text = yield* withLog(appendOneAndTwo)
      assert.deepStrictEqual(ids(text), ["one", "two", ""])
    }),
  )

  it.effect("treats a write of 0 bytes as an error instead of trying for ever", () =>
    Effect.gen(function* () {
      plan.length = 0
      plan.push({ bytes: 0 }, { bytes: 0 })
      const text = yield* withLog(appendOneAndTwo)
      assert.deepStrictEqual(ids(text), ["one", "two", ""])
    }),
  )

  it.effect(
    "a queued batch the disk stopped inside: whole lines in the file are not written again, the line begun is continued",
    () =>
      Effect.gen(function* () {
        plan.length = 0
        const line = Buffer.byteLength(JSON.stringify(sampleRecord({ request_id: "one" }))) + 1
        // The batch's first line and 40 bytes of its second reach the file, then the disk is full.
        plan.push({ bytes: line + 40 }, "fail")
        const text = yield* withLog((log) =>
          Effect.gen(function* () {
            log.queue(sampleRecord({ request_id: "one" }))
            log.queue(sampleRecord({ request_id: "two" }))
            log.queue(sampleRecord({ request_id: "three" }))
            let ran = false
            log.afterWrite(() => (ran = true))
            yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
            // The responses waiting for the write still end.
            assert.isTrue(ran)
            // The next record's write takes the rest of "two", then "three", then "four".
            yield* log.append(sampleRecord({ request_id: "four" }))
          }),
        )
        assert.deepStrictEqual(ids(text), ["one", "two", "three", "four", ""])
      }),
  )
})
