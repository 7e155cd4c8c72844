/**
 * A throwaway `redis-server` for tests: a free port, a fresh temp folder per start, no
 * persistence. It runs under a small `sh` guard that kills it when its stdin
 * closes, so it dies with the test process even when that process is killed.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { createConnection, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface RedisHandle {
  /** `redis://127.0.0.1:PORT/0`. */
  readonly url: string
  readonly port: number
  /** Kills the server (SIGKILL) and waits until it is gone. Idempotent. */
  readonly stop: () => Promise<void>
  /** Starts the server again on the same port (empty: nothing is persisted) and waits for PING. */
  readonly restart: () => Promise<void>
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

/** Resolves true when the server at `port` answers PING with PONG. */
const ping = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port })
    let reply = ""
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once("error", () => done(false))
    socket.once("connect", () => socket.write("PING\r\n"))
    socket.on("data", (chunk: Buffer) => {
      reply += chunk.toString("utf8")
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"))
    })
  })

const live = new Set<ChildProcess>()
process.once("exit", () => {
  // Closing the guards' stdin makes each kill its redis-server (the pipe also closes if we are killed).
  for (const child of live) child.stdin?.destroy()
})

/** Starts a redis-server (from PATH) on a free port and waits until it answers PING (≤ 10 s). */
export const startRedis = async (): Promise<RedisHandle> => {
  const port = await freePort()
  let child: ChildProcess | undefined
  let exited: Promise<void> = Promise.resolve()

  const start = async (): Promise<void> => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-redis-"))
    // The guard: redis in the background, `cat` holds our pipe; when the pipe closes, redis is killed
    // and its folder removed.
    const script =
      `redis-server --port ${port} --bind 127.0.0.1 --save '' --appendonly no --dir '${dir}' ` +
      `--daemonize no --loglevel warning & pid=$!; cat >/dev/null; kill -9 $pid 2>/dev/null; wait $pid; ` +
      `rm -rf '${dir}'`
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
    for (let waited = 0; waited < 10_000; waited += 50) {
      if (gone) throw new Error(`redis-server exited at start:\n${output}`)
      if (await ping(port)) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await stop()
    throw new Error(`redis-server did not answer PING within 10 s:\n${output}`)
  }

  const stop = async (): Promise<void> => {
    const current = child
    child = undefined
    if (current === undefined) return
    current.stdin!.end()
    await exited
  }

  await start()
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    stop: async () => {
      await stop()
    },
    restart: async () => {
      await stop()
      await start()
    },
  }
}
