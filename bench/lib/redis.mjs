// The Redis server of the `tollgate+limits(redis)` row: the bench starts its own, empty and without
// persistence, on a free port of 127.0.0.1, and stops it with every other child (see `spawnLogged`).
import { createConnection, createServer } from "node:net"
import { logTail, spawnLogged, stop } from "./procs.mjs"

/** A TCP port on 127.0.0.1 that was free a moment ago. */
const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

/**
 * Sends one inline command (`PING`, `DBSIZE`) to the Redis at `port`; resolves its first reply line
 * (`+PONG`, `:42`); rejects on a connection error or after `timeoutMs` (default 1000).
 */
export const redisCommand = (port, command, timeoutMs = 1_000) =>
  new Promise((resolve, reject) => {
    const socket = createConnection({ host: "127.0.0.1", port })
    let reply = ""
    const done = (error, value) => {
      clearTimeout(timer)
      socket.destroy()
      if (error !== undefined) reject(error)
      else resolve(value)
    }
    const timer = setTimeout(
      () => done(new Error(`redis ${command}: no reply in ${timeoutMs} ms`)),
      timeoutMs,
    )
    socket.setEncoding("utf8")
    socket.once("error", (error) => done(error))
    socket.on("data", (text) => {
      reply += text
      const end = reply.indexOf("\r\n")
      if (end !== -1) done(undefined, reply.slice(0, end))
    })
    socket.once("connect", () => socket.write(`${command}\r\n`))
  })

/**
 * Starts `redis-server` (`bin`) in `dir` on a free port (three tries, in case another process takes the
 * port first), or on `port` when given (one try: the soak's restart on the same port), and waits until it
 * answers PING. Resolves `{ child, pid, port, url }` (`url` with db 0); rejects with the log's tail.
 */
export const startRedis = async ({ bin, dir, logFile, port: fixedPort, timeoutMs = 10_000 }) => {
  let lastError
  for (let attempt = 0; attempt < (fixedPort === undefined ? 3 : 1); attempt++) {
    const port = fixedPort ?? (await freePort())
    const args = [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      "--daemonize",
      "no",
      "--logfile",
      "",
    ]
    const child = spawnLogged({ command: bin, args, logFile })
    const deadline = performance.now() + timeoutMs
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        lastError = new Error(
          `redis-server exited (${child.exitCode ?? child.signalCode})\n${logTail(logFile)}`,
        )
        break
      }
      const pong = await redisCommand(port, "PING", 200).catch(() => undefined)
      if (pong === "+PONG") return { child, pid: child.pid, port, url: `redis://127.0.0.1:${port}/0` }
      if (performance.now() > deadline) {
        await stop(child)
        throw new Error(`redis-server did not answer PING within ${timeoutMs} ms\n${logTail(logFile)}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  throw lastError
}
