import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startFakeProvider, type FakeProviderHandle } from "../../fakeprovider/server.js"
import { generateKey } from "../../src/keys/keys.js"
import { REDIS_FLUSH_MS } from "../../src/keys/KeyStore.js"
import { ADMIN_ENV, ADMIN_TOKEN } from "../admin/fixtures.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"
import { startRedis, startRedisCluster, type RedisHandle } from "../support/redis.js"
import { createKey, listKeys, measureUntil, revokeKey, sdkStatus, status } from "./helpers.js"
import { tempDir } from "../support/tempDirs.js"

/** Runtime keys on Redis: three copies share them (SPEC "Keys at runtime, reload", ADR 0050). */

/** Where the copies keep their keys: one Redis, or a Redis Cluster (`store.cluster: true`, issue #19). */
interface Backend {
  readonly url: string
  readonly cluster: boolean
  /** A single Redis can be stopped and started again (the "Redis down" test). */
  readonly server?: RedisHandle
}

const runtimeKeysOn = (name: string, start: () => Promise<{ backend: Backend; stop: () => Promise<void> }>) =>
  describe(`runtime keys on ${name}, three copies`, () => {
    let backend: Backend
    let stopBackend: () => Promise<void> = async () => {}
    let fake: FakeProviderHandle
    const copies: Array<Harness> = []
    const configKey = generateKey()

    beforeAll(async () => {
      const started = await start()
      backend = started.backend
      stopBackend = started.stop
      fake = await startFakeProvider()
      for (let i = 0; i < 3; i++) {
        const dir = tempDir(`tollgate-keys-copy${i}-`)
        copies.push(
          await startHarness({
            dir,
            key: configKey,
            sharedFakes: [fake],
            env: { [ADMIN_ENV]: ADMIN_TOKEN },
            config: (urls, keyHash) => ({
              server: { listen: "127.0.0.1:0" },
              admin: { token_env: ADMIN_ENV },
              store: { kind: "redis", url: backend.url, cluster: backend.cluster },
              usage: { file: join(dir, "usage.jsonl") },
              providers: {
                anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV },
              },
              routes: {
                claude: {
                  api: "anthropic",
                  targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }],
                },
              },
              // Several tenants: their keys live in different hash slots (on a cluster, different nodes).
              tenants: {
                acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" },
                beta: { keys: [], routes: "*" },
                gamma: { keys: [], routes: "*" },
              },
            }),
          }),
        )
      }
    }, 60_000)

    afterAll(async () => {
      for (const copy of copies) await copy.close()
      await fake?.close()
      await stopBackend()
    })

    /** For each copy, the ms from `since` until `check` holds on it (polled). */
    const untilOnEvery = (since: number, check: (url: string) => Promise<boolean>) =>
      Promise.all(copies.map((copy) => measureUntil(since, () => check(copy.url))))

    it("a key made on one copy works with the Anthropic SDK on all three within 1 s (on the first at once)", async () => {
      const [a] = copies
      const created = await createKey(a!.url, { tenant: "acme", id: "shared" })
      const since = performance.now()
      expect(created.status).toBe(201)
      expect(await sdkStatus(a!.url, created.body.secret)).toBe(200)
      const waits = await untilOnEvery(since, async (url) => (await status(url, created.body.secret)) === 200)
      for (const ms of waits) expect(ms).toBeLessThanOrEqual(1_000)
      for (const copy of copies) expect(await sdkStatus(copy.url, created.body.secret)).toBe(200)
      // Every copy refuses the same id now.
      for (const copy of copies) {
        expect((await createKey(copy.url, { tenant: "acme", id: "shared" })).status).toBe(409)
      }
    })

    it("keys of several tenants (several hash slots) made on different copies work on every copy", async () => {
      const made = await Promise.all(
        (["acme", "beta", "gamma"] as const).map((tenant, i) =>
          createKey(copies[i]!.url, { tenant, id: `spread-${tenant}` }),
        ),
      )
      for (const created of made) expect(created.status).toBe(201)
      await untilOnEvery(performance.now(), async (url) => {
        for (const created of made) if ((await status(url, created.body.secret)) !== 200) return false
        return true
      })
      for (const copy of copies)
        for (const tenant of ["beta", "gamma"]) {
          const listed = (await listKeys(copy.url, tenant)).body.keys.map((k: { id: string }) => k.id)
          expect(listed).toContain(`spread-${tenant}`)
        }
    })

    it("a key revoked on one copy gets 401 on every copy within 1 s of the DELETE answer", async () => {
      const [a, b] = copies
      const created = (await createKey(a!.url, { tenant: "acme", id: "revoked" })).body
      await untilOnEvery(performance.now(), async (url) => (await status(url, created.secret)) === 200)
      const revoked = await revokeKey(b!.url, "acme", "revoked")
      const since = performance.now()
      expect(revoked.status).toBe(200)
      const waits = await untilOnEvery(since, async (url) => (await status(url, created.secret)) === 401)
      for (const ms of waits) expect(ms).toBeLessThanOrEqual(1_000)
      for (const copy of copies) expect(await sdkStatus(copy.url, created.secret)).toBe(401)
      for (const copy of copies) {
        const listed = (await listKeys(copy.url)).body.keys.find((k: { id: string }) => k.id === "revoked")
        expect(listed.revoked_at).toBe(revoked.body.revoked_at)
      }
    })

    it("an expired key gets 401 on every copy", async () => {
      const expiresAt = Date.now() + 1_500
      const created = (
        await createKey(copies[2]!.url, {
          tenant: "acme",
          id: "expiring",
          expires_at: new Date(expiresAt).toISOString(),
        })
      ).body
      await untilOnEvery(performance.now(), async (url) => (await status(url, created.secret)) === 200)
      await untilOnEvery(performance.now(), async (url) => (await status(url, created.secret)) === 401)
      expect(Date.now()).toBeGreaterThanOrEqual(expiresAt)
    })

    it("last_used_at shows on the copy that served at once, and on the others within the flush interval", async () => {
      const [a, , c] = copies
      const created = (await createKey(a!.url, { tenant: "acme", id: "metered" })).body
      const usedAt = Date.now()
      expect(await status(a!.url, created.secret)).toBe(200)
      expect(await status(a!.url, configKey)).toBe(200)
      const since = performance.now()
      const lastUsed = async (url: string, id: string): Promise<string | null> =>
        (await listKeys(url, "acme")).body.keys.find((k: { id: string }) => k.id === id)?.last_used_at ?? null
      for (const id of ["metered", "ci"]) {
        const at = await lastUsed(a!.url, id)
        expect(at, id).not.toBeNull()
        expect(Date.parse(at!)).toBeGreaterThanOrEqual(usedAt - 5)
      }
      const wait = await measureUntil(since, async () => (await lastUsed(c!.url, "metered")) !== null)
      expect(wait).toBeLessThanOrEqual(REDIS_FLUSH_MS + 1_000)
      expect(await lastUsed(c!.url, "metered")).toBe(await lastUsed(a!.url, "metered"))
    })

    if (name === "Redis") {
      it("with Redis down, copies keep serving the keys they know; create and revoke answer 503", async () => {
        const [a, b] = copies
        const created = (await createKey(a!.url, { tenant: "acme", id: "survivor" })).body
        await untilOnEvery(performance.now(), async (url) => (await status(url, created.secret)) === 200)
        await backend.server!.stop()
        try {
          for (const copy of copies) expect(await sdkStatus(copy.url, created.secret)).toBe(200)
          const refused = await createKey(b!.url, { tenant: "acme", id: "while-down" })
          expect(refused.status).toBe(503)
          expect(refused.body).toMatchObject({ error: { type: "unavailable_error" } })
          expect((await revokeKey(b!.url, "acme", "survivor")).status).toBe(503)
          const listed = await listKeys(b!.url, "acme")
          expect(listed.status).toBe(200)
          expect(listed.body.keys.some((k: { id: string }) => k.id === "survivor")).toBe(true)
          // Still served a while later (the poller fails on every tick meanwhile).
          await new Promise((resolve) => setTimeout(resolve, 600))
          for (const copy of copies) expect(await status(copy.url, created.secret)).toBe(200)
        } finally {
          await backend.server!.restart()
        }
      })
    }
  })

runtimeKeysOn("Redis", async () => {
  const server = await startRedis()
  return { backend: { url: server.url, cluster: false, server }, stop: () => server.stop() }
})

runtimeKeysOn("a Redis Cluster", async () => {
  const cluster = await startRedisCluster()
  return { backend: { url: cluster.url, cluster: true }, stop: () => cluster.stop() }
})
