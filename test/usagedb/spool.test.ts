import { appendFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { SpoolReader } from "../../src/usagedb/spool.js"
import { tempDir } from "../support/tempDirs.js"

/** The usage file read as the database writer's spool: whole lines, a batch at a time, from an offset. */
describe("SpoolReader", () => {
  const line = (i: number) => `{"request_id":"r-${i}","pad":"${"x".repeat(600)}"}`

  it("takes up to a batch of lines whatever their length (a batch spans many reads), then the rest; never a line still being written", async () => {
    const file = join(tempDir("tollgate-spool-"), "usage.jsonl")
    const lines = Array.from({ length: 2_500 }, (_, i) => line(i))
    // The last line is still being written: no line end yet.
    writeFileSync(file, `${lines.join("\n")}\n{"request_id":"half`)
    const reader = new SpoolReader(file, 0)
    const sizes: Array<number> = []
    const seen: Array<string> = []
    for (;;) {
      const batch = await reader.next(1_000)
      if (batch === undefined) break
      sizes.push(batch.lines)
      seen.push(...batch.texts)
      expect(batch.skipped).toBe(0)
      reader.offset = batch.end
    }
    expect(sizes).toEqual([1_000, 1_000, 500])
    expect(seen).toEqual(lines)
    // The line completed later is the next batch, whole.
    appendFileSync(file, `-done"}\n`)
    const last = await reader.next(1_000)
    expect(last?.texts).toEqual(['{"request_id":"half-done"}'])
    await reader.close()
  })

  it("skips a line longer than any record, counting it, and goes on after it", async () => {
    const file = join(tempDir("tollgate-spool-"), "usage.jsonl")
    writeFileSync(file, `${line(1)}\n${"y".repeat(600_000)}\n${line(2)}\n`)
    const reader = new SpoolReader(file, 0)
    const texts: Array<string> = []
    let skipped = 0
    for (;;) {
      const batch = await reader.next(1_000)
      if (batch === undefined) break
      texts.push(...batch.texts)
      skipped += batch.skipped
      reader.offset = batch.end
    }
    expect(texts).toEqual([line(1), line(2)])
    expect(skipped).toBe(1)
    await reader.close()
  })
})
