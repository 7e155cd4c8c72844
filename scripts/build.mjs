// Bundles the two executables and the library (`tollgate/providers`). No TypeScript loader is needed at run
// time. `--library` builds only the library.
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import { chmod, mkdir, rm } from "node:fs/promises"
import { createRequire } from "node:module"

/**
 * V8 settings of the gateway process, set by the first statement of `bin/tollgate`, before any module of
 * the program runs (ADR 0032). `--no-allocation-site-pretenuring`: V8 would otherwise switch code that first
 * runs while the process starts (when everything it creates survives) to create its objects in the old
 * generation, and keep doing so for the same code's per-request objects, which then, dead, keep the young
 * objects they point to alive until the next full collection.
 */
const TOLLGATE_V8_FLAGS = "--no-allocation-site-pretenuring"

/**
 * The first statement of each executable: on a Node older than the one the bundle is built for, one clear
 * line and exit 2 (SPEC "Runtime and packaging") instead of a syntax or API error deep inside.
 */
const nodeCheck = (name) =>
  `{ const [__tgMaj, __tgMin] = process.versions.node.split(".").map(Number); if (__tgMaj < 22 || (__tgMaj === 22 && __tgMin < 19)) { process.stderr.write("${name} needs Node.js 22.19 or newer (24 LTS recommended); this is Node.js " + process.versions.node + "\\n"); process.exit(2) } }`

/**
 * Node options of the gateway process that must be given at its start (V8 sizes the heap before any
 * JavaScript runs, so `setFlagsFromString` is too late for them): the executable's `#!/usr/bin/env -S node …`
 * line carries them (ADR 0044). `--max-semi-space-size=16`: Node 24 lets the young generation grow to
 * 128 MB and keeps it; at 16 MB (Node 20's size) per-request garbage dies young again, for less CPU and
 * 75–100 MB less RSS under load.
 */
const TOLLGATE_NODE_OPTIONS = "--max-semi-space-size=16"

const entries = [
  {
    in: "src/bin/tollgate.ts",
    out: "bin/tollgate",
    shebang: `#!/usr/bin/env -S node ${TOLLGATE_NODE_OPTIONS}`,
    first: `${nodeCheck("tollgate")}\nimport { setFlagsFromString as __tgSetFlags } from 'node:v8'; __tgSetFlags(${JSON.stringify(TOLLGATE_V8_FLAGS)});`,
  },
  {
    in: "fakeprovider/main.ts",
    out: "bin/fakeprovider",
    shebang: "#!/usr/bin/env node",
    first: nodeCheck("fakeprovider"),
  },
]

/**
 * `tollgate/providers`: src/providers/index.ts bundled as one ESM module with every package left as an
 * import (they are the package's dependencies), and its declarations from tsc (tsconfig.build.json).
 */
const buildLibrary = async () => {
  await rm("dist", { recursive: true, force: true })
  await build({
    entryPoints: ["src/providers/index.ts"],
    outfile: "dist/providers/index.js",
    bundle: true,
    packages: "external",
    platform: "node",
    target: "node22",
    format: "esm",
    logLevel: "warning",
    legalComments: "none",
  })
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { stdio: "inherit" })
}

await buildLibrary()
if (process.argv.includes("--library")) process.exit(0)

await mkdir("bin", { recursive: true })
for (const entry of entries) {
  await build({
    entryPoints: [entry.in],
    outfile: entry.out,
    bundle: true,
    platform: "node",
    target: "node22",
    format: "esm",
    banner: {
      js: `${entry.shebang}\n${entry.first}${entry.first === "" ? "" : "\n"}import { createRequire as __tgCreateRequire } from 'node:module'; const require = __tgCreateRequire(import.meta.url);`,
    },
    logLevel: "warning",
    legalComments: "none",
  })
  await chmod(entry.out, 0o755)
}
