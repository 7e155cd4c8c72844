/**
 * Issue #17 "Diagnostics": a 502 names the low-level cause of each target
 * that got no response — a refused connection, an unknown host, a TLS
 * failure — in its body and in the one `warn` request line of the log.
 */
import { Effect, Exit, Layer, Scope } from "effect"
import { readFileSync } from "node:fs"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { errors as undiciErrors } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerTo } from "../../src/ops/logger.js"
import { captureLog } from "../support/logTarget.js"
import { describeUpstreamError } from "../../src/providers/transport.js"
import { eventually, startHarness, UPSTREAM_KEY, UPSTREAM_KEY_ENV, type Harness } from "../support/harness.js"

const FIXTURES = join(import.meta.dirname, "../fixtures")

interface Target {
  readonly provider: string
  readonly model: string
  readonly outcome: string
  readonly reason: string
  readonly cause?: string
}

describe("the causes of a 502", () => {
  // The log, captured: every line the JSON log layer writes while it is open.
  const log = captureLog()
  const logScope = Effect.runSync(Scope.make())
  let tls: Server
  let h: Harness

  beforeAll(async () => {
    // The log layer is the process's: while it is open, the in-process gateway writes its request lines there.
    await Effect.runPromise(
      Layer.buildWithScope(
        layerTo(() => log.target),
        logScope,
      ),
    )
    tls = createServer(
      {
        key: readFileSync(join(FIXTURES, "self-signed.key.pem")),
        cert: readFileSync(join(FIXTURES, "self-signed.cert.pem")),
      },
      (_req, res) => res.end("{}"),
    )
    await new Promise<void>((resolve) => tls.listen(0, "127.0.0.1", resolve))
    const tlsUrl = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`
    const provider = (base_url: string) => ({ kind: "anthropic", base_url, api_key_env: UPSTREAM_KEY_ENV })
    const route = (...providers: Array<string>) => ({
      api: "anthropic",
      targets: providers.map((provider) => ({ provider, model: "claude-sonnet-5-5" })),
    })
    h = await startHarness({
      // The gateway's least level stays at warn (the harness default): a 200's info line is not written.
      config: (fakes, keyHash, dir) => ({
        server: { listen: "127.0.0.1:0" },
        usage: { file: join(dir, "usage.jsonl") },
        providers: {
          up: provider(fakes[0]!),
          refused: provider("http://127.0.0.1:9"),
          unknown: provider("http://no-such-host.invalid"),
          // userinfo in a base URL never reaches a cause
          untrusted: provider(tlsUrl.replace("https://", "https://tg-user:tg-pass@")),
        },
        routes: {
          ok: route("up"),
          refused: route("refused"),
          unknown: route("unknown"),
          untrusted: route("untrusted"),
          all: route("refused", "unknown", "untrusted"),
        },
        tenants: { acme: { keys: [{ id: "ci", sha256: keyHash }], routes: "*" } },
      }),
    })
  })

  afterAll(async () => {
    await h?.close()
    await new Promise((resolve) => tls?.close(resolve))
    await Effect.runPromise(Scope.close(logScope, Exit.void))
  })

  const post = async (model: string) => {
    const res = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": h.key, "content-type": "application/json" },
      body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    })
    const body = (await res.json()) as { error: { type: string; targets?: Array<Target> } }
    return { status: res.status, id: res.headers.get("x-request-id")!, body }
  }

  /** The request lines of request `id`, once its line is written (the log writes on the next turn). */
  const requestLines = async (id: string) => {
    const of = () =>
      log
        .lines()
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.message === "request" && line.request_id === id)
    await eventually(() => of().length > 0)
    // A second line would come in the same write.
    return of()
  }

  const expectCause = async (model: string, cause: RegExp) => {
    const { status, id, body } = await post(model)
    expect(status).toBe(502)
    expect(body.error.type).toBe("api_error")
    expect(body.error.targets).toEqual([
      {
        provider: model,
        model: "claude-sonnet-5-5",
        outcome: "failed",
        reason: "connection_failed",
        cause: expect.stringMatching(cause),
      },
    ])
    const lines = await requestLines(id)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: "warn", status: 502, error: "no_upstream_response" })
    expect(lines[0]!.targets).toEqual(body.error.targets)
    return body.error.targets![0]!.cause!
  }

  it("a refused connection: the system error, with the address", async () => {
    expect(await expectCause("refused", /^connect ECONNREFUSED 127\.0\.0\.1:9$/)).toBeTruthy()
  })

  it("an unknown host: the resolver's error, with the host name", async () => {
    expect(
      await expectCause("unknown", /^getaddrinfo (ENOTFOUND|EAI_AGAIN) no-such-host\.invalid$/),
    ).toBeTruthy()
  })

  it("a TLS failure: the TLS error's code and message, and no userinfo of the base URL", async () => {
    const cause = await expectCause("untrusted", /^DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate/)
    expect(cause).not.toMatch(/tg-user|tg-pass/)
    expect(cause.length).toBeLessThanOrEqual(200)
  })

  it("a route whose every target fails: one cause per target, in one warn line", async () => {
    const { status, id, body } = await post("all")
    expect(status).toBe(502)
    expect(body.error.targets!.map((t) => [t.provider, t.reason, t.cause?.split(" ")[0]])).toEqual([
      ["refused", "connection_failed", "connect"],
      ["unknown", "connection_failed", "getaddrinfo"],
      ["untrusted", "connection_failed", "DEPTH_ZERO_SELF_SIGNED_CERT:"],
    ])
    const lines = await requestLines(id)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: "warn", attempts: 3, targets: body.error.targets })
  })

  it("never puts the upstream key in a body or a log line", () => {
    expect(log.lines().join("\n")).not.toContain(UPSTREAM_KEY)
    expect(h.records().length).toBeGreaterThan(0)
  })

  it("writes no info line below the gateway's least level (a 200 at warn)", async () => {
    const { status, id } = await post("ok")
    expect(status).toBe(200)
    // Lines of one turn leave together on the next: a 502 logged after the 200 is written after it too.
    const later = await post("refused")
    await requestLines(later.id)
    expect(log.lines().filter((line) => line.includes(id))).toEqual([])
  })
})

describe("describeUpstreamError", () => {
  const coded = (message: string, code: string, extra: Record<string, unknown> = {}) =>
    Object.assign(new Error(message), { code }, extra)

  it("a connect timeout: the timeout in force and the address tried", () => {
    const error = new undiciErrors.ConnectTimeoutError(
      "Connect Timeout Error (attempted address: api.example.com:443, timeout: 5000ms)",
    )
    expect(describeUpstreamError(error, 5000)).toBe("connect timeout after 5000 ms (api.example.com:443)")
  })

  it("a system error keeps its own message; another error gets its code in front", () => {
    expect(describeUpstreamError(coded("read ECONNRESET", "ECONNRESET"))).toBe("read ECONNRESET")
    expect(describeUpstreamError(coded("certificate has expired", "CERT_HAS_EXPIRED"))).toBe(
      "CERT_HAS_EXPIRED: certificate has expired",
    )
  })

  it("a socket the upstream closed names its peer", () => {
    const error = coded("other side closed", "UND_ERR_SOCKET", {
      socket: { remoteAddress: "10.0.0.7", remotePort: 443 },
    })
    expect(describeUpstreamError(error)).toBe("UND_ERR_SOCKET: other side closed (10.0.0.7:443)")
  })

  it("a wrapper says its innermost cause; an AggregateError the messages of its errors", () => {
    const wrapped = new TypeError("fetch failed", {
      cause: coded("connect ECONNREFUSED ::1:9", "ECONNREFUSED"),
    })
    expect(describeUpstreamError(wrapped)).toBe("connect ECONNREFUSED ::1:9")
    const aggregate = Object.assign(
      new AggregateError(
        [new Error("connect ECONNREFUSED ::1:9"), new Error("connect ECONNREFUSED 127.0.0.1:9")],
        "",
      ),
      { code: "ECONNREFUSED" },
    )
    expect(describeUpstreamError(aggregate)).toBe(
      "connect ECONNREFUSED ::1:9; connect ECONNREFUSED 127.0.0.1:9",
    )
  })

  it("strips the userinfo of any URL, keeps one line, and stops at 200 characters", () => {
    const error = new Error(
      `bad upstream https://alice:s3cret@api.example.com/v1\nsecond line ${"x".repeat(300)}`,
    )
    const text = describeUpstreamError(error)
    expect(text).toMatch(/^bad upstream https:\/\/api\.example\.com\/v1 second line x+…$/)
    expect(text).not.toContain("s3cret")
    expect(text).toHaveLength(200)
  })
})
