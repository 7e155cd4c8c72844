// Child processes of the bench: servers started with their output in a log file (so a chatty server never
// blocks on a full pipe and the log is there to read when it fails), and a registry that kills every
// child still running when the bench exits — normally, on a signal, or on an error (and, where `setpriv`
// exists, the kernel kills them when the bench itself is killed).
import { spawn } from "node:child_process"
import { accessSync, closeSync, constants, openSync, readFileSync, readSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { delimiter, join } from "node:path"

const running = new Set()

/** The absolute path of `name` on PATH, or undefined. */
export const which = (name) => {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

const setpriv = which("setpriv")

/**
 * `spawn(command, args)`, but where util-linux `setpriv` exists the child also gets SIGKILL when the
 * bench dies, even of a `kill -9` (PR_SET_PDEATHSIG; setpriv execs, so the pid is the command's own).
 */
const spawnChild = (command, args, options) =>
  setpriv === undefined
    ? spawn(command, args, options)
    : spawn(setpriv, ["--pdeathsig", "KILL", "--", command, ...args], options)

/** Kills every child still running (SIGKILL): for `process.on("exit")`, where nothing can wait. */
export const killAllNow = () => {
  for (const child of running) child.kill("SIGKILL")
  running.clear()
}

/** Stops one child: SIGTERM, then SIGKILL after `graceMs` (default 3000). Resolves when it has exited. */
export const stop = (child, graceMs = 3000) =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      running.delete(child)
      resolve()
      return
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    child.once("exit", () => {
      clearTimeout(timer)
      running.delete(child)
      resolve()
    })
    child.kill("SIGTERM")
  })

/** Stops every child still running, in parallel. */
export const stopAll = () => Promise.all([...running].map((child) => stop(child)))

const track = (child) => {
  running.add(child)
  child.once("exit", () => running.delete(child))
  return child
}

const lastLine = (file) =>
  logTail(file, 5)
    .split("\n")
    .filter((line) => line.trim() !== "")
    .at(-1) ?? ""

/** The last `lines` lines of a log file, for error messages. */
export const logTail = (file, lines = 20) => {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .slice(-lines - 1)
      .join("\n")
  } catch {
    return "(no log)"
  }
}

/**
 * Spawns `command ...args` (not a Node script) with stdout and stderr in `logFile`, stopped with the
 * bench like every other child. Returns the child at once; the caller checks when it is ready.
 */
export const spawnLogged = ({ command, args, logFile }) => {
  const fd = openSync(logFile, "a")
  const child = track(spawnChild(command, args, { stdio: ["ignore", fd, fd] }))
  closeSync(fd)
  return child
}

/**
 * The Node options in a script's `#!/usr/bin/env -S node OPTIONS` first line ([] for a plain
 * `#!/usr/bin/env node`). The bench starts servers as `node script`, which skips the shebang; passing these
 * keeps options that only work at process start (such as `--max-semi-space-size`) in what is measured.
 */
export const shebangNodeArgs = (script) => {
  try {
    const first = readFileSync(script, "utf8").slice(0, 500).split("\n")[0]
    const match = /^#!\S*env\s+-S\s+node\s+(.*)$/.exec(first)
    return match === null ? [] : match[1].trim().split(/\s+/).filter(Boolean)
  } catch {
    return []
  }
}

/**
 * Whether `path` is a native executable (an ELF or Mach-O file, such as `dist/tollgate` from
 * `npm run build:exe`) rather than a script to run with `node`.
 */
export const isNativeExecutable = (path) => {
  try {
    const fd = openSync(path, "r")
    const head = Buffer.alloc(4)
    readSync(fd, head, 0, 4, 0)
    closeSync(fd)
    const magic = head.readUInt32BE(0)
    return magic === 0x7f454c46 || magic === 0xcffaedfe || magic === 0xfeedfacf
  } catch {
    return false
  }
}

/**
 * Starts a server (`node ...nodeArgs script ...args`, or `script ...args` when `script` is a native executable,
 * which then carries its own Node options) with stdout and stderr in `logFile` and waits until the log
 * shows `listening on http://HOST:PORT`. Resolves `{ child, url, logFile }`; rejects with the log's tail
 * when the process exits first or `timeoutMs` (default 20000) passes. `pipeStdin` gives the child a stdin
 * pipe that closes when the bench dies (the bench's own servers exit on that).
 */
