import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import { ADMIN_ENV, ADMIN_TOKEN, adminGet } from "../admin/fixtures.js"
import { startHarness, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

/**
 * ADR 0048, "the M3 scenario" of issue #16: one tenant's slow non-stream
 * requests time out at first_token and count as failures of the route's only
 * target. They open that tenant's own breaker, not the shared one: another
 * tenant's request still goes through. Failures from two tenants do open the
 * shared breaker.
 */

const MODEL = "claude-sonnet-5-5"
/** Longer than the route's first_token (300 ms): the fake answers after it. */
const SLOW = { "x-fake-scenario": "delay:3000" }

const globexKey = generateKey()
const initechKey = generateKey()

const start = (): Promise<Harness> =>
  startHarness({
    fakes: [{ name: "A" }],
    env: { [ADMIN_ENV]: ADMIN_TOKEN },
    config: (urls, keyHash, dir) => ({
      server: { listen: "127.0.0.1:0" },
      admin: { token_env: ADMIN_ENV },
      usage: { file: join(dir, "usage.jsonl") },
      breaker: { min_requests: 4, failure_ratio: 0.5, open_for: "30s" },
      providers: { a: { kind: "anthropic", base_url: urls[0], api_key_env: UPSTREAM_KEY_ENV } },
      routes: {
        main: {
          api: "anthropic",
          targets: [{ provider: "a", model: MODEL }],
          timeouts: { first_token: "300ms" },
        },
      },
      tenants: {
        acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" },
        globex: { keys: [{ id: "web", sha256: hashKey(globexKey) }], routes: "*" },
        initech: { keys: [{ id: "ops", sha256: hashKey(initechKey) }], routes: "*" },
      },
    }),
  })

interface ErrorBody {
  readonly error: { readonly message: string; readonly targets: Array<{ provider: string; reason: string }> }
}

const send = async (h: Harness, key: string, headers: Record<string, string> = {}) => {
  const started = performance.now()
  const response = await fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: "main",
      max_tokens: 6,
      stream: false,
      messages: [{ role: "user", content: "write a long story" }],
    }),
  })
  const text = await response.text()
  return { status: response.status, text, ms: performance.now() - started }
}

/** `n` requests at once. */
const wave = (h: Harness, key: string, n: number, headers: Record<string, string> = {}) =>
  Promise.all(Array.from({ length: n }, () => send(h, key, headers)))

interface BreakerBody {
  readonly tenant: string | null
  readonly provider: string
  readonly state: string
  readonly attempts: number
  readonly failure_ratio: number
}

const breakerList = async (h: Harness) => {
  const response = await adminGet(h.url, "/admin/breakers")
  expect(response.status).toBe(200)
  return (response.body as { breakers: Array<BreakerBody> }).breakers
}

const metric = async (h: Harness, line: RegExp) => {
  const text = await (await fetch(`${h.url}/metrics`)).text()
  return Number(line.exec(text)?.[1])
}

describe("breakers with several tenants (the M3 scenario of issue #16)", () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
    h = undefined
  })

  it("one tenant's slow requests open only its own breaker; another tenant's request still succeeds", async () => {
    h = await start()
    const upstream = () => h!.fakes[0]!.requests().count

    // Wave 1: four slow requests of acme, each failing at first_token: acme's breaker opens (min_requests 4).
    const first = await wave(h, h.key, 4, SLOW)
    for (const r of first) {
      expect(r.status).toBe(502)
      expect(r.ms).toBeLessThan(10_000)
      expect((JSON.parse(r.text) as ErrorBody).error.targets[0]).toMatchObject({ provider: "a" })
    }
    expect(upstream()).toBe(4)

    // Wave 2: acme gets the fast 502 from its own breaker; nothing goes upstream.
    const second = await wave(h, h.key, 4, SLOW)
    for (const r of second) {
      expect(r.status).toBe(502)
      const body = JSON.parse(r.text) as ErrorBody
      expect(body.error.message).toContain("blocked")
      expect(body.error.targets).toEqual([expect.objectContaining({ provider: "a", reason: "breaker_open" })])
    }
    expect(upstream()).toBe(4)

    // globex is not blocked: the shared breaker saw failures from one tenant only.
    const other = await send(h, globexKey)
    expect(other.status).toBe(200)
    expect(upstream()).toBe(5)

    const breakers = await breakerList(h)
    expect(breakers).toEqual([
      expect.objectContaining({
        tenant: null,
        provider: "a",
        state: "closed",
        attempts: 5,
        failure_ratio: 0.8,
      }),
      expect.objectContaining({
        tenant: "acme",
        provider: "a",
        state: "open",
        attempts: 4,
        failure_ratio: 1,
      }),
    ])
    expect(await metric(h, /^tollgate_breaker_state\{provider="a",model="[^"]+"\} (\S+)$/m)).toBe(0)
    expect(await metric(h, /^tollgate_tenant_breakers_open (\S+)$/m)).toBe(1)

    // acme is still blocked; initech is not.
    expect((await send(h, h.key)).status).toBe(502)
    expect((await send(h, initechKey)).status).toBe(200)
  })

  it("slow requests from two tenants open the shared breaker for every tenant", async () => {
    h = await start()
    const upstream = () => h!.fakes[0]!.requests().count
    const failed = await Promise.all([wave(h, h.key, 2, SLOW), wave(h, globexKey, 2, SLOW)])
    for (const r of failed.flat()) expect(r.status).toBe(502)
    expect(upstream()).toBe(4)

    // initech sent nothing slow, yet the target is down for everyone: fast 502, nothing upstream.
    const blocked = await send(h, initechKey)
    expect(blocked.status).toBe(502)
    expect((JSON.parse(blocked.text) as ErrorBody).error.targets).toEqual([
      expect.objectContaining({ provider: "a", reason: "breaker_open" }),
    ])
    expect(upstream()).toBe(4)
    const breakers = await breakerList(h)
    expect(breakers).toEqual([expect.objectContaining({ tenant: null, provider: "a", state: "open" })])
    expect(await metric(h, /^tollgate_breaker_state\{provider="a",model="[^"]+"\} (\S+)$/m)).toBe(2)
    expect(await metric(h, /^tollgate_tenant_breakers_open (\S+)$/m)).toBe(0)
  })
})
