/// <reference lib="dom" />
// (page.evaluate callbacks run in the browser)
import Anthropic from "@anthropic-ai/sdk"
import { readFileSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { join } from "node:path"
import type { Browser, Page, Response } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_ENV, ADMIN_TOKEN, adminGet } from "../admin/fixtures.js"
import { launchChromium, SCREENSHOTS } from "../support/browser.js"
import {
  FAKEPROVIDER,
  GATEWAY_UPSTREAM_KEY_ENV,
  startBinary,
  TOLLGATE,
  writeGatewayConfig,
  type Running,
} from "../support/processes.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { startRedis } from "../support/redis.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * The web console (`/admin/ui`) in Debian's Chromium, against the built
 * gateway and fake provider: every page, as an operator uses it.
 */

const started: Array<Running> = []
const stops: Array<() => Promise<void>> = []
let browser: Browser
let page: Page
let gateway: Running
let key: string
/** The store of the suite running: screenshots are named by it. */
let storeName = ""

const client = (apiKey = key) => new Anthropic({ baseURL: gateway.url, apiKey, maxRetries: 0 })
const ask = (apiKey = key, scenario?: string) =>
  client(apiKey).messages.create(
    { model: "claude", max_tokens: 16, messages: [{ role: "user", content: "hello" }] },
    scenario === undefined ? {} : { headers: { "x-fake-scenario": scenario } },
  )

const shot = (name: string) =>
  page.screenshot({ path: join(SCREENSHOTS, `${storeName}-${name}.png`), fullPage: true })

const go = async (path: string) => {
  await page.getByRole("link", { name: path, exact: true }).click()
  await expect.poll(() => page.locator("main h1").textContent()).toBe(path)
}