export const startServer = async ({
  name,
  script,
  args,
  nodeArgs = [],
  env,
  logFile,
  pipeStdin = false,
  timeoutMs = 20_000,
}) => {
  const fd = openSync(logFile, "a")
  const child = track(
    spawnChild(
      isNativeExecutable(script) ? script : process.execPath,
      isNativeExecutable(script) ? args : [...nodeArgs, script, ...args],
      {
        env: { ...process.env, ...env },
        stdio: [pipeStdin ? "pipe" : "ignore", fd, fd],
      },
    ),
  )
  closeSync(fd)
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const log = await readFile(logFile, "utf8").catch(() => "")
    const match = /listening on (http:\/\/[^\s]+)/.exec(log)
    if (match !== null) return { child, url: match[1].replace(/\/$/, ""), logFile }
    if (child.exitCode !== null || child.signalCode !== null) {
      const status = child.exitCode ?? child.signalCode
      throw new Error(
        `${name} exited (${status}) before listening: ${lastLine(logFile)}\n${logTail(logFile)}`,
      )
    }
    if (performance.now() > deadline) {
      await stop(child)
      throw new Error(`${name} did not print "listening on" within ${timeoutMs} ms\n${logTail(logFile)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** CPU time (user + system, all threads) a process has used so far, in ms; null where /proc is missing. */
export const cpuTimeMs = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // Fields 14 and 15 of proc(5) (utime, stime) in clock ticks; USER_HZ is 100 on Linux.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return null
  }
}

/**
 * Resident memory of a process from /proc/PID/status, in MB (MiB): `rss` (VmRSS, now) and `hwm` (VmHWM,
 * the most it has had since it started); null where /proc is missing or the process is gone.
 */
export const memoryMb = (pid) => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN)
    const rss = kb("VmRSS")
    const hwm = kb("VmHWM")
    return Number.isFinite(rss) ? { rss: rss / 1024, hwm: Number.isFinite(hwm) ? hwm / 1024 : null } : null
  } catch {
    return null
  }
}

/**
 * Runs one bench client process (`script` with `spec` as its JSON argument) that prints progress lines and
 * then its JSON result as the last line. `onStdout(text, out, child)` sees each piece of its output (and
 * all of it so far); the promise resolves the result merged with `extra()`, and rejects when the client
 * exits without one or takes longer than `timeoutMs` (`what` names it in the error).
 */
const runClient = ({ script, spec, what, timeoutMs, onStdout, extra }) =>
  new Promise((resolve, reject) => {
    const child = track(
      spawnChild(process.execPath, [script, JSON.stringify(spec)], { stdio: ["pipe", "pipe", "pipe"] }),
    )
    let out = ""
    let err = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`${what} did not finish within ${timeoutMs} ms`))
    }, timeoutMs)
    child.stdin.on("error", () => {})
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (text) => {
      out += text
      onStdout(text, out, child)
    })
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (text) => (err += text))
    child.once("exit", (code) => {
      clearTimeout(timer)
      const last = out.trim().split("\n").at(-1) ?? ""
      try {
        resolve({ ...JSON.parse(last), ...extra() })
      } catch {
        reject(new Error(`${what} exited (${code}) without a result:\n${err.slice(-2000)}`))
      }
    })
  })

/**
 * Runs one open-streams client (`bench/hold.mjs`) with `spec`. When it says all its streams are open
 * (`phase open N`), calls `onOpen(N)` (which samples what it wants; it may return a promise), then tells it
 * to close them. Resolves the client's JSON result plus `sample` (what `onOpen` returned); rejects when it
 * exits without one or takes longer than `timeoutMs`.
 */
export const runHold = ({ script, spec, onOpen, timeoutMs }) => {
  let sample = null
  let sampled = false
  return runClient({
    script,
    spec,
    what: "open-streams client",
    timeoutMs,
    onStdout: (_text, out, child) => {
      const match = sampled ? null : /phase open (\d+)\n/.exec(out)
      if (match === null) return
      sampled = true
      Promise.resolve()
        .then(() => onOpen(Number(match[1])))
        .then(
          (value) => (sample = value),
          () => {},
        )
        .finally(() => child.stdin.end("close\n"))
    },
    extra: () => ({ sample }),
  })
}

/**
 * Runs one load generator process (`bench/load.mjs`) with `spec`. Samples `cpuOf()` (CPU ms of the
 * server under test) and `extraCpuOf()` (optional: CPU ms of a helper it uses, such as Redis) at the
 * window edges the generator announces. Resolves the generator's JSON result plus `cpuMs` and
 * `extraCpuMs` (null without `extraCpuOf`); rejects when it exits without one or takes longer than
 * `timeoutMs`.
 */
export const runLoad = ({ script, spec, cpuOf, extraCpuOf = () => null, timeoutMs }) => {
  let cpuStart = null
  let cpuMs = null
  let extraStart = null
  let extraCpuMs = null
  return runClient({
    script,
    spec,
    what: "load generator",
    timeoutMs,
    onStdout: (text) => {
      if (text.includes("phase measure-start")) {
        cpuStart = cpuOf()
        extraStart = extraCpuOf()
      }
      if (text.includes("phase measure-end")) {
        const end = cpuOf()
        const extraEnd = extraCpuOf()
        cpuMs = end === null || cpuStart === null ? null : end - cpuStart
        extraCpuMs = extraEnd === null || extraStart === null ? null : extraEnd - extraStart
      }
    },
    extra: () => ({ cpuMs, extraCpuMs }),
  })
}
