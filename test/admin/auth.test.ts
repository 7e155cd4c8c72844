import { afterEach, describe, expect, it } from "vitest"
import { startHarness, type Harness } from "../support/harness.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminConfig, adminGet } from "./fixtures.js"

/** The admin token: off when its env var is unset or empty, 401 without the right bearer token. */

let h: Harness | undefined

afterEach(async () => {
  await h?.close()
  h = undefined
})

const start = async (env: Record<string, string>) => {
  h = await startHarness({
    env,
    config: adminConfig(),
  })
  return h
}

const PATHS = ["/admin/tenants", "/admin/tenants/acme", "/admin/usage", "/admin/breakers"]

describe("admin token", () => {
  it("every admin endpoint answers 404 not_found when the token variable is unset, whatever token is sent", async () => {
    const harness = await start({})
    for (const path of PATHS) {
      for (const token of [null, ADMIN_TOKEN, ""]) {
        const response = await adminGet(harness.url, path, token)
        expect(response.status, path).toBe(404)
        expect(response.body).toMatchObject({ error: { type: "not_found_error" } })
      }
    }
  })

  it("every admin endpoint answers 404 when the token variable is set but empty", async () => {
    const harness = await start({ [ADMIN_ENV]: "" })
    for (const path of PATHS) {
      expect((await adminGet(harness.url, path, "")).status, path).toBe(404)
      expect((await adminGet(harness.url, path, null)).status, path).toBe(404)
    }
  })

  it("answers 401 without a token, with a wrong one, or with the right one in the wrong scheme; 200 with it", async () => {
    const harness = await start({ [ADMIN_ENV]: ADMIN_TOKEN })
    for (const path of PATHS) {
      const missing = await adminGet(harness.url, path, null)
      expect(missing.status, path).toBe(401)
      expect(missing.body).toEqual({
        error: { type: "authentication_error", message: "missing or wrong admin bearer token" },
      })
      expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="tollgate-admin"')
      expect((await adminGet(harness.url, path, "wrong")).status, path).toBe(401)
      expect((await adminGet(harness.url, path, `${ADMIN_TOKEN}x`)).status, path).toBe(401)
      expect((await adminGet(harness.url, path, ADMIN_TOKEN.slice(0, -1))).status, path).toBe(401)
      const basic = await fetch(`${harness.url}${path}`, {
        headers: { authorization: `Basic ${ADMIN_TOKEN}` },
      })
      expect(basic.status, path).toBe(401)
      const ok = await adminGet(harness.url, path)
      expect(ok.status, path).toBe(200)
      expect(ok.headers.get("cache-control")).toBe("no-store")
    }
  })

  it("a client key is not an admin token", async () => {
    const harness = await start({ [ADMIN_ENV]: ADMIN_TOKEN })
    expect((await adminGet(harness.url, "/admin/tenants", harness.key)).status).toBe(401)
  })
})
