import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { stringify } from "yaml"
import { generateKey, hashKey } from "../../src/keys/keys.js"

export const ROOT = resolve(import.meta.dirname, "../..")
export const TOLLGATE = resolve(ROOT, "bin/tollgate")
export const FAKEPROVIDER = resolve(ROOT, "bin/fakeprovider")

export interface Running {
  readonly child: ChildProcess
  readonly url: string
  /** Everything the process printed so far (stdout and stderr). */
  readonly output: () => string
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

/** Starts a built binary with plain `node` and waits for its `listening on URL` line. */
export const startBinary = (
  binary: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<Running> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [binary, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let output = ""
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`no "listening on" line within ${timeoutMs} ms; output:\n${output}`))
    }, timeoutMs)
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = /listening on (http:\/\/\S+)/.exec(output)
      if (match !== null && timer !== undefined) {
        clearTimeout(timer)
        resolvePromise({
          child,
          url: match[1]!,
          output: () => output,
          exited,
          stop: (signal = "SIGTERM") => {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal)
            return exited
          },
        })
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`exited with ${code} before listening; output:\n${output}`))
    })
  })

/** Runs a built binary to completion. */
export const runBinary = (
  binary: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((done) => {
    const child = spawn(process.execPath, [binary, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    child.on("exit", (code) => done({ code, stdout, stderr }))
  })

/** The upstream key variable of `startGateway`'s config. */
export const GATEWAY_UPSTREAM_KEY_ENV = "TG_TEST_UPSTREAM_KEY"

/**
 * Writes `tollgate.yaml` and `pricing.yaml` into `dir` — one Anthropic
 * provider `provider` at `upstreamUrl`, a route `claude` to its
 * `claude-sonnet-5-5`, tenant `acme` with key id `ci` — and starts the built
 * `tollgate serve` on it. `server` and `tenant` add to those sections.
 */
export const startGateway = (options: {
  readonly dir: string
  readonly upstreamUrl: string
  readonly keyHash: string
  readonly upstreamKey: string
  readonly provider?: string
  readonly server?: Record<string, unknown>
  readonly tenant?: Record<string, unknown>
}): Promise<Running> => {
  const provider = options.provider ?? "fake"
  writeFileSync(
    join(options.dir, "pricing.yaml"),
    stringify({
      prices: [{ model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 }],
    }),
  )
  writeFileSync(
    join(options.dir, "tollgate.yaml"),
    stringify({
      server: { listen: "127.0.0.1:0", ...options.server },
      usage: { file: "usage.jsonl" },
      pricing: { file: "pricing.yaml" },
      providers: {
        [provider]: {
          kind: "anthropic",
          base_url: options.upstreamUrl,
          api_key_env: GATEWAY_UPSTREAM_KEY_ENV,
        },
      },
      routes: { claude: { api: "anthropic", targets: [{ provider, model: "claude-sonnet-5-5" }] } },
      tenants: { acme: { keys: [{ id: "ci", sha256: options.keyHash }], routes: "*", ...options.tenant } },
    }),
  )
  return startBinary(TOLLGATE, ["serve", "--config", join(options.dir, "tollgate.yaml")], {
    [GATEWAY_UPSTREAM_KEY_ENV]: options.upstreamKey,
  })
}

/**
 * A fresh folder (`tollgate-NAME-…` in the temp dir) and client key, the
 * built fake provider, and the built gateway in front of it (`startGateway`,
 * upstream key `sk-NAME`); both processes are added to `started`.
 */
export const startFakeAndGateway = async (
  name: string,
  started: Array<Running>,
  options: { readonly provider?: string; readonly server?: Record<string, unknown> } = {},
) => {
  const dir = mkdtempSync(join(tmpdir(), `tollgate-${name}-`))
  const key = generateKey()
  const fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
  started.push(fake)
  const gateway = await startGateway({
    dir,
    upstreamUrl: fake.url,
    keyHash: hashKey(key),
    upstreamKey: `sk-${name}`,
    ...options,
  })
  started.push(gateway)
  return { dir, key, fake, gateway }
}
