// Bundles the two executables and the library (`tollgate/providers`). No TypeScript loader is needed at run
// time. `--library` builds only the library.
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import { chmod, mkdir, rm } from "node:fs/promises"
import { createRequire } from "node:module"
import { buildConsole, consoleDefine } from "./console.mjs"
import { TOLLGATE_NODE_OPTIONS, TOLLGATE_V8_FLAGS } from "./gateway-flags.mjs"

/**
 * The first statement of each executable: on a Node older than the one the bundle is built for, one clear
 * line and exit 2 (SPEC "Runtime and packaging") instead of a syntax or API error deep inside.
 */
const nodeCheck = (name) =>
  `{ const [__tgMaj, __tgMin] = process.versions.node.split(".").map(Number); if (__tgMaj < 22 || (__tgMaj === 22 && __tgMin < 19)) { process.stderr.write("${name} needs Node.js 22.19 or newer (24 LTS recommended); this is Node.js " + process.versions.node + "\\n"); process.exit(2) } }`

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
  // Only the library's folders: dist/tollgate (`npm run build:exe`) stays.
  await rm("dist/providers", { recursive: true, force: true })
  await rm("dist/types", { recursive: true, force: true })
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
const consoleFiles = await buildConsole()

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
    // No comments or indentation: V8 keeps the whole source in the heap as one string (two bytes per
    // character when a comment holds one non-Latin-1 character), ~11 MB otherwise.
    minifyWhitespace: true,
    define:
      entry.out === "bin/tollgate" ? consoleDefine(consoleFiles) : { __TOLLGATE_CONSOLE__: "undefined" },
    // TOLLGATE_SOURCEMAP=1 (npm run bench:profile): bin/tollgate.map beside it, for the profile's stages;
    // the bundle itself is the same (no comment points to the map).
    ...(process.env.TOLLGATE_SOURCEMAP === "1" && entry.out === "bin/tollgate"
      ? { sourcemap: "external" }
      : {}),
  })
  await chmod(entry.out, 0o755)
}
