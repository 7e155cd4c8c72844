import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Directories made by `tempDir` in this test file, removed after it by test/support/removeTempDirs.ts. */
const made: Array<string> = []

/** A new directory in the OS temp dir, removed once the test file's own `afterAll` hooks have run. */
export const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

/** Removes every directory `tempDir` made so far. */
export const removeTempDirs = (): void => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
}
