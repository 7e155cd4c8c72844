// The web console's build, shared by scripts/build.mjs (bin/tollgate) and scripts/build-exe.mjs (dist/tollgate).
import { build } from "esbuild"
import { copyFile, readFile, rm } from "node:fs/promises"
import { join } from "node:path"

const root = join(import.meta.dirname, "..")
const out = join(root, "dist/console")

/**
 * The web console (`console/`, SPEC "Console", ADR 0059): Preact and uPlot bundled and minified for current
 * browsers into dist/console/{index.html,app.js,app.css}; returns the three files' text, which the gateway
 * bundles embed (`__TOLLGATE_CONSOLE__`). Nothing is loaded from elsewhere at run time.
 */
export const buildConsole = async () => {
  await rm(out, { recursive: true, force: true })
  await build({
    entryPoints: { app: join(root, "console/src/main.tsx") },
    outdir: out,
    bundle: true,
    minify: true,
    platform: "browser",
    target: ["chrome120", "firefox120", "safari17"],
    format: "esm",
    jsx: "automatic",
    jsxImportSource: "preact",
    logLevel: "warning",
    legalComments: "none",
  })
  await copyFile(join(root, "console/index.html"), join(out, "index.html"))
  const files = {}
  for (const name of ["index.html", "app.js", "app.css"])
    files[name] = await readFile(join(out, name), "utf8")
  return files
}

/** The esbuild `define` that embeds `files` in a gateway bundle (src/admin/console.ts reads it). */
export const consoleDefine = (files) => ({ __TOLLGATE_CONSOLE__: JSON.stringify(files) })