describe.each(["memory", "redis"] as const)("the console on the %s store", (store) => {
  beforeAll(async () => {
    storeName = store
    browser = await launchChromium()
    const dir = tempDir("tollgate-console-")
    key = generateKey()
    const fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
    started.push(fake)
    const redis = store === "redis" ? await startRedis() : undefined
    if (redis !== undefined) stops.push(redis.stop)
    const config = writeGatewayConfig({
      dir,
      upstreamUrl: fake.url,
      keyHash: hashKey(key),
      tenant: {
        limits: { requests_per_minute: 1_000 },
        budgets: { month: { limit_usd: 100, mode: "hard" }, session: { limit_usd: 1, mode: "soft" } },
      },
      sections: {
        admin: { token_env: ADMIN_ENV },
        ...(redis === undefined ? {} : { store: { kind: "redis", url: redis.url } }),
        retry: { max_attempts: 1 },
        breaker: { min_requests: 3, failure_ratio: 0.5, open_for: "2s" },
      },
    })
    gateway = await startBinary(TOLLGATE, ["serve", "--config", config], {
      [GATEWAY_UPSTREAM_KEY_ENV]: "sk-console",
      [ADMIN_ENV]: ADMIN_TOKEN,
    })
    started.push(gateway)
    page = await browser.newPage({ acceptDownloads: true })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await Promise.all(started.splice(0).map((p) => p.stop()))
    await Promise.all(stops.splice(0).map((stop) => stop()))
  })

  it("a wrong token shows an error and no data", async () => {
    const answers: Array<number> = []
    const listener = (response: Response) => {
      if (response.url().includes("/admin/tenants")) answers.push(response.status())
    }
    page.on("response", listener)
    await page.goto(`${gateway.url}/admin/ui`)
    await page.getByLabel("Admin token").fill("not-the-token")
    await page.getByRole("button", { name: "Sign in" }).click()
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("not the admin token")
    page.off("response", listener)
    expect(answers).toEqual([401])
    expect(await page.getByRole("navigation").count()).toBe(0)
    expect(await page.locator("body").textContent()).not.toContain("acme")
    expect(await page.evaluate(() => sessionStorage.length + localStorage.length)).toBe(0)
    await shot("login-error")
  })

  it("signs in with the keyboard, and the overview shows the requests and the prompt cache", async () => {
    await ask()
    // The same prompt twice to a fake with a prompt cache: the second reads it.
    await ask(key, "prompt-cache")
    await ask(key, "prompt-cache")
    await page.goto(`${gateway.url}/admin/ui`)
    // The page moves focus to its heading once rendered; from there, Tab reaches the token field.
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe("H1")
    await page.keyboard.press("Tab")
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("token")
    await page.keyboard.type(ADMIN_TOKEN)
    await page.keyboard.press("Enter")
    await expect.poll(() => page.locator("main h1").textContent()).toBe("Overview")
    await expect.poll(() => page.getByTestId("total-requests").textContent()).not.toBe("0")
    await expect.poll(() => page.locator(".chart canvas").count()).toBe(2)
    const cacheRow = page.locator('[data-testid="cache-table"] tbody tr[data-target^="claude/"]')
    await expect.poll(() => cacheRow.count()).toBe(1)
    expect(await cacheRow.locator("td").first().textContent()).not.toBe("0 %")
    expect(await page.getByTestId("cache-table").locator("caption").textContent()).toMatch(
      /^Prompt cache: [1-9]\d* % of prompt tokens read from it, \$0\.\d{4} saved$/,
    )
    // Without usage.database the overview says it shows this copy's records only.
    expect(await page.getByTestId("usage-source").textContent()).toMatch(
      /^Records of this copy only, from its usage file/,
    )
    // The pages are links in one navigation list, reachable with Tab.
    const links = await page.getByRole("navigation", { name: "Pages" }).getByRole("link").allTextContents()
    expect(links).toEqual(["Overview", "Tenants", "Breakers", "Usage", "Keys"])
    await shot("overview")
  })

  it("the tenants page shows the spend move after requests", async () => {
    await go("Tenants")
    const spend = page.locator('[data-tenant="acme"] [data-testid="month-spend"]')
    const before = await spend.textContent()
    for (let i = 0; i < 3; i++) await ask()
    const month = async () => {
      const { body } = await adminGet(gateway.url, "/admin/tenants/acme")
      return (body as { month: { spend_micro_usd: number } }).month.spend_micro_usd
    }
    const expected = `$${((await month()) / 1_000_000).toFixed(4)}`
    await expect.poll(() => spend.textContent(), { timeout: 10_000 }).toBe(expected)
    expect(expected).not.toBe(before)
    expect(await page.locator('[data-tenant="acme"] meter').count()).toBeGreaterThanOrEqual(2)
    // Each session's spend as a bar against the session budget.
    await page.locator('[data-tenant="acme"] details summary').click()
    expect(await page.locator('[data-tenant="acme"] details meter').count()).toBeGreaterThanOrEqual(1)
    await shot("tenants")
  })

  it("the breakers page shows a breaker open after failures and closed after it recovers", async () => {
    await go("Breakers")
    // Earlier tests' successes count in the last minute: enough failures to pass failure_ratio 0.5.
    for (let i = 0; i < 10; i++) await ask(key, "status:500").catch(() => undefined)
    const state = page.getByTestId("breaker-state")
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe("Open")
    await shot("breakers-open")
    // After open_for (2 s) the next request tests the target, which answers again.
    await new Promise((resolve) => setTimeout(resolve, 2_100))
    expect((await ask()).type).toBe("message")
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe("Closed")
    await shot("breakers")
  })

  it("creates a key whose secret works with the SDK, never fetched again; revoking it gives 401", async () => {
    await go("Keys")
    const bodies: Array<string> = []
    const listener = async (response: Response) => {
      if (response.url().includes("/admin/")) bodies.push(await response.text().catch(() => ""))
    }
    page.on("response", listener)
    await page.getByLabel("Key id").fill("console-key")
    await page.getByRole("button", { name: "Create key" }).click()
    const secretField = page.getByLabel("Secret")
    await expect.poll(() => secretField.inputValue()).toMatch(/^tg_/)
    const secret = await secretField.inputValue()
    await shot("keys-created")
    expect((await ask(secret)).type).toBe("message")
    await page.getByRole("button", { name: "Done — forget the secret" }).click()
    expect(await page.getByLabel("Secret").count()).toBe(0)
    const row = page.locator('[data-key="acme/console-key"]')
    await expect.poll(() => row.getByTestId("key-status").textContent()).toBe("active")
    page.once("dialog", (dialog) => void dialog.accept())
    await row.getByRole("button", { name: /Revoke/ }).click()
    await expect.poll(() => row.getByTestId("key-status").textContent()).toBe("revoked")
    await expect(ask(secret)).rejects.toBeInstanceOf(Anthropic.AuthenticationError)
    page.off("response", listener)
    // The secret came in the creation's answer only: no later answer holds it.
    expect(bodies.filter((body) => body.includes(secret))).toHaveLength(1)
    await shot("keys")
  })

  it("the usage page's CSV download equals /admin/usage", async () => {
    await go("Usage")
    await page.getByLabel("Group by").selectOption("model")
    await page.getByRole("button", { name: "Show" }).click()
    await expect.poll(() => page.locator("table tbody tr").count()).toBeGreaterThan(0)
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download CSV" }).click(),
    ])
    const csv = readFileSync((await download.path())!, "utf8")
    const today = new Date().toISOString().slice(0, 10)
    const since = new Date(Date.now() - 6 * 86_400_000).toISOString().slice(0, 10)
    const until = new Date(Date.parse(today) + 86_400_000).toISOString().slice(0, 10)
    const { body } = await adminGet(
      gateway.url,
      `/admin/usage?tenant=&since=${since}&until=${until}&group_by=model`,
    )
    const groups = (body as { groups: Array<Record<string, unknown>> }).groups
    const lines = csv.trim().split(/\r?\n/)
    const header = lines[0]!.split(",")
    expect(header[0]).toBe("key")
    const rows = lines.slice(1).map((line) => {
      const cells = line.split(",")
      return Object.fromEntries(
        header.map((name, i) => [
          name,
          name === "key" ? (cells[i] === "" ? null : cells[i]) : Number(cells[i]),
        ]),
      )
    })
    expect(rows).toEqual(groups)
    expect(rows.length).toBeGreaterThan(0)
    await shot("usage")
  })

  it("every field has a label, and both themes (following the system) keep text contrast at 4.5:1 or more", async () => {
    for (const path of ["Overview", "Tenants", "Breakers", "Usage", "Keys"]) {
      await go(path)
      const unlabelled = await page.evaluate(() =>
        Array.from(document.querySelectorAll("input, select, button, meter"))
          .filter((el) => {
            const labels = (el as HTMLInputElement).labels
            return (
              (labels === null || labels === undefined || labels.length === 0) &&
              !el.getAttribute("aria-label") &&
              (el.textContent ?? "").trim() === ""
            )
          })
          .map((el) => el.outerHTML.slice(0, 80)),
      )
      expect(unlabelled, path).toEqual([])
    }
    for (const scheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme: scheme })
      await go("Overview")
      const ratios = await page.evaluate(() => {
        const style = getComputedStyle(document.documentElement)
        const rgb = (name: string): [number, number, number] => {
          const hex = style.getPropertyValue(name).trim().slice(1)
          return [0, 2, 4].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255) as [number, number, number]
        }
        const luminance = (c: [number, number, number]) => {
          const [r, g, b] = c.map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
          return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!
        }
        const contrast = (a: string, b: string) => {
          const [hi, lo] = [luminance(rgb(a)), luminance(rgb(b))].sort((x, y) => y - x)
          return (hi! + 0.05) / (lo! + 0.05)
        }
        return {
          text: contrast("--text", "--bg"),
          textOnSurface: contrast("--text", "--surface"),
          muted: contrast("--text-muted", "--bg"),
          mutedOnSurface: contrast("--text-muted", "--surface"),
          button: contrast("--accent-text", "--accent"),
          link: contrast("--accent", "--bg"),
          danger: contrast("--danger", "--bg"),
          ok: contrast("--ok", "--bg"),
          warn: contrast("--warn", "--bg"),
          background: getComputedStyle(document.body).backgroundColor,
        }
      })
      const { background, ...contrasts } = ratios
      for (const [name, ratio] of Object.entries(contrasts))
        expect(ratio, `${scheme} ${name}`).toBeGreaterThanOrEqual(4.5)
      expect(background).toBe(scheme === "dark" ? "rgb(17, 19, 24)" : "rgb(255, 255, 255)")
      await shot(`overview-${scheme}`)
    }
    await page.emulateMedia({ colorScheme: "light" })
  })

  it("signing out leaves no secret in the page's storage", async () => {
    await page.getByRole("button", { name: "Sign out" }).click()
    await expect.poll(() => page.getByLabel("Admin token").count()).toBe(1)
    const stored = await page.evaluate(() => ({
      session: sessionStorage.length,
      local: localStorage.length,
      cookies: document.cookie,
    }))
    expect(stored).toEqual({ session: 0, local: 0, cookies: "" })
    // A reload does not sign in again.
    await page.reload()
    expect(await page.getByLabel("Admin token").count()).toBe(1)
  })

  it("the first load is under 200 KB gzipped and sends the security headers", async () => {
    let total = 0
    for (const path of ["/admin/ui", "/admin/ui/app.js", "/admin/ui/app.css"]) {
      const { bytes, headers } = await rawGet(`${gateway.url}${path}`)
      expect(headers["content-encoding"]).toBe("gzip")
      expect(headers["content-security-policy"]).toContain("connect-src 'self'")
      total += bytes
    }
    expect(total).toBeLessThan(200 * 1024)
  })
})

/** The bytes on the wire of a GET that accepts gzip (fetch would inflate them). */
const rawGet = (
  url: string,
): Promise<{ bytes: number; headers: Record<string, string | string[] | undefined> }> =>
  new Promise((resolve, reject) => {
    httpRequest(url, { headers: { "accept-encoding": "gzip" } }, (response) => {
      let bytes = 0
      response.on("data", (chunk: Buffer) => (bytes += chunk.length))
      response.on("end", () => resolve({ bytes, headers: response.headers }))
      response.on("error", reject)
    })
      .on("error", reject)
      .end()
  })
