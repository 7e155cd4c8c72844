import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { TOLLGATE } from "../support/processes.js"

describe("bin/tollgate bundle", () => {
  it("turns off V8's allocation-site pretenuring in its first statement, before any module runs (ADR 0032)", () => {
    const lines = readFileSync(TOLLGATE, "utf8").split("\n")
    expect(lines[0]).toBe("#!/usr/bin/env node")
    // The banner is the first code in the one-module bundle: nothing of the program has run before it.
    expect(lines[1]).toMatch(
      /^import \{ setFlagsFromString as (\w+) \} from 'node:v8'; \1\("--no-allocation-site-pretenuring"\);$/,
    )
  })
})
