import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { stringify } from "yaml"
import { ADMIN_ENV, ADMIN_TOKEN } from "../admin/fixtures.js"
import { harnessForSuite, PRICES, UPSTREAM_KEY_ENV } from "../support/harness.js"

/**
 * Reload keeps the state that is kept by name (ADR 0052): a breaker opened
 * before it, the tenant's spend and its rate-limit window are all still
 * there after it, while the new configuration applies.
 */
describe("POST /admin/reload keeps state kept by name", () => {
  let raw: Record<string, unknown> = {}
  const h = harnessForSuite({
    env: { [ADMIN_ENV]: ADMIN_TOKEN },
    config: (urls, keyHash, dir) =>
      (raw = {
        server: { listen: "127.0.0.1:0" },
        admin: { token_env: ADMIN_ENV },
        usage: { file: join(dir, "usage.jsonl") },
        breaker: { min_requests: 2, failure_ratio: 0.5, open_for: "60s" },
        retry: { max_attempts: 1 },
        providers: { anthropic: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
        routes: {
          claude: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        },
        tenants: {
          acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*", limits: { requests_per_minute: 100 } },
        },
      }),
  })

  const ask = (scenario?: string) =>
    fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": h.key,
        "content-type": "application/json",
        ...(scenario === undefined ? {} : { "x-fake-scenario": scenario }),
      },
      body: JSON.stringify({ model: "claude", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
    })
  const admin = async (method: string, path: string) =>
    fetch(`${h.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })

  it("a breaker opened before the reload is still open after it; spend and the request window survive", async () => {
    expect((await ask()).status).toBe(200)
    // One success and one failure: a ratio of 0.5 over min_requests 2 opens the breaker.
    expect((await ask("status:500")).status).toBe(500)
    // Open: the next request is refused without an attempt.
    expect((await ask()).status).toBe(502)
    const tenantBefore = (await (await admin("GET", "/admin/tenants/acme")).json()) as {
      month: { spend_micro_usd: number }
      rate_limits: { requests: { current: number; limit: number } }
    }

    writeFileSync(join(h.dir, "pricing.yaml"), stringify(PRICES))
    writeFileSync(
      join(h.dir, "tollgate.yaml"),
      stringify({
        ...raw,
        routes: {
          ...(raw["routes"] as object),
          other: { api: "anthropic", targets: [{ provider: "anthropic", model: "claude-sonnet-5-5" }] },
        },
      }),
    )
    const reloaded = await admin("POST", "/admin/reload")
    expect(reloaded.status).toBe(200)

    const tenantAfter = (await (await admin("GET", "/admin/tenants/acme")).json()) as typeof tenantBefore
    expect(tenantAfter.month.spend_micro_usd).toBe(tenantBefore.month.spend_micro_usd)
    expect(tenantAfter.month.spend_micro_usd).toBeGreaterThan(0)
    expect(tenantAfter.rate_limits.requests.current).toBe(tenantBefore.rate_limits.requests.current)
    expect(tenantAfter.rate_limits.requests.current).toBe(3)
    const breakers = (await (await admin("GET", "/admin/breakers")).json()) as {
      breakers: Array<{ provider: string; state: string }>
    }
    expect(breakers.breakers.find((b) => b.provider === "anthropic")?.state).toBe("open")
    // Still blocked by the same target's breaker.
    expect((await ask()).status).toBe(502)
  })
})
