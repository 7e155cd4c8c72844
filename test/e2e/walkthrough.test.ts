import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parse } from "yaml"
import { FAKEPROVIDER, ROOT, runBinary, startBinary, TOLLGATE, type Running } from "../support/processes.js"
import { tempDir } from "../support/tempDirs.js"

/**
 * The "Repeat a failure" walkthrough of docs/reliability.md, run as the page
 * writes it: its commands, its config file and its curl request are read from
 * the page, so the page cannot drift from what works. Only the ports change
 * (free ports instead of 8080, 8090 and 8091) and the config lives in a
 * temporary folder instead of /tmp/fallback.yaml.
 */

const DOC = join(ROOT, "docs/reliability.md")
const SHA_PLACEHOLDER = "PASTE_THE_SHA256_FROM_KEYS_CREATE"

interface Walkthrough {
  readonly keysCreate: ReadonlyArray<string>
  /** The two fakeprovider command lines, in the page's order. */
  readonly fakes: ReadonlyArray<ReadonlyArray<string>>
  readonly serveEnv: Record<string, string>
  readonly serve: ReadonlyArray<string>
  readonly config: string
  readonly curl: { readonly url: string; readonly headers: Record<string, string>; readonly body: string }
}

const must = <T>(value: T | null | undefined, what: string): T => {
  if (value === null || value === undefined)
    throw new Error(`docs/reliability.md "Repeat a failure": no ${what}`)
  return value
}

const words = (line: string): Array<string> => line.trim().split(/\s+/)

