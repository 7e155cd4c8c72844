/**
 * The key store of the memory store: `keys.file`, an append-only JSONL file
 * of events, replayed at start (ADR 0050). One process owns it.
 *
 *     {"event":"created","tenant":"acme","id":"ci-2","sha256":"…","created_at":"…","expires_at":null}
 *     {"event":"revoked","tenant":"acme","id":"ci-2","revoked_at":"…"}
 *     {"event":"used","tenant":"acme","id":"ci","last_used_at":"…"}
 *
 * Times are ISO 8601 (UTC). The file holds hashes, never a secret, and is
 * created with mode 0600. A create or a revoke is in the file (fsync'd)
 * before it is answered. Last-use times are kept in memory and appended every
 * {@link FILE_FLUSH_MS} and at shutdown, once the file exists (a gateway
 * that never made a runtime key writes no file). When superseded lines make
 * up most of the file, the start rewrites it (a temporary file renamed over
 * it).
 */
import { Clock, Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { writeAllSync } from "../ops/writeAll.js"
import {
  decodeKeyBudgets,
  encodeKeyBudgets,
  FILE_FLUSH_MS,
  KeyExists,
  KeyNotFound,
  KeyStoreUnavailable,
  type KeyStoreService,
  type NewKey,
  type RuntimeKey,
} from "./model.js"
import { KeyTable, LastUse, type UseTimes } from "./table.js"

export type KeyEvent =
  | { readonly event: "created"; readonly key: RuntimeKey }
  | { readonly event: "revoked"; readonly tenant: string; readonly id: string; readonly at: number }
  | { readonly event: "used"; readonly tenant: string; readonly id: string; readonly at: number }

const iso = (ms: number): string => new Date(ms).toISOString()

const time = (value: unknown): number | undefined => {
  if (typeof value !== "string") return undefined
  const ms = Date.parse(value)
  return Number.isNaN(ms) ? undefined : ms
}

const text = (value: unknown): value is string => typeof value === "string" && value.length > 0

/** One line of the file (with its newline). */
export const encodeEvent = (event: KeyEvent): string => {
  switch (event.event) {
    case "created": {
      const k = event.key
      return `${JSON.stringify({
        event: "created",
        tenant: k.tenant,
        id: k.id,
        sha256: k.sha256,
        created_at: iso(k.createdAt),
        expires_at: k.expiresAt === null ? null : iso(k.expiresAt),
        budgets: encodeKeyBudgets(k.budgets),
      })}\n`
    }
    case "revoked":
      return `${JSON.stringify({ event: "revoked", tenant: event.tenant, id: event.id, revoked_at: iso(event.at) })}\n`
    case "used":
      return `${JSON.stringify({ event: "used", tenant: event.tenant, id: event.id, last_used_at: iso(event.at) })}\n`
  }
}

/** A line of the file, or undefined when it is not a whole event (a torn line, a foreign one). */
export const decodeEvent = (line: string): KeyEvent | undefined => {
  let value: Record<string, unknown>
  try {
    const parsed: unknown = JSON.parse(line)
    if (typeof parsed !== "object" || parsed === null) return undefined
    value = parsed as Record<string, unknown>
  } catch {
    return undefined
  }
  const { tenant, id } = value
  if (!text(tenant) || !text(id)) return undefined
  switch (value.event) {
    case "created": {
      const createdAt = time(value.created_at)
      const expiresAt = value.expires_at === null ? null : time(value.expires_at)
      const sha256 = value.sha256
      if (createdAt === undefined || expiresAt === undefined) return undefined
      if (typeof sha256 !== "string" || !/^[0-9a-f]{64}$/.test(sha256)) return undefined
      const budgets = decodeKeyBudgets(value.budgets)
      if (budgets === null) return undefined
      return { event: "created", key: { tenant, id, sha256, createdAt, expiresAt, revokedAt: null, budgets } }
    }
    case "revoked": {
      const at = time(value.revoked_at)
      return at === undefined ? undefined : { event: "revoked", tenant, id, at }
    }
    case "used": {
      const at = time(value.last_used_at)
      return at === undefined ? undefined : { event: "used", tenant, id, at }
    }
    default:
      return undefined
  }
}

/** The state a file's events leave: the keys (first creation of an id wins; the first revocation counts). */
export const replay = (events: Iterable<KeyEvent>): { keys: Map<string, RuntimeKey>; used: UseTimes } => {
  const keys = new Map<string, RuntimeKey>()
  const used: UseTimes = new Map()
  const name = (tenant: string, id: string) => JSON.stringify([tenant, id])
  for (const e of events) {
    if (e.event === "created") {
      const k = name(e.key.tenant, e.key.id)
      if (!keys.has(k)) keys.set(k, e.key)
    } else if (e.event === "revoked") {
      const k = name(e.tenant, e.id)
      const key = keys.get(k)
      if (key !== undefined && key.revokedAt === null) keys.set(k, { ...key, revokedAt: e.at })
    } else {
      let ids = used.get(e.tenant)
      if (ids === undefined) used.set(e.tenant, (ids = new Map()))
      ids.set(e.id, Math.max(ids.get(e.id) ?? 0, e.at))
    }
  }
  return { keys, used }
}

/** The lines of a file holding `keys` and `used` and nothing superseded. */
const compacted = (keys: Iterable<RuntimeKey>, used: UseTimes): string => {
  let out = ""
  for (const key of keys) {
    out += encodeEvent({ event: "created", key: { ...key, revokedAt: null } })
    if (key.revokedAt !== null)
      out += encodeEvent({ event: "revoked", tenant: key.tenant, id: key.id, at: key.revokedAt })
  }
  for (const [tenant, ids] of used)
    for (const [id, at] of ids) out += encodeEvent({ event: "used", tenant, id, at })
  return out
}

const message = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/** Whether the file exists and its last byte is not a newline (a line torn by a crash). */
const endsTorn = (file: string): boolean => {
  let fd: number
  try {
    fd = fs.openSync(file, "r")
  } catch {
    return false
  }
  try {
    const size = fs.fstatSync(fd).size
    if (size === 0) return false
    const last = Buffer.alloc(1)
    fs.readSync(fd, last, 0, 1, size - 1)
    return last[0] !== 0x0a
  } finally {
    fs.closeSync(fd)
  }
}

/** Writes `data` to `file` opened with `flags` (`a` appends, `w` replaces), mode 0600, and fsyncs it. */
const writeSynced = (file: string, flags: "a" | "w", data: string): void => {
  const fd = fs.openSync(file, flags, 0o600)
  try {
    // The mode of `open` applies only to a new file: one that already existed (restored, touched) is made
    // 0600 as well.
    fs.fchmodSync(fd, 0o600)
    writeAllSync(fd, data)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** Appends `lines` to `file` (created 0600, parent folders too) and fsyncs it. */
const appendLines = (file: string, lines: string): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  writeSynced(file, "a", endsTorn(file) ? `\n${lines}` : lines)
}

/** Replaces `file` with `lines` through a temporary file (0600) renamed over it. */
const rewrite = (file: string, lines: string): void => {
  const temporary = `${file}.${process.pid}.tmp`
  writeSynced(temporary, "w", lines)
  fs.renameSync(temporary, file)
}

/** The file's lines, or none when it does not exist. */
const readLines = (file: string): Array<string> => {
  try {
    return fs.readFileSync(file, "utf8").split("\n")
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === "ENOENT") return []
    throw cause
  }
}

/** Rewrite at start when the file has more than this many lines and over 4 times what its state needs. */
const COMPACT_LINES = 1_000

/**
 * The file store at `file` (absolute path): replays it (an unreadable file
 * fails with `KeyStoreUnavailable`; lines that are not whole events are
 * skipped with a warning). Scoped: closing it appends the last-use times not
 * yet written.
 */
export const makeFileKeys = Effect.fnUntraced(function* (file: string) {
  const clock = yield* Clock.Clock
  const lines = yield* Effect.try({
    try: () => readLines(file),
    catch: (cause) => new KeyStoreUnavailable({ message: `keys file ${file}: ${message(cause)}` }),
  })
  const events: Array<KeyEvent> = []
  let skipped = 0
  for (const line of lines) {
    if (line.trim() === "") continue
    const event = decodeEvent(line)
    if (event === undefined) skipped++
    else events.push(event)
  }
  if (skipped > 0) {
    yield* Effect.logWarning("keys file: skipped lines that are not whole events").pipe(
      Effect.annotateLogs({ file, skipped }),
    )
  }
  const state = replay(events)
  const table = new KeyTable()
  table.replaceAll(state.keys.values())
  const lastUse = new LastUse()
  lastUse.addStored(state.used)
  let usedLines = 0
  for (const ids of state.used.values()) usedLines += ids.size
  const needed = state.keys.size * 2 + usedLines
  if (events.length > COMPACT_LINES && events.length > needed * 4) {
    yield* Effect.try({
      try: () => rewrite(file, compacted(state.keys.values(), state.used)),
      catch: (cause) => new KeyStoreUnavailable({ message: `keys file ${file}: ${message(cause)}` }),
    }).pipe(
      Effect.tap(() =>
        Effect.logInfo("keys file compacted").pipe(
          Effect.annotateLogs({ file, lines: events.length, kept: needed }),
        ),
      ),
      Effect.catch((error) =>
        Effect.logWarning("keys file not compacted").pipe(Effect.annotateLogs({ error: error.message })),
      ),
    )
  }
  if (lines.length > 0) {
    yield* Effect.logInfo("runtime keys restored from the keys file").pipe(
      Effect.annotateLogs({ file, keys: state.keys.size }),
    )
  }

  /** Appends `lines`; a failure is `KeyStoreUnavailable` naming `what`. Synchronous, so a check before it holds. */
  const append = (what: string, lines: string): KeyStoreUnavailable | undefined => {
    try {
      appendLines(file, lines)
      return undefined
    } catch (cause) {
      return new KeyStoreUnavailable({
        message: `the keys file could not be written (${what}): ${message(cause)}`,
      })
    }
  }

  /** Appends the last-use times noted since the last write, once the file exists. */
  const flush = Effect.suspend(() => {
    if (!lastUse.hasPending || !fs.existsSync(file)) return Effect.void
    const pending = lastUse.takePending()
    let out = ""
    for (const [tenant, ids] of pending)
      for (const [id, at] of ids) out += encodeEvent({ event: "used", tenant, id, at })
    const failed = append("last use", out)
    if (failed === undefined) return Effect.void
    lastUse.putBack(pending)
    return Effect.logWarning("last-use times not written").pipe(
      Effect.annotateLogs({ error: failed.message }),
    )
  })
  yield* Effect.addFinalizer(() => flush)
  yield* Effect.forkScoped(
    Effect.forever(Effect.andThen(Effect.sleep(Duration.millis(FILE_FLUSH_MS)), flush)),
  )

  // Each change is checked, written and applied in one synchronous step: two admin calls cannot interleave.
  const create = (key: NewKey) =>
    Effect.suspend((): Effect.Effect<RuntimeKey, KeyExists | KeyStoreUnavailable> => {
      if (table.get(key.tenant, key.id) !== undefined)
        return Effect.fail(new KeyExists({ tenant: key.tenant, id: key.id }))
      const created: RuntimeKey = { ...key, createdAt: clock.currentTimeMillisUnsafe(), revokedAt: null }
      const failed = append("create", encodeEvent({ event: "created", key: created }))
      if (failed !== undefined) return Effect.fail(failed)
      table.put(created)
      return Effect.succeed(created)
    })

  const revoke = (tenant: string, id: string) =>
    Effect.suspend((): Effect.Effect<RuntimeKey, KeyNotFound | KeyStoreUnavailable> => {
      const key = table.get(tenant, id)
      if (key === undefined) return Effect.fail(new KeyNotFound({ tenant, id }))
      if (key.revokedAt !== null) return Effect.succeed(key)
      const at = clock.currentTimeMillisUnsafe()
      const failed = append("revoke", encodeEvent({ event: "revoked", tenant, id, at }))
      if (failed !== undefined) return Effect.fail(failed)
      const revoked = { ...key, revokedAt: at }
      table.put(revoked)
      return Effect.succeed(revoked)
    })

  const service: KeyStoreService = {
    find: (sha256) => table.find(sha256, clock.currentTimeMillisUnsafe()),
    used: (tenant, id) => lastUse.note(tenant, id, clock.currentTimeMillisUnsafe()),
    create: Effect.fn("KeyStore.create")(create),
    revoke: Effect.fn("KeyStore.revoke")(revoke),
    list: (tenant) => Effect.sync(() => table.list(tenant)),
    lastUsed: (tenant, id) => lastUse.get(tenant, id),
  }
  return service
})
