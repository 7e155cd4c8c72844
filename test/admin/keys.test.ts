import { readFileSync, statSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { hashKey, keyPattern } from "../../src/keys/keys.js"
import { admin, createKey, listKeys, measureUntil, revokeKey, sdkStatus, status } from "../keys/helpers.js"
import { harnessForSuite, startHarness } from "../support/harness.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminConfig } from "./fixtures.js"

/** The key endpoints of the admin API on the memory store (SPEC "Keys at runtime, reload", ADR 0050). */

const config = adminConfig((keyHash) => ({
  acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" },
  beta: { keys: [], routes: ["claude"] },
}))

const h = harnessForSuite({ env: { [ADMIN_ENV]: ADMIN_TOKEN }, config })

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe("POST /admin/keys", () => {
  it("answers 201 with the secret once, its sha256 and times; the key works at once with the Anthropic SDK", async () => {
    const created = await createKey(h.url, { tenant: "acme", id: "laptop" })
    expect(created.status).toBe(201)
    const body = created.body
    expect(Object.keys(body).sort()).toEqual([
      "budgets",
      "created_at",
      "expires_at",
      "id",
      "secret",
      "sha256",
      "tenant",
    ])
    expect(body).toMatchObject({
      id: "laptop",
      tenant: "acme",
      expires_at: null,
      budgets: { day: null, week: null, month: null },
    })
    expect(body.secret).toMatch(keyPattern)
    expect(body.sha256).toBe(hashKey(body.secret))
    expect(body.created_at).toMatch(ISO)
    expect(await sdkStatus(h.url, body.secret)).toBe(200)
    // The usage record names the runtime key.
    expect(h.records().at(-1)).toMatchObject({ tenant: "acme", key_id: "laptop", status: 200 })
    const models = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${body.secret}` } })
    expect(models.status).toBe(200)
  })

  it("keeps an expires_at in the future, as UTC ISO 8601", async () => {
    const at = new Date(Date.now() + 3_600_000)
    const created = await createKey(h.url, {
      tenant: "beta",
      id: "temp",
      expires_at: at.toISOString().replace("Z", "+00:00"),
    })
    expect(created.status).toBe(201)
    expect(created.body.expires_at).toBe(at.toISOString())
    expect(await status(h.url, created.body.secret)).toBe(200)
  })

  it("answers 409 for an id the tenant has in the config or at run time; the same id under another tenant is fine", async () => {
    const config = await createKey(h.url, { tenant: "acme", id: "ci" })
    expect(config.status).toBe(409)
    expect(config.body).toMatchObject({ error: { type: "conflict_error" } })
    expect((await createKey(h.url, { tenant: "acme", id: "twice" })).status).toBe(201)
    const again = await createKey(h.url, { tenant: "acme", id: "twice" })
    expect(again.status).toBe(409)
    expect(again.body.error.message).toContain("twice")
    expect((await createKey(h.url, { tenant: "beta", id: "twice" })).status).toBe(201)
  })

  it("answers 404 for a tenant that is not in the config", async () => {
    const answer = await createKey(h.url, { tenant: "nobody", id: "x" })
    expect(answer.status).toBe(404)
    expect(answer.body).toMatchObject({ error: { type: "not_found_error" } })
  })

  it("answers 400 naming the field for a bad body", async () => {
    const cases: Array<[unknown, string | undefined]> = [
      ["{not json", undefined],
      [[1, 2], undefined],
      [{ id: "x" }, "tenant"],
      [{ tenant: 7, id: "x" }, "tenant"],
      [{ tenant: "acme" }, "id"],
      [{ tenant: "acme", id: "" }, "id"],
      [{ tenant: "acme", id: " padded" }, "id"],
      [{ tenant: "acme", id: "x".repeat(129) }, "id"],
      [{ tenant: "acme", id: "x", expires_at: "tomorrow" }, "expires_at"],
      [{ tenant: "acme", id: "x", expires_at: 1893456000000 }, "expires_at"],
      [{ tenant: "acme", id: "x", expires_at: "2020-01-01T00:00:00Z" }, "expires_at"],
      [{ tenant: "acme", id: "x", scope: "all" }, "scope"],
      [{ tenant: "acme", id: "x", budgets: [] }, "budgets"],
      [{ tenant: "acme", id: "x", budgets: { session: { limit_usd: 1, mode: "hard" } } }, "budgets"],
      [{ tenant: "acme", id: "x", budgets: { day: { limit_usd: -1, mode: "hard" } } }, "budgets"],
      [{ tenant: "acme", id: "x", budgets: { day: { limit_usd: 1 } } }, "budgets"],
    ]
    for (const [body, param] of cases) {
      const answer = await createKey(h.url, body)
      expect(answer.status, JSON.stringify(body)).toBe(400)
      expect(answer.body.error.type).toBe("invalid_request_error")
      if (param !== undefined) expect(answer.body.error.param, JSON.stringify(body)).toBe(param)
    }
    const huge = await createKey(h.url, { tenant: "acme", id: "x", pad: "p".repeat(100_000) })
    expect(huge.status).toBe(400)
  })
})

describe("POST /admin/keys with budgets", () => {
  it("a runtime key's hard day budget refuses with 402 naming it; the list shows it in micro-USD", async () => {
    const created = await createKey(h.url, {
      tenant: "acme",
      id: "capped",
      budgets: { day: { limit_usd: 0.0001, mode: "hard" }, month: { limit_usd: 2.5, mode: "soft" } },
    })
    expect(created.status).toBe(201)
    expect(created.body.budgets).toEqual({
      day: { limit_micro_usd: 100, limit_usd: 0.0001, mode: "hard" },
      week: null,
      month: { limit_micro_usd: 2_500_000, limit_usd: 2.5, mode: "soft" },
    })
    // One request fits the day's 100 micro-USD; the next is refused by the key's day budget.
    expect(await status(h.url, created.body.secret)).toBe(200)
    expect(await status(h.url, created.body.secret)).toBe(402)
    expect(h.records().at(-1)).toMatchObject({ key_id: "capped", status: 402, budget: "key.day" })
    const listed = (await listKeys(h.url)).body.keys.find((k: { id: string }) => k.id === "capped")
    expect(listed.budgets).toEqual(created.body.budgets)
  })

  it("a bad budget is a 400 that says which field and why", async () => {
    const answer = await createKey(h.url, {
      tenant: "acme",
      id: "bad",
      budgets: { week: { limit_usd: "ten", mode: "hard" } },
    })
    expect(answer.status).toBe(400)
    expect(answer.body.error).toEqual({
      type: "invalid_request_error",
      param: "budgets",
      message: "budgets.week.limit_usd: must be a non-negative number of USD, e.g. 5 or 0.25",
    })
  })
})

describe("GET /admin/keys", () => {
  it("lists config and runtime keys with their source and no secret; ?tenant= narrows it", async () => {
    const created = await createKey(h.url, { tenant: "beta", id: "listed" })
    const all = await listKeys(h.url)
    expect(all.status).toBe(200)
    const keys: Array<Record<string, unknown>> = all.body.keys
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual([
        "budgets",
        "created_at",
        "expires_at",
        "id",
        "last_used_at",
        "revoked_at",
        "source",
        "tenant",
      ])
    }
    expect(keys[0]).toMatchObject({
      id: "ci",
      tenant: "acme",
      source: "config",
      created_at: null,
      expires_at: null,
      revoked_at: null,
    })
    expect(keys.find((k) => k.id === "listed")).toMatchObject({
      tenant: "beta",
      source: "runtime",
      created_at: created.body.created_at,
      revoked_at: null,
      last_used_at: null,
    })
    expect(JSON.stringify(all.body)).not.toContain(created.body.secret)
    expect(JSON.stringify(all.body)).not.toContain(created.body.sha256)
    const beta = await listKeys(h.url, "beta")
    expect(beta.body.keys.length).toBeGreaterThan(0)
    expect(beta.body.keys.every((k: { tenant: string }) => k.tenant === "beta")).toBe(true)
    expect((await listKeys(h.url, "nobody")).status).toBe(404)
    const bad = await admin(h.url, "GET", "/admin/keys?tenants=acme")
    expect(bad.status).toBe(400)
    expect(bad.body.error.param).toBe("tenants")
  })

  it("shows last_used_at of config and runtime keys once they authenticated a request, on the same copy at once", async () => {
    const created = await createKey(h.url, { tenant: "acme", id: "used" })
    const before = Date.now()
    expect(await status(h.url, h.key)).toBe(200)
    expect(await status(h.url, created.body.secret)).toBe(200)
    const keys: Array<{ id: string; last_used_at: string | null }> = (await listKeys(h.url, "acme")).body.keys
    for (const id of ["ci", "used"]) {
      const at = keys.find((k) => k.id === id)?.last_used_at
      expect(at, id).toMatch(ISO)
      expect(Date.parse(at!)).toBeGreaterThanOrEqual(before - 5)
    }
  })
})

describe("DELETE /admin/keys/{tenant}/{id}", () => {
  it("revokes a runtime key: 200 with its view, then 401 for it; revoking again keeps the first time", async () => {
    const created = await createKey(h.url, { tenant: "acme", id: "gone soon/1" })
    expect(await status(h.url, created.body.secret)).toBe(200)
    const revoked = await revokeKey(h.url, "acme", "gone soon/1")
    expect(revoked.status).toBe(200)
    expect(revoked.body).toMatchObject({ id: "gone soon/1", tenant: "acme", source: "runtime" })
    expect(revoked.body.revoked_at).toMatch(ISO)
    expect(revoked.body.last_used_at).toMatch(ISO)
    expect(await status(h.url, created.body.secret)).toBe(401)
    expect(await sdkStatus(h.url, created.body.secret)).toBe(401)
    const again = await revokeKey(h.url, "acme", "gone soon/1")
    expect(again.status).toBe(200)
    expect(again.body.revoked_at).toBe(revoked.body.revoked_at)
    // The id stays taken.
    expect((await createKey(h.url, { tenant: "acme", id: "gone soon/1" })).status).toBe(409)
    const listed = (await listKeys(h.url, "acme")).body.keys.find(
      (k: { id: string }) => k.id === "gone soon/1",
    )
    expect(listed.revoked_at).toBe(revoked.body.revoked_at)
  })

  it("answers 409 for a config key (which keeps working) and 404 for an unknown key or tenant", async () => {
    const config = await revokeKey(h.url, "acme", "ci")
    expect(config.status).toBe(409)
    expect(config.body.error.message).toContain("remove it from the config")
    expect(await status(h.url, h.key)).toBe(200)
    expect((await revokeKey(h.url, "acme", "nope")).status).toBe(404)
    expect((await revokeKey(h.url, "nobody", "nope")).body).toMatchObject({
      error: { type: "not_found_error" },
    })
  })
})

describe("keys at run time", () => {
  it("an expired key gets 401 from its expires_at on", async () => {
    const expiresAt = Date.now() + 1_500
    const created = await createKey(h.url, {
      tenant: "acme",
      id: "short",
      expires_at: new Date(expiresAt).toISOString(),
    })
    expect(created.status).toBe(201)
    expect(await status(h.url, created.body.secret)).toBe(200)
    const start = performance.now()
    await measureUntil(start, async () => (await status(h.url, created.body.secret)) === 401, 10_000)
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt)
    expect(await sdkStatus(h.url, created.body.secret)).toBe(401)
  })

  it("the keys file holds hashes, never a secret, and is readable by its owner only", async () => {
    const created = await createKey(h.url, { tenant: "acme", id: "filed" })
    const text = readFileSync(h.config.keysFile, "utf8")
    expect(text).toContain(created.body.sha256)
    expect(text).not.toContain(created.body.secret)
    expect(text).not.toContain("tg_")
    expect(statSync(h.config.keysFile).mode & 0o777).toBe(0o600)
  })

  it("every key endpoint needs the admin token, and is absent (404) when admin is off", async () => {
    const calls = [
      ["POST", "/admin/keys", { tenant: "acme", id: "x" }],
      ["GET", "/admin/keys", undefined],
      ["DELETE", "/admin/keys/acme/x", undefined],
    ] as const
    for (const [method, path, body] of calls) {
      for (const token of [null, "wrong"]) {
        const answer = await admin(h.url, method, path, body, token)
        expect(answer.status, `${method} ${path}`).toBe(401)
        expect(answer.body).toMatchObject({ error: { type: "authentication_error" } })
      }
    }
    const off = await startHarness({ config })
    try {
      for (const [method, path, body] of calls) {
        expect((await admin(off.url, method, path, body)).status, `${method} ${path}`).toBe(404)
      }
    } finally {
      await off.close()
    }
  })
})
