import { spawn, type ChildProcess } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { stringify } from "yaml"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { tempDir } from "./tempDirs.js"

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

/** How to run a command: its environment (the whole of it) and working directory. */
export interface CommandOptions {
  readonly env: NodeJS.ProcessEnv
  readonly cwd?: string
}

/** Starts `command args` and waits for its `listening on URL` line. */
export const startCommand = (
  command: string,
  args: ReadonlyArray<string>,
  options: CommandOptions,
  timeoutMs = 15_000,
): Promise<Running> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      env: options.env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      stdio: ["ignore", "pipe", "pipe"],
    })
    let output = ""
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`no "listening on" line within ${timeoutMs} ms; output:\n${output}`))
    }, timeoutMs)
    let listening = false
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      // Once listening, only kept: a chatty process's output is not searched again at every chunk.
      if (listening) return
      const match = /listening on (http:\/\/\S+)/.exec(output)
      if (match !== null) {
        listening = true
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

/** Runs `command args` to completion. */
export const runCommand = (
  command: string,
  args: ReadonlyArray<string>,
  options: CommandOptions,
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((done) => {
    const child = spawn(command, args, {
      env: options.env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    child.on("exit", (code) => done({ code, stdout, stderr }))
  })

/** Starts a built binary with plain `node` and waits for its `listening on URL` line. */
export const startBinary = (
  binary: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<Running> =>
  startCommand(process.execPath, [binary, ...args], { env: { ...process.env, ...env } }, timeoutMs)

/** Runs a built binary to completion. */
export const runBinary = (
  binary: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  runCommand(process.execPath, [binary, ...args], { env: { ...process.env, ...env } })

/** The upstream key variable of `startGateway`'s config. */
export const GATEWAY_UPSTREAM_KEY_ENV = "TG_TEST_UPSTREAM_KEY"

/** The options of `writeGatewayConfig` and `startGateway`. */
export interface GatewayConfigOptions {
  readonly dir: string
  readonly upstreamUrl: string
  readonly keyHash: string
  readonly provider?: string
  readonly server?: Record<string, unknown>
  readonly tenant?: Record<string, unknown>
  /** More top-level sections (e.g. `telemetry`). */
  readonly sections?: Record<string, unknown>
}

/**
 * Writes `tollgate.yaml` and `pricing.yaml` into `dir` — one Anthropic
 * provider `provider` at `upstreamUrl` (its key in `GATEWAY_UPSTREAM_KEY_ENV`),
 * a route `claude` to its `claude-sonnet-5-5`, tenant `acme` with key id `ci`
 * — and returns the config's path. `server` and `tenant` add to those sections.
 */
export const writeGatewayConfig = (options: GatewayConfigOptions): string => {
  const provider = options.provider ?? "fake"
  writeFileSync(
    join(options.dir, "pricing.yaml"),
    stringify({
      prices: [{ model: "claude-sonnet-5-5", input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 }],
    }),
  )
  const config = join(options.dir, "tollgate.yaml")
  writeFileSync(
    config,
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
      ...options.sections,
    }),
  )
  return config
}

/** Writes the config of `writeGatewayConfig` and starts the built `tollgate serve` on it. */
export const startGateway = (
  options: GatewayConfigOptions & { readonly upstreamKey: string },
): Promise<Running> =>
  startBinary(TOLLGATE, ["serve", "--config", writeGatewayConfig(options)], {
    [GATEWAY_UPSTREAM_KEY_ENV]: options.upstreamKey,
  })

/**
 * A fresh folder (`tollgate-NAME-…` in the temp dir) and client key, the
 * built fake provider, and the built gateway in front of it (`startGateway`,
 * upstream key `sk-NAME`); both processes are added to `started`.
 */
export const startFakeAndGateway = async (
  name: string,
  started: Array<Running>,
  options: {
    readonly provider?: string
    readonly server?: Record<string, unknown>
    readonly sections?: Record<string, unknown>
  } = {},
) => {
  const dir = tempDir(`tollgate-${name}-`)
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
