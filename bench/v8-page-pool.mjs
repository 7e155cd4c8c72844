// What V8 does with the heap pages a garbage collection frees (bench/README.md, "V8's page pool"): it keeps
// them mapped and resident in a pool for reuse, and gives them back to the system only in a memory-reducing
// collection (the memory reducer, once the allocation rate is low; memory pressure; `--memory-saver-mode`).
// Under steady load that never comes, so a process's RSS stays at the highest heap it has had.
//
// Usage: node --expose-gc --max-semi-space-size=16 [--trace-gc] bench/v8-page-pool.mjs [seconds idle, 25]
// Prints V8's heap total, the 256 KiB anonymous mappings (V8's pages) with their resident size, and RSS:
// at the start, with 400,000 objects promoted to the old generation, after dropping them and two full
// collections, after some young-generation churn, and after the idle wait. `--trace-gc` shows "pooled: N MB".
import { readFileSync } from "node:fs"
import v8 from "node:v8"

if (typeof globalThis.gc !== "function") {
  process.stderr.write("run with --expose-gc\n")
  process.exit(2)
}
const idleS = Number(process.argv[2] ?? 25)

/** V8's pages: anonymous read-write mappings of exactly 256 KiB (without pointer compression each is its own). */
const pages = () => {
  let count = 0
  let residentKb = 0
  let page = false
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head !== null) {
      page = head[4] === "" && head[3] === "rw-p" && parseInt(head[2], 16) - parseInt(head[1], 16) === 262_144
      if (page) count++
    } else if (page && line.startsWith("Rss:")) residentKb += Number(/(\d+)/.exec(line)[1])
  }
  return { count, residentMb: residentKb / 1024 }
}
const mb = (bytes) => (bytes / 1048576).toFixed(1)
const show = (label) => {
  const p = pages()
  console.log(
    `${label.padEnd(34)} heap total ${mb(v8.getHeapStatistics().total_heap_size).padStart(5)} MB   ` +
      `pages ${String(p.count).padStart(4)} (${(p.count / 4).toFixed(1)} MB, ${p.residentMb.toFixed(1)} resident)   ` +
      `RSS ${mb(process.memoryUsage().rss)} MB`,
  )
}

show("start")
let kept = []
for (let i = 0; i < 400_000; i++) kept.push({ a: i, b: `x${i}`, c: [i, i] })
globalThis.gc()
globalThis.gc()
show(`${kept.length} objects in the old gen`)
kept = null
globalThis.gc()
globalThis.gc()
show("dropped, two full collections")
let churned = 0
for (let round = 0; round < 50; round++) {
  const batch = []
  for (let i = 0; i < 20_000; i++) batch.push({ i, s: `y${i}` })
  churned += batch.length
}
show(`young churn (${churned} objects)`)
await new Promise((resolve) => setTimeout(resolve, idleS * 1000))
show(`${idleS} s idle`)
