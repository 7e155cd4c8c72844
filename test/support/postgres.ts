/**
 * A throwaway PostgreSQL for tests (Debian's `postgresql` package): `initdb` in a fresh temp folder, the
 * server on a free port of 127.0.0.1, password authentication (scram-sha-256) for the `postgres` user, and
 * no fsync. PostgreSQL refuses to run as root, so as root the folder is given to the `postgres` user the
 * package creates and the server runs as that user (`setpriv`). The server runs under a small `sh` guard
 * that kills it when its stdin closes, so it dies with the test process even when that is killed.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { chmodSync, chownSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { tempDir } from "./tempDirs.js"

export interface PostgresHandle {
  /** `postgres://postgres:PASSWORD@127.0.0.1:PORT/postgres`. */
  readonly url: string
  readonly port: number
  readonly password: string
  /** The URL of another database on this server (made with {@link PostgresHandle.createDatabase}). */
  readonly urlOf: (database: string, password?: string) => string
  /** Runs SQL through `psql` (as the superuser) and returns its unaligned, tuples-only output. */
  readonly psql: (sql: string, database?: string) => string
  /** `CREATE DATABASE name`; returns its URL. */
  readonly createDatabase: (name: string) => string
  /** Stops the server: `fast` (SIGINT, a clean shutdown) or `kill` (SIGKILL of the postmaster, then recovery at the next start). */
  readonly stop: (how?: "fast" | "kill") => Promise<void>
  /** Starts it again on the same port and data folder; waits until it accepts connections. */
  readonly start: () => Promise<void>
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** The folder of PostgreSQL's server programs: Debian keeps them in /usr/lib/postgresql/VERSION/bin. */
const binDir = (): string => {
  const root = "/usr/lib/postgresql"
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a))
    if (versions.length > 0) return join(root, versions[0]!, "bin")
  }
  return "" // from PATH
}

const isRoot = typeof process.getuid === "function" && process.getuid() === 0

/** `command args…` as the `postgres` user when we are root (PostgreSQL refuses root), else as ourselves. */
const asPostgres = (command: string, args: ReadonlyArray<string>): [string, Array<string>] =>
  isRoot
    ? ["setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", command, ...args]]
    : [command, [...args]]

const program = (name: string): string => {
  const dir = binDir()
  return dir === "" ? name : join(dir, name)
}

const live = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of live) child.stdin?.destroy()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Starts a fresh PostgreSQL and waits until it accepts connections (≤ 30 s). */
export const startPostgres = async (): Promise<PostgresHandle> => {
  const port = await freePort()
  const root = tempDir("tollgate-pg-")
  const data = join(root, "data")
  const password = `pw${Math.random().toString(36).slice(2, 12)}`
  const pwfile = join(root, "pwfile")
  writeFileSync(pwfile, `${password}\n`)
  if (isRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim())
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim())
    chownSync(root, uid, gid)
    chownSync(pwfile, uid, gid)
  }
  chmodSync(root, 0o700)
  const [initdb, initArgs] = asPostgres(program("initdb"), [
    "-D",
    data,
    "-U",
    "postgres",
    "--auth=scram-sha-256",
    `--pwfile=${pwfile}`,
    "-E",
    "UTF8",
    "--locale=C",
    "--no-sync",
  ])
  try {
    execFileSync(initdb, initArgs, { stdio: "pipe" })
  } catch (error) {
    const e = error as { stderr?: Buffer; message: string }
    throw new Error(`initdb failed: ${e.stderr?.toString() ?? e.message}`)
  }

  let child: ChildProcess | undefined
  let exited: Promise<void> = Promise.resolve()

  const start = async (): Promise<void> => {
    const [command, args] = asPostgres(program("postgres"), [
      "-D",
      data,
      "-p",
      String(port),
      "-k",
      root,
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "fsync=off",
      "-c",
      // The server's default; the gateway's sessions ask for synchronous commits whatever it is (ADR 0069).
      "synchronous_commit=off",
      "-c",
      "max_connections=200",
    ])
    const quoted = [command, ...args].map((a) => `'${a}'`).join(" ")
    // The guard: postgres in the background, `cat` holds our pipe; when the pipe closes, postgres stops.
    const script = `${quoted} & pid=$!; echo $pid; cat >/dev/null; kill -9 $pid 2>/dev/null; wait $pid`
    const spawned = spawn("sh", ["-c", script], { stdio: ["pipe", "pipe", "pipe"] })
    child = spawned
    live.add(spawned)
    let output = ""
    spawned.stdout!.on("data", (c: Buffer) => (output += c.toString("utf8")))
    spawned.stderr!.on("data", (c: Buffer) => (output += c.toString("utf8")))
    let gone = false
    exited = new Promise((resolve) =>
      spawned.once("exit", () => {
        gone = true
        live.delete(spawned)
        resolve()
      }),
    )
    const [isready, readyArgs] = [program("pg_isready"), ["-h", "127.0.0.1", "-p", String(port), "-q"]]
    for (let waited = 0; waited < 30_000; waited += 100) {
      if (gone) throw new Error(`postgres exited at start:\n${output}`)
      try {
        execFileSync(isready, readyArgs, { stdio: "ignore" })
        return
      } catch {
        await sleep(100)
      }
    }
    await stop("kill")
    throw new Error(`postgres did not accept connections within 30 s:\n${output}`)
  }

  /** The postmaster's pid, from its pid file (the guard's `$pid` is setpriv's, which exec'd it). */
  const postmasterPid = (): number | undefined => {
    try {
      return Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0])
    } catch {
      return undefined
    }
  }

  const stop = async (how: "fast" | "kill" = "fast"): Promise<void> => {
    const current = child
    child = undefined
    if (current === undefined) return
    const pid = postmasterPid()
    if (pid !== undefined) {
      try {
        process.kill(pid, how === "kill" ? "SIGKILL" : "SIGINT")
      } catch {
        // already gone
      }
    }
    // Wait for the postmaster to go (its backends follow it), then release the guard.
    for (let waited = 0; waited < 30_000 && pid !== undefined; waited += 50) {
      try {
        process.kill(pid, 0)
      } catch {
        break
      }
      await sleep(50)
    }
    current.stdin!.end()
    await exited
    if (how === "kill") {
      // Backends of a killed postmaster exit on their own within a moment; a new postmaster waits for them.
      await sleep(200)
    }
  }

  const urlOf = (database: string, pw = password) =>
    `postgres://postgres:${encodeURIComponent(pw)}@127.0.0.1:${port}/${database}`

  const psql = (sql: string, database = "postgres"): string =>
    execFileSync("psql", ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", urlOf(database), "-c", sql], {
      stdio: ["ignore", "pipe", "pipe"],
      // A fleet's table as JSON is tens of MB.
      maxBuffer: 512 * 1024 * 1024,
    })
      .toString()
      .trim()

  await start()
  return {
    url: urlOf("postgres"),
    port,
    password,
    urlOf,
    psql,
    createDatabase: (name) => {
      psql(`CREATE DATABASE "${name}"`)
      return urlOf(name)
    },
    stop,
    start,
  }
}
