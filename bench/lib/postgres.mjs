// The PostgreSQL of the usage-database measurements (bench/usage-db.mjs, the tollgate_usage_db variant of
// bench/ab.mjs): Debian's package, initdb + postgres in a folder of `dir`, on a free port of 127.0.0.1,
// as the `postgres` user when run as root (PostgreSQL refuses root). Default settings but for a cache
// of a small production server; fsync stays on.
import { execFileSync, spawn } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"

const freePort = () =>
  new Promise((done) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address()
      s.close(() => done(port))
    })
  })

const binDir = () => {
  const base = "/usr/lib/postgresql"
  const v = existsSync(base) ? readdirSync(base).sort((a, b) => Number(b) - Number(a))[0] : undefined
  return v === undefined ? "" : join(base, v, "bin")
}
const bin = (name) => (binDir() === "" ? name : join(binDir(), name))
const asPostgres = (cmd, args) =>
  process.getuid?.() === 0
    ? ["setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", cmd, ...args]]
    : [cmd, args]

/** Starts PostgreSQL in `dir/pg`; resolves `{ url, psql(sql), stop() }` once it accepts connections. */
export const startPostgres = async (dir) => {
  const root = join(dir, "pg")
  mkdirSync(root, { recursive: true })
  const port = await freePort()
  const password = "bench"
  writeFileSync(join(root, "pw"), password)
  if (process.getuid?.() === 0) {
    // The postgres user must reach its folder through `dir` (a 0700 temp folder of root's).
    chmodSync(dir, 0o711)
    const uid = Number(execFileSync("id", ["-u", "postgres"]))
    const gid = Number(execFileSync("id", ["-g", "postgres"]))
    chownSync(root, uid, gid)
    chownSync(join(root, "pw"), uid, gid)
  }
  const data = join(root, "data")
  execFileSync(
    ...asPostgres(bin("initdb"), [
      "-D",
      data,
      "-U",
      "postgres",
      "--auth=scram-sha-256",
      `--pwfile=${join(root, "pw")}`,
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ]),
    { stdio: "ignore" },
  )
  const [command, args] = asPostgres(bin("postgres"), [
    "-D",
    data,
    "-p",
    String(port),
    "-k",
    root,
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "shared_buffers=1GB",
    "-c",
    "work_mem=64MB",
    "-c",
    "max_wal_size=8GB",
  ])
  const child = spawn(command, args, { stdio: "ignore" })
  for (;;) {
    try {
      execFileSync(bin("pg_isready"), ["-h", "127.0.0.1", "-p", String(port), "-q"])
      break
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const urlOf = (database) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`
  const psql = (sql, database = "postgres") =>
    execFileSync("psql", ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", urlOf(database), "-c", sql])
      .toString()
      .trim()
  return { url: urlOf("postgres"), urlOf, psql, child, stop: () => child.kill("SIGINT") }
}