/** Reads the walkthrough's commands, config and request from the page. */
const readWalkthrough = (): Walkthrough => {
  const text = readFileSync(DOC, "utf8")
  const start = text.indexOf("\n## Repeat a failure")
  const end = text.indexOf("\n## ", start + 1)
  const section = text.slice(must(start >= 0 ? start : undefined, "section"), end === -1 ? undefined : end)
  const keysCreate = words(must(/\.\/bin\/tollgate (keys create .+)$/m.exec(section), "keys create line")[1]!)
  const fakes = [...section.matchAll(/^\s*\.\/bin\/fakeprovider (.+)$/gm)].map((m) => words(m[1]!))
  const serveLine = must(/^\s*((?:\w+=\S+ )*)\.\/bin\/tollgate (serve .+)$/m.exec(section), "serve line")
  const serveEnv = Object.fromEntries(
    words(serveLine[1]!)
      .filter(Boolean)
      .map((kv) => kv.split("=", 2)),
  )
  const config = must(/```yaml\n([\s\S]*?)```/.exec(section), "yaml block")[1]!
  const curlText = must(/^\s*curl -i ([\s\S]*?)\n\s*```/m.exec(section), "curl block")[1]!.replace(
    /\\\n/g,
    " ",
  )
  const headers = Object.fromEntries(
    [...curlText.matchAll(/-H "([^"]+)"/g)].map((m) => {
      const at = m[1]!.indexOf(":")
      return [m[1]!.slice(0, at).trim(), m[1]!.slice(at + 1).trim()]
    }),
  )
  const curl = {
    url: must(/^(\S+)/.exec(curlText), "curl URL")[1]!,
    headers,
    body: must(/-d '([^']*)'/.exec(curlText), "curl body")[1]!,
  }
  return { keysCreate, fakes, serveEnv, serve: words(serveLine[2]!), config, curl }
}

/** The flags of a fakeprovider line with its listen address on a free port; returns the page's address too. */
const onFreePort = (args: ReadonlyArray<string>): { args: Array<string>; address: string } => {
  const at = args.findIndex((a) => a === "-listen" || a === "--listen")
  const address = must(args[at + 1], "-listen address on a fakeprovider line")
  return { args: args.map((a, i) => (i === at + 1 ? "127.0.0.1:0" : a)), address }
}

describe("docs/reliability.md: Repeat a failure", () => {
  const page = readWalkthrough()
  const dir = tempDir("tollgate-walkthrough-")
  const configFile = join(dir, "fallback.yaml")
  const running: Array<Running> = []
  let gateway: Running
  let secret: string
  let backupName: string

  beforeAll(async () => {
    // The page runs everything from the repository root (the price table is config/pricing.yaml there).
    if (process.cwd() !== ROOT) process.chdir(ROOT)
    const created = await runBinary(TOLLGATE, page.keysCreate)
    expect(created.code).toBe(0)
    secret = must(/tg_[0-9A-Za-z]{32}/.exec(created.stdout)?.[0], "secret printed by keys create")
    const sha256 = must(/sha256: ([0-9a-f]{64})/.exec(created.stdout)?.[1], "sha256 printed by keys create")

    expect(page.fakes).toHaveLength(2)
    let config = page.config
      .replace(SHA_PLACEHOLDER, sha256)
      .replace(/listen: 127\.0\.0\.1:\d+/, "listen: 127.0.0.1:0")
    for (const line of page.fakes) {
      const { args, address } = onFreePort(line)
      const fake = await startBinary(FAKEPROVIDER, args)
      running.push(fake)
      expect(config).toContain(`http://${address}`)
      config = config.replaceAll(`http://${address}`, fake.url)
    }
    writeFileSync(configFile, config)
    const parsed = parse(config) as {
      routes: Record<string, { targets: Array<{ provider: string }> }>
    }
    backupName = Object.values(parsed.routes)[0]!.targets[1]!.provider

    const serveArgs = page.serve.map((a) => (a.endsWith(".yaml") ? configFile : a))
    gateway = await startBinary(TOLLGATE, serveArgs, page.serveEnv)
    running.push(gateway)
  })

  afterAll(async () => {
    await Promise.all(running.map((binary) => binary.stop("SIGTERM")))
  })

  const send = (extra: Record<string, string> = {}) => {
    const path = new URL(page.curl.url).pathname
    const headers = Object.fromEntries(
      Object.entries(page.curl.headers).map(([name, value]) => [
        name,
        value.replace("$TOLLGATE_KEY", secret),
      ]),
    )
    return fetch(`${gateway.url}${path}`, {
      method: "POST",
      headers: { ...headers, ...extra },
      body: page.curl.body,
    })
  }

  const fakeRequests = async (fake: Running): Promise<number> => {
    const response = await fetch(`${fake.url}/_fake/requests`)
    return ((await response.json()) as { count: number }).count
  }

  it("config validate accepts the page's config", async () => {
    const result = await runBinary(TOLLGATE, ["config", "validate", "--config", configFile], page.serveEnv)
    expect(result.code).toBe(0)
    expect(result.stdout.split("\n")[0]).toBe("ok")
  })

  it("the quick-start request gets the second provider's name and x-tollgate-attempts: 2", async () => {
    const before = [await fakeRequests(running[0]!), await fakeRequests(running[1]!)]
    const response = await send()
    const body = (await response.json()) as { type: string; model: string }
    expect(response.status).toBe(200)
    expect(backupName).toBe("backup")
    expect(response.headers.get("x-tollgate-provider")).toBe(backupName)
    expect(response.headers.get("x-tollgate-attempts")).toBe("2")
    expect(response.headers.get("x-tollgate-model")).toBe("claude-sonnet-5-5")
    expect(body).toMatchObject({ type: "message", model: "claude-sonnet-5-5" })
    // One request reached each fake: the 529 was not retried on the same target.
    expect([await fakeRequests(running[0]!), await fakeRequests(running[1]!)]).toEqual([
      before[0]! + 1,
      before[1]! + 1,
    ])
    const records = readFileSync(join(dir, "fallback-usage.jsonl"), "utf8").trim().split("\n")
    expect(JSON.parse(records.at(-1)!)).toMatchObject({
      tenant: "acme",
      key_id: "walkthrough",
      route: "claude-sonnet",
      provider: backupName,
      attempts: 2,
      status: 200,
    })
  })

  it("x-fake-scenario: status:529 reaches both providers; the last 529 goes back unchanged", async () => {
    const response = await send({ "x-fake-scenario": "status:529" })
    const text = await response.text()
    expect(response.status).toBe(529)
    expect(response.headers.get("x-tollgate-provider")).toBe(backupName)
    expect(response.headers.get("x-tollgate-attempts")).toBe("2")
    expect(JSON.parse(text)).toMatchObject({ type: "error", error: { type: "overloaded_error" } })
  })
})
