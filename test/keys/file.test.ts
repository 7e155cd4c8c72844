import { appendFileSync, readFileSync, statSync } from "node:fs"
import { afterEach, describe, expect, it } from "vitest"
import { decodeEvent } from "../../src/keys/fileKeys.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminConfig } from "../admin/fixtures.js"
import { startHarness, type Harness } from "../support/harness.js"
import { createKey, listKeys, revokeKey, sdkStatus, status } from "./helpers.js"
import { tempDir } from "../support/tempDirs.js"

/** Runtime keys with the memory store: `keys.file`, appended and replayed at start (ADR 0050). */

const open: Array<Harness> = []
afterEach(async () => {
  for (const h of open.splice(0)) await h.close()
})

const configWith = (tenants: ReadonlyArray<string>) =>
  adminConfig((keyHash) =>
    Object.fromEntries(
      tenants.map((name, i) => [name, { keys: i === 0 ? [{ id: "ci", sha256: keyHash }] : [], routes: "*" }]),
    ),
  )

const start = async (dir: string, key: string, tenants: ReadonlyArray<string> = ["acme", "beta"]) => {
  const h = await startHarness({ dir, key, env: { [ADMIN_ENV]: ADMIN_TOKEN }, config: configWith(tenants) })
  open.push(h)
  return h
}

const stop = async (h: Harness) => {
  open.splice(open.indexOf(h), 1)
  await h.close()
}

type View = { id: string; tenant: string; revoked_at: string | null; last_used_at: string | null }
const find = (keys: ReadonlyArray<View>, id: string) => keys.find((k) => k.id === id)

describe("keys.file", () => {
  it("a key made before a restart still works after it, a revoked one stays revoked, last use is kept", async () => {
    const dir = tempDir("tollgate-keys-")
    const configKey = generateKey()
    const first = await start(dir, configKey)
    const kept = (await createKey(first.url, { tenant: "acme", id: "kept" })).body
    const dropped = (await createKey(first.url, { tenant: "beta", id: "dropped" })).body
    expect(await sdkStatus(first.url, kept.secret)).toBe(200)
    expect(await sdkStatus(first.url, dropped.secret)).toBe(200)
    const revoked = (await revokeKey(first.url, "beta", "dropped")).body
    const before: Array<View> = (await listKeys(first.url)).body.keys
    expect(find(before, "kept")?.last_used_at).not.toBeNull()
    await stop(first)

    const second = await start(dir, configKey)
    expect(await sdkStatus(second.url, kept.secret)).toBe(200)
    expect(await sdkStatus(second.url, dropped.secret)).toBe(401)
    const after: Array<View> = (await listKeys(second.url)).body.keys
    expect(find(after, "dropped")?.revoked_at).toBe(revoked.revoked_at)
    // Last use was written at shutdown; "kept" was used again since, "dropped" was not.
    expect(find(after, "dropped")?.last_used_at).toBe(find(before, "dropped")?.last_used_at)
    expect(Date.parse(find(after, "kept")!.last_used_at!)).toBeGreaterThanOrEqual(
      Date.parse(find(before, "kept")!.last_used_at!),
    )
    expect((await createKey(second.url, { tenant: "acme", id: "kept" })).status).toBe(409)

    const file = readFileSync(second.config.keysFile, "utf8")
    for (const secret of [kept.secret, dropped.secret, configKey]) expect(file).not.toContain(secret)
    expect(statSync(second.config.keysFile).mode & 0o777).toBe(0o600)
    expect(
      file
        .split("\n")
        .filter((line) => line !== "")
        .every((line) => decodeEvent(line) !== undefined),
    ).toBe(true)
  })

  it("a runtime key of a tenant gone from the config gets 401, and is still listed", async () => {
    const dir = tempDir("tollgate-keys-")
    const configKey = generateKey()
    const first = await start(dir, configKey)
    const beta = (await createKey(first.url, { tenant: "beta", id: "b1" })).body
    expect(await status(first.url, beta.secret)).toBe(200)
    await stop(first)

    const second = await start(dir, configKey, ["acme"])
    expect(await status(second.url, beta.secret)).toBe(401)
    const listed: Array<View> = (await listKeys(second.url)).body.keys
    expect(find(listed, "b1")).toMatchObject({ tenant: "beta", revoked_at: null })
    expect((await listKeys(second.url, "beta")).status).toBe(200)
    expect((await createKey(second.url, { tenant: "beta", id: "b2" })).status).toBe(404)
  })

  it("skips a torn or foreign line at start and appends after it on a line of its own", async () => {
    const dir = tempDir("tollgate-keys-")
    const configKey = generateKey()
    const first = await start(dir, configKey)
    const kept = (await createKey(first.url, { tenant: "acme", id: "kept" })).body
    const file = first.config.keysFile
    await stop(first)
    appendFileSync(file, 'not json\n{"event":"created","tenant":"acme","id":"torn","sha256":"ab')

    const second = await start(dir, configKey)
    expect(await status(second.url, kept.secret)).toBe(200)
    const next = (await createKey(second.url, { tenant: "acme", id: "next" })).body
    expect(await status(second.url, next.secret)).toBe(200)
    const lines = readFileSync(file, "utf8").split("\n")
    expect(lines.filter((line) => decodeEvent(line)?.event === "created")).toHaveLength(2)
    expect(lines.some((line) => line.includes(hashKey(next.secret)) && decodeEvent(line) !== undefined)).toBe(
      true,
    )
  })
})
