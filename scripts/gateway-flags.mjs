// The V8 settings of the gateway process, shared by scripts/build.mjs (bin/tollgate) and
// scripts/build-exe.mjs (dist/tollgate).

/**
 * V8 settings of the gateway process, set by the first statement of `bin/tollgate`, before any module of
 * the program runs (ADR 0032). `--no-allocation-site-pretenuring`: V8 would otherwise switch code that first
 * runs while the process starts (when everything it creates survives) to create its objects in the old
 * generation, and keep doing so for the same code's per-request objects, which then, dead, keep the young
 * objects they point to alive until the next full collection.
 */
export const TOLLGATE_V8_FLAGS = "--no-allocation-site-pretenuring"

/**
 * Node options of the gateway process that must be given at its start (V8 sizes the heap before any
 * JavaScript runs, so `setFlagsFromString` is too late for them): the executable's `#!/usr/bin/env -S node …`
 * line carries them (ADR 0044), and the single executable's `execArgv` (ADR 0053).
 * `--max-semi-space-size=16`: Node 24 lets the young generation grow to 128 MB and keeps it; at 16 MB
 * (Node 20's size) per-request garbage dies young again, for less CPU and 75–100 MB less RSS under load.
 * `--v8-pool-size=2`: two V8 worker threads (garbage collection and compilation in the background) instead
 * of Node's four; each worker's malloc arena kept 6–9 MB resident, at no measurable CPU cost (ADR 0067).
 */
export const TOLLGATE_NODE_OPTIONS = "--max-semi-space-size=16 --v8-pool-size=2"
