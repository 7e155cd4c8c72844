import { afterAll } from "vitest"
import { removeTempDirs } from "./tempDirs.js"

// A setup file: registered before the test file's own hooks, so (afterAll hooks run in reverse) this runs
// after them, when the file's harnesses are closed and their usage files flushed and read.
afterAll(removeTempDirs)
