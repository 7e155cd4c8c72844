import Anthropic from "@anthropic-ai/sdk"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { stringify } from "yaml"
import { generateKey, hashKey } from "../../src/keys/keys.js"
import {
  FAKEPROVIDER,
  runBinary,
  startBinary,
  TOLLGATE,
  startGateway,
  GATEWAY_UPSTREAM_KEY_ENV,
  type Running,
} from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

describe("the built binaries", () => {
  let fake: Running
  let gateway: Running
  let dir: string
  const key = generateKey()

  beforeAll(async () => {
    dir = tempDir("tollgate-e2e-")
    fake = await startBinary(FAKEPROVIDER, ["-listen", "127.0.0.1:0", "--name", "primary"])
    gateway = await startGateway({
      dir,
      upstreamUrl: fake.url,
      keyHash: hashKey(key),
      upstreamKey: "sk-e2e",
      provider: "primary",
      tenant: { routes: ["claude"] },
    })
  })

  afterAll(async () => {
    await gateway?.stop("SIGKILL")
    await fake?.stop("SIGKILL")
  })

  it("tollgate serve answers the Anthropic SDK and writes the usage record next to its config", async () => {
    const client = new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 })
    const message = await client.messages.create({
      model: "claude",
      max_tokens: 4,
      messages: [{ role: "user", content: "one two three" }],
    })
    expect(message.usage).toMatchObject({ input_tokens: 3, output_tokens: 4 })
    const records = readFileSync(join(dir, "usage.jsonl"), "utf8").trim().split("\n")
    expect(JSON.parse(records.at(-1)!)).toMatchObject({
      provider: "primary",
      input_tokens: 3,
      output_tokens: 4,
      cost_micro_usd: 49, // ceil((3 × 3 + 4 × 10) USD/M) = 49 micro-USD
    })
  })

  it("config validate accepts the running config and keys create prints a key and its YAML entry", async () => {
    const valid = await runBinary(TOLLGATE, ["config", "validate", "--config", join(dir, "tollgate.yaml")], {
      E2E_UPSTREAM_KEY: "x",
    })
    expect(valid.code).toBe(0)
    expect(valid.stdout.split("\n")[0]).toBe("ok")

    const created = await runBinary(TOLLGATE, ["keys", "create", "--tenant", "acme", "--id", "laptop"])
    expect(created.code).toBe(0)
    const secret = /tg_[0-9A-Za-z]{32}/.exec(created.stdout)?.[0]
    expect(secret).toBeDefined()
    expect(created.stdout).toContain("- id: laptop")
    expect(created.stdout).toContain(`sha256: ${hashKey(secret!)}`)
  })

  it("config validate exits 1 with one line per problem, each with its path", async () => {
    const bad = join(dir, "bad.yaml")
    writeFileSync(
      bad,
      stringify({
        pricing: { file: "pricing.yaml" },
        providers: {
          primary: { kind: "anthropic", base_url: "http://127.0.0.1:1", api_key_env: "E2E_UPSTREAM_KEY" },
        },
        routes: { claude: { api: "anthropic", targets: [{ provider: "foo", model: "m" }] } },
        tenants: {},
      }),
    )
    const result = await runBinary(TOLLGATE, ["config", "validate", "--config", bad], {
      E2E_UPSTREAM_KEY: "x",
    })
    expect(result.code).toBe(1)
    const lines = result.stderr.trim().split("\n")
    expect(lines).toContain('routes.claude.targets[0].provider: unknown provider "foo"')
    expect(new Set(lines).size).toBe(lines.length)
  })

  it("every command prints --help and exits 0", async () => {
    for (const args of [[], ["serve"], ["config", "validate"], ["keys", "create"], ["demo"]]) {
      const result = await runBinary(TOLLGATE, [...args, "--help"])
      expect(result.code, args.join(" ")).toBe(0)
      expect(result.stdout.length).toBeGreaterThan(0)
    }
    const fakeHelp = await runBinary(FAKEPROVIDER, ["--help"])
    expect(fakeHelp.code).toBe(0)
    expect(fakeHelp.stdout).toContain("--listen")
  })

  it("tollgate serve exits 0 on SIGTERM", async () => {
    const config = join(dir, "tollgate.yaml")
    const second = await startBinary(TOLLGATE, ["serve", "--config", config], {
      [GATEWAY_UPSTREAM_KEY_ENV]: "sk-e2e",
    })
    expect(await second.stop("SIGTERM")).toBe(0)
  })

  it("tollgate serve exits 1 when the config is invalid", async () => {
    const result = await runBinary(TOLLGATE, ["serve", "--config", join(dir, "missing.yaml")])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("missing.yaml")
  })
})
