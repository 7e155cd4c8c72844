import { execFile } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { startFakeProvider } from "../../fakeprovider/server.js"
import { tempDir } from "../support/tempDirs.js"

const run = promisify(execFile)
const REPO = resolve(import.meta.dirname, "../..")
/** The project's Node 24 (the npm scripts run on it). */
const NODE = process.execPath
const TSC = join(REPO, "node_modules/typescript/bin/tsc")

/** The code block under "A complete example" in docs/library.md: the test runs what the doc shows. */
const docExample = (): string => {
  const doc = readFileSync(join(REPO, "docs/library.md"), "utf8")
  const section = doc.slice(doc.indexOf("## A complete example"))
  const block = /```ts\n([\s\S]*?)```/.exec(section)
  if (block === null) throw new Error("docs/library.md has no ts block under ## A complete example")
  return block[1]!
}

/** Type checks the published declarations must pass (`@ts-expect-error` fails the check when types are lost). */
const CHECKS = `import { Effect } from "effect"
import { ProviderClient, ProviderError, type ProviderErrorReason, type Usage } from "tollgate/providers"

export const checks = Effect.gen(function* () {
  const client = yield* ProviderClient
  const response = yield* client.send({ endpoint: "/v1/chat/completions", body: new Uint8Array(), model: "m" })
  const status: number = response.status
  const usage: Usage = yield* response.usage
  // @ts-expect-error: not an endpoint
  yield* client.send({ endpoint: "/v2/nothing", body: {} })
  return [status, usage.estimated] as const
})

// @ts-expect-error: an API key is Redacted, not a string
ProviderClient.layer({ kind: "openai", apiKey: "sk-plain" })
// @ts-expect-error: vertex needs a region
ProviderClient.layer({ kind: "vertex", project: "p" })

export const reason = (error: ProviderError): ProviderErrorReason => error.reason
export const missing: ProviderErrorReason = "MissingCredentials"
`

const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    // effect's declarations name a few Web types.
    lib: ["ES2022", "DOM"],
    types: ["node"],
    typeRoots: [join(REPO, "node_modules/@types")],
    strict: true,
    exactOptionalPropertyTypes: true,
    noEmit: true,
    // Check the installed declarations too, not only their use.
    skipLibCheck: false,
  },
  files: ["main.ts", "checks.ts"],
}

describe("the packed library (npm pack → npm install → the docs' example)", () => {
  const dir = tempDir("tollgate-pack-")
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("installs from the tarball, runs the docs/library.md example on Node 24 against a fake provider, and type-checks", async () => {
    const started = performance.now()
    // `prepack` builds everything; here only the library is built (the executables may be in use by other
    // test files running at the same time), and the pack skips the scripts.
    await run(NODE, ["scripts/build.mjs", "--library"], { cwd: REPO })
    const packed = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
      cwd: REPO,
    })
    const [{ filename }] = JSON.parse(packed.stdout) as Array<{ filename: string }>
    const app = join(dir, "app")
    mkdirSync(app)
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }))
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", join(dir, filename!)], {
      cwd: app,
    })
    // `effect` is a peer: one copy, the app's, however far the registry's 4.1.x has moved past ours.
    expect(existsSync(join(app, "node_modules/effect/package.json"))).toBe(true)
    expect(existsSync(join(app, "node_modules/tollgate/node_modules/effect"))).toBe(false)
    writeFileSync(join(app, "main.ts"), docExample())

    const fake = await startFakeProvider()
    try {
      const { stdout } = await run(NODE, ["main.ts"], {
        cwd: app,
        env: { ...process.env, ANTHROPIC_API_KEY: "sk-pack-test", ANTHROPIC_BASE_URL: fake.url },
      })
      // The fake answers 16 tokens `tok0 ` … `tok15 `; "Hello!" is 2 input tokens to it.
      const text = Array.from({ length: 16 }, (_, i) => `tok${i} `).join("")
      expect(stdout).toBe(`${text}\n2 input and 16 output tokens\n`)
      const request = fake.requests().recent.at(-1)!
      expect(request.headers["x-api-key"]).toBe("sk-pack-test")
      expect(request.aborted).toBe(false)
    } finally {
      await fake.close()
    }

    writeFileSync(join(app, "checks.ts"), CHECKS)
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify(TSCONFIG))
    const checked = await run(NODE, [TSC, "-p", "tsconfig.json"], { cwd: app }).catch(
      (error: { stdout?: string }) => ({ stdout: `tsc failed:\n${error.stdout ?? String(error)}` }),
    )
    expect(checked.stdout).toBe("")
    console.log(`pack test: ${Math.round(performance.now() - started)} ms`)
  }, 180_000)
})
