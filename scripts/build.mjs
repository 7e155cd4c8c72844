// Bundles the two executables. No TypeScript loader is needed at run time.
import { build } from "esbuild"
import { chmod, mkdir } from "node:fs/promises"

const entries = [
  { in: "src/bin/tollgate.ts", out: "bin/tollgate" },
  { in: "fakeprovider/main.ts", out: "bin/fakeprovider" },
]

await mkdir("bin", { recursive: true })
for (const entry of entries) {
  await build({
    entryPoints: [entry.in],
    outfile: entry.out,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    banner: {
      js: "#!/usr/bin/env node\nimport { createRequire as __tgCreateRequire } from 'node:module'; const require = __tgCreateRequire(import.meta.url);",
    },
    logLevel: "warning",
    legalComments: "none",
  })
  await chmod(entry.out, 0o755)
}
