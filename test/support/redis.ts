/**
 * A throwaway `redis-server` for tests: a free port, a fresh temp folder per start, no
 * persistence. It runs under a small `sh` guard that kills it when its stdin
 * closes, so it dies with the test process even when that process is killed.
 */
import { Effect, Exit, Scope } from "effect"
import type { Redis } from "ioredis"
import { spawn, type ChildProcess } from "node:child_process"
import { createConnection, createServer } from "node:net"
import { acquireRedis, type RedisClientOptions, type ScriptCommand } from "../../src/limits/redisClient.js"
import { tempDir } from "./tempDirs.js"

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

/**
 * Starts a redis-server (from PATH) on a free port and waits until it answers PING (≤ 10 s). `args`: more
 * command-line options (shell words; the cluster's).
 */
export const startRedis = async (args = "", port?: number): Promise<RedisHandle> => {
  port ??= await freePort()
  let child: ChildProcess | undefined
  let exited: Promise<void> = Promise.resolve()

  const start = async (): Promise<void> => {
    const dir = tempDir("tollgate-redis-")
    // The guard: redis in the background, `cat` holds our pipe; when the pipe closes, redis is killed
    // and its folder removed.
    const script =
      `redis-server --port ${port} --bind 127.0.0.1 --save '' --appendonly no --dir '${dir}' ${args} ` +
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

export interface RedisClusterHandle {
  /** `redis://127.0.0.1:PORT` of the first node: what `store.url` names with `store.cluster: true`. */
  readonly url: string
  readonly nodes: ReadonlyArray<RedisHandle>
  readonly stop: () => Promise<void>
}

const run = (
  command: string,
  args: ReadonlyArray<string>,
): Promise<{ code: number | null; output: string }> =>
  new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (c: Buffer) => (output += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (output += c.toString("utf8")))
    child.once("error", (error) => resolve({ code: -1, output: `${output}${error.message}` }))
    child.once("exit", (code) => resolve({ code, output }))
  })

/**
 * A real Redis Cluster: `count` masters (`redis-server --cluster-enabled yes`, each with its own bus port)
 * joined by `redis-cli --cluster create` (no replicas), ready when every node reports `cluster_state:ok`.
 */
export const startRedisCluster = async (count = 3): Promise<RedisClusterHandle> => {
  const nodes: Array<RedisHandle> = []
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()))
  }
  try {
    for (let i = 0; i < count; i++) {
      const busPort = await freePort()
      nodes.push(
        await startRedis(
          `--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 --cluster-port ${busPort}`,
        ),
      )
    }
    const created = await run("redis-cli", [
      "--cluster",
      "create",
      ...nodes.map((node) => `127.0.0.1:${node.port}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ])
    if (created.code !== 0) throw new Error(`redis-cli --cluster create failed:\n${created.output}`)
    for (let waited = 0; ; waited += 100) {
      const states = await Promise.all(
        nodes.map((node) => run("redis-cli", ["-p", String(node.port), "cluster", "info"])),
      )
      if (states.every((s) => s.output.includes("cluster_state:ok"))) break
      if (waited >= 20_000)
        throw new Error(`the cluster is not ok after 20 s:\n${states.map((s) => s.output).join("\n")}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  } catch (error) {
    await stop()
    throw error
  }
  return { url: `redis://127.0.0.1:${nodes[0]!.port}`, nodes, stop }
}

/**
 * A client as the gateway makes one (src/limits/redisClient.ts: fail fast, reconnect within 1 s; a cluster
 * client with `cluster`), with `scripts` defined; `close` quits it.
 */
export const scriptClient = async <C>(
  url: string,
  scripts: Readonly<Record<string, ScriptCommand>>,
  options: RedisClientOptions = {},
): Promise<{ readonly client: Redis & C; readonly close: () => Promise<void> }> => {
  const scope = Effect.runSync(Scope.make())
  const client = await Effect.runPromise(Scope.provide(acquireRedis<Redis & C>(url, scripts, options), scope))
  return { client, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** Runs `during` while `redis` is stopped, and starts it again (empty) whatever happens. */
export const whileStopped = async <A>(redis: RedisHandle, during: () => Promise<A>): Promise<A> => {
  await redis.stop()
  try {
    return await during()
  } finally {
    await redis.restart()
  }
}
