import Anthropic from "@anthropic-ai/sdk"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "../support/harness.js"
import { stringify } from "yaml"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import {
  FAKEPROVIDER,
  GATEWAY_UPSTREAM_KEY_ENV,
  startBinary,
  TOLLGATE,
  type Running,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

const until = (condition: () => boolean | Promise<boolean>, timeoutMs = 15_000) =>
  eventually(condition, timeoutMs)

/**
 * Issue #17, reload (ADR 0052), against the built binary and a real SIGHUP:
 * a valid change (a new route, a changed price, a removed tenant) applies
 * while a stream started before it finishes under the old configuration; an
 * invalid file changes nothing and says why at `error`; SIGHUP never kills it.
 */
const ADMIN_TOKEN = "admin-token-for-the-reload-test"

describe("reload on SIGHUP", () => {
  let fake: Running
  let gateway: Running
  let dir: string
  const acme = generateKey()
  const beta = generateKey()

  const writeConfig = (options: {
    routes: ReadonlyArray<string>
    tenants: ReadonlyArray<"acme" | "beta">
  }) => {
    const keyOf = { acme, beta }
    writeFileSync(
      join(dir, "tollgate.yaml"),
      stringify({
        server: { listen: "127.0.0.1:0" },
        usage: { file: "usage.jsonl" },
        pricing: { file: "pricing.yaml" },
        sessions: { derive: false },
        providers: { fake: { kind: "anthropic", base_url: fake.url, api_key_env: GATEWAY_UPSTREAM_KEY_ENV } },
        routes: Object.fromEntries(
          options.routes.map((r) => [
            r,
            { api: "anthropic", targets: [{ provider: "fake", model: "claude-sonnet-5-5" }] },
          ]),
        ),
        tenants: Object.fromEntries(
          options.tenants.map((t) => [t, { keys: [{ id: "ci", sha256: hashKey(keyOf[t]) }], routes: "*" }]),
        ),
      }),
    )
  }
  const writePrices = (input: number, output: number) =>
    writeFileSync(
      join(dir, "pricing.yaml"),
      stringify({ prices: [{ model: "claude-sonnet-5-5", input, output, cache_read: 0, cache_write: 0 }] }),
    )

  beforeAll(async () => {
    dir = tempDir("tollgate-reload-")
    fake = await startBinary(FAKEPROVIDER, ["--listen", "127.0.0.1:0"])
    writePrices(3, 10)
    writeConfig({ routes: ["claude"], tenants: ["acme", "beta"] })
    gateway = await startBinary(TOLLGATE, ["serve", "--config", join(dir, "tollgate.yaml")], {
      [GATEWAY_UPSTREAM_KEY_ENV]: "sk-reload",
      TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
    })
  })

  afterAll(async () => {
    await gateway?.stop("SIGKILL")
    await fake?.stop("SIGKILL")
  })

  const client = (key: string) => new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 })
  const ask = (key: string, model = "claude") =>
    client(key).messages.create({
      model,
      max_tokens: 4,
      messages: [{ role: "user", content: "one two three" }],
    })
  const records = () =>
    readFileSync(join(dir, "usage.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { route: string; cost_micro_usd: number; status: number; stream: boolean })
  const reloads = async (result: "ok" | "error") => {
    const text = await (await fetch(`${gateway.url}/metrics`)).text()
    const line = text
      .split("\n")
      .find((l) => l.startsWith(`tollgate_config_reloads_total{result="${result}"}`))
    return Number(line?.split(" ").at(-1) ?? 0)
  }

  it("a valid change applies at once; a stream open across it finishes under the old configuration", async () => {
    expect((await ask(beta)).usage.output_tokens).toBe(4)
    // A stream of 20 tokens, one every 100 ms: open across the reload.
    const stream = client(acme).messages.stream(
      { model: "claude", max_tokens: 20, messages: [{ role: "user", content: "one two three" }] },
      { headers: { "x-fake-scenario": "tokens:20,delay:100" } },
    )
    let events = 0
    stream.on("streamEvent", () => events++)
    await until(() => events >= 3)

    writePrices(6, 20)
    writeConfig({ routes: ["claude", "claude-two"], tenants: ["acme"] })
    const before = gateway.output().length
    gateway.child.kill("SIGHUP")
    await until(() => gateway.output().slice(before).includes("config reloaded"))

    // The new route answers, the removed tenant's key does not, new requests pay the new price.
    expect((await ask(acme, "claude-two")).usage.output_tokens).toBe(4)
    await expect(ask(beta)).rejects.toMatchObject({ status: 401 })
    const message = await stream.finalMessage()
    expect(message.usage.output_tokens).toBe(20)
    const all = records()
    const streamed = all.find((r) => r.stream)!
    // Started before the reload: the old price, 3 × 3 + 20 × 10 = 209 micro-USD.
    expect(streamed).toMatchObject({ status: 200, cost_micro_usd: 209 })
    // After it: 3 × 6 + 4 × 20 = 98.
    expect(all.find((r) => r.route === "claude-two")).toMatchObject({ status: 200, cost_micro_usd: 98 })
    expect(await reloads("ok")).toBe(1)
    expect(gateway.child.exitCode).toBeNull()
  }, 60_000)

  it("an invalid file changes nothing and each problem is logged at error; the gateway keeps serving", async () => {
    writeFileSync(
      join(dir, "tollgate.yaml"),
      readFileSync(join(dir, "tollgate.yaml"), "utf8").replace("routes:", "routes:\n  broken: { api: nope }"),
    )
    const before = gateway.output().length
    gateway.child.kill("SIGHUP")
    await until(() => gateway.output().slice(before).includes("config reload refused"))
    const lines = gateway
      .output()
      .slice(before)
      .split("\n")
      .filter((l) => l.includes("config reload refused"))
      .map((l) => JSON.parse(l) as { level: string; problem: string })
    expect(lines.length).toBeGreaterThanOrEqual(1)
    for (const line of lines) expect(line.level).toBe("error")
    expect(lines.some((l) => l.problem.includes("routes.broken"))).toBe(true)
    // Still the configuration of the last good reload.
    expect((await ask(acme, "claude-two")).usage.output_tokens).toBe(4)
    expect(await reloads("error")).toBe(1)
    expect(gateway.child.exitCode).toBeNull()
  }, 30_000)

  it("POST /admin/reload does what SIGHUP does: 200 with the warnings, 422 with the problems, 401 without the token", async () => {
    const post = (token?: string) =>
      fetch(`${gateway.url}/admin/reload`, {
        method: "POST",
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      })
    expect((await post()).status).toBe(401)
    // Still the broken file of the previous test: refused, with the problem named.
    const refused = await post(ADMIN_TOKEN)
    expect(refused.status).toBe(422)
    const body = (await refused.json()) as { status: string; problems: Array<string> }
    expect(body.status).toBe("refused")
    expect(body.problems.some((p) => p.includes("routes.broken"))).toBe(true)
    // A good file with a restart-only change: applied, with a warning naming it.
    writeConfig({ routes: ["claude", "claude-three"], tenants: ["acme", "beta"] })
    writeFileSync(
      join(dir, "tollgate.yaml"),
      readFileSync(join(dir, "tollgate.yaml"), "utf8").replace("usage.jsonl", "other-usage.jsonl"),
    )
    const applied = await post(ADMIN_TOKEN)
    expect(applied.status).toBe(200)
    const ok = (await applied.json()) as { status: string; warnings: Array<string> }
    expect(ok.status).toBe("reloaded")
    expect(ok.warnings.some((w) => w.startsWith("usage.file changed"))).toBe(true)
    expect((await ask(acme, "claude-three")).usage.output_tokens).toBe(4)
    // beta is back, its key works again.
    expect((await ask(beta)).usage.output_tokens).toBe(4)
  }, 30_000)
})
