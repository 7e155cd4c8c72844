// Bytes allocated per request from a sampling heap profile (see alloc-preload.cjs), and the share of
// each package/source folder when BUNDLE (e.g. bin/tollgate) is given: esbuild's `// path` comments
// in the bundle map sample positions back to their modules.
// Usage: node bench/alloc-report.mjs alloc.heapprofile REQUESTS [bin/tollgate]
import { readFileSync } from "node:fs"

const [file, requests, bundle] = process.argv.slice(2)
const profile = JSON.parse(readFileSync(file, "utf8"))
const moduleAt = []
if (bundle !== undefined) {
  let current = "(prelude)"
  readFileSync(bundle, "utf8")
    .split("\n")
    .forEach((line, i) => {
      const m = /^\/\/ (\S+\.(?:ts|js|mjs|cjs))$/.exec(line)
      if (m) current = m[1].replace(/^.*node_modules\//, "")
      moduleAt[i] = current
    })
}
const shares = new Map()
let total = 0
const walk = (node) => {
  total += node.selfSize
  const frame = node.callFrame
  let key = `node:${frame.url.split("/").pop() || frame.functionName}`
  if (bundle !== undefined && frame.url.endsWith(bundle.split("/").pop())) {
    const mod = moduleAt[frame.lineNumber] ?? "?"
    key = mod.startsWith("src/")
      ? mod.split("/").slice(0, 2).join("/")
      : mod
          .split("/")
          .slice(0, mod.startsWith("@") ? 2 : 1)
          .join("/")
  }
  shares.set(key, (shares.get(key) ?? 0) + node.selfSize)
  for (const child of node.children) walk(child)
}
walk(profile.head)
console.log(
  `${(total / Number(requests) / 1024).toFixed(1)} KB allocated per request (${(total / 1e6).toFixed(0)} MB / ${requests})`,
)
for (const [key, bytes] of [...shares.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
  console.log(`${((bytes / total) * 100).toFixed(1).padStart(5)}%  ${key}`)
}
