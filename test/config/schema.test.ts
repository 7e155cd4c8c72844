import { assert, describe, it } from "@effect/vitest"
import { Effect, Result, Schema } from "effect"
import { BaseUrl, Duration, Listen, Sha256Hex, UsdToMicro } from "../../src/config/primitives.js"
import { parseOptions } from "../../src/config/schema.js"
import { defaultMaxBufferedBytes } from "../../src/config/decode.js"
import { baseConfig, decode, HASH_A, patch, problemsOf } from "./fixtures.js"

const decodeLeaf = <A>(schema: Schema.Decoder<A>, value: unknown) =>
  Schema.decodeUnknownResult(schema)(value, parseOptions)

describe("durations", () => {
  it("convert each unit to milliseconds", () => {
    const cases: Array<[string, number]> = [
      ["250ms", 250],
      ["5s", 5_000],
      ["10m", 600_000],
      ["1h", 3_600_000],
      ["0s", 0],
      ["1.5s", 1_500],
    ]
    for (const [text, ms] of cases) assert.deepStrictEqual(decodeLeaf(Duration, text), Result.succeed(ms))
  })

  it("reject bare numbers, unknown units, signs and spaces inside", () => {
    for (const bad of [30, "30", "5d", "5 s", "-5s", "s", "", null, "1h30m"]) {
      assert.isTrue(Result.isFailure(decodeLeaf(Duration, bad)), JSON.stringify(bad))
    }
  })

  it.effect("report a bare number with its path", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(patch(baseConfig(), ["server", "shutdown_grace"], 30))
      assert.deepStrictEqual(problems, [
        "server.shutdown_grace: must be a duration with a unit, e.g. 250ms, 5s, 10m or 1h",
      ])
    }),
  )

  it.effect("timeouts refuse 0", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(patch(baseConfig(), ["timeouts", "idle"], "0ms"))
      assert.deepStrictEqual(problems, ["timeouts.idle: must be longer than 0ms"])
    }),
  )
})

describe("money", () => {
  it("converts USD to integer micro-USD", () => {
    const cases: Array<[number, number]> = [
      [0.000001, 1],
      [200, 200_000_000],
      [4.125, 4_125_000],
      [0.3, 300_000],
      [0, 0],
    ]
    for (const [usd, micro] of cases)
      assert.deepStrictEqual(decodeLeaf(UsdToMicro, usd), Result.succeed(micro))
  })

  it("rejects negatives, strings and non-finite numbers", () => {
    for (const bad of [-1, "5", Number.POSITIVE_INFINITY, Number.NaN, null]) {
      assert.isTrue(Result.isFailure(decodeLeaf(UsdToMicro, bad)), String(bad))
    }
  })

  it.effect("budget limit_usd is stored as micro-USD", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["tenants", "acme", "budgets"], {
        month: { limit_usd: 200, mode: "hard" },
        session: { limit_usd: 0.000001, mode: "soft" },
      })
      const { config } = yield* decode(raw)
      const budgets = config.tenants.get("acme")!.budgets
      assert.deepStrictEqual(budgets.month, { limitMicroUsd: 200_000_000, mode: "hard" })
      assert.deepStrictEqual(budgets.session, { limitMicroUsd: 1, mode: "soft" })
    }),
  )

  it.effect(
    "day and week budgets of the tenant and day, week, month budgets of a key decode to micro-USD",
    () =>
      Effect.gen(function* () {
        let raw = patch(baseConfig(), ["tenants", "acme", "budgets"], {
          day: { limit_usd: 5, mode: "hard" },
          week: { limit_usd: 20.5, mode: "soft" },
        })
        raw = patch(raw, ["tenants", "acme", "keys", 0, "budgets"], {
          day: { limit_usd: 0.25, mode: "hard" },
          month: { limit_usd: 100, mode: "soft" },
        })
        const { config } = yield* decode(raw)
        const acme = config.tenants.get("acme")!
        assert.deepStrictEqual(acme.budgets, {
          day: { limitMicroUsd: 5_000_000, mode: "hard" },
          week: { limitMicroUsd: 20_500_000, mode: "soft" },
          month: undefined,
          session: undefined,
        })
        assert.deepStrictEqual(acme.keys[0]!.budgets, {
          day: { limitMicroUsd: 250_000, mode: "hard" },
          week: undefined,
          month: { limitMicroUsd: 100_000_000, mode: "soft" },
        })
      }),
  )

  it.effect("bad day, week and key budgets are each reported with their path", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["tenants", "acme", "budgets"], {
        day: { limit_usd: -1, mode: "hard" },
        week: { limit_usd: 1 },
        year: { limit_usd: 1, mode: "hard" },
      })
      raw = patch(raw, ["tenants", "acme", "keys", 0, "budgets"], {
        day: { limit_usd: 1, mode: "strict" },
        session: { limit_usd: 1, mode: "hard" },
      })
      // All at once, each with its path (in the decoder's order; sorted here).
      assert.deepStrictEqual([...(yield* problemsOf(raw))].sort(), [
        "tenants.acme.budgets.day.limit_usd: must be a non-negative number of USD, e.g. 5 or 0.25",
        "tenants.acme.budgets.week.mode: is required",
        "tenants.acme.budgets.year: unknown key (expected one of: day, week, month, session)",
        'tenants.acme.keys[0].budgets.day.mode: must be "hard" or "soft"',
        "tenants.acme.keys[0].budgets.session: unknown key (expected one of: day, week, month)",
      ])
    }),
  )
})

describe("leaf values", () => {
  it("listen accepts host:port, port 0 and bracketed IPv6", () => {
    assert.deepStrictEqual(
      decodeLeaf(Listen, "127.0.0.1:8080"),
      Result.succeed({ host: "127.0.0.1", port: 8080 }),
    )
    assert.deepStrictEqual(decodeLeaf(Listen, "localhost:0"), Result.succeed({ host: "localhost", port: 0 }))
    assert.deepStrictEqual(decodeLeaf(Listen, "[::1]:65535"), Result.succeed({ host: "::1", port: 65535 }))
    for (const bad of ["8080", 8080, "host:65536", ":8080", "::1:8080", "host:-1", "host:port"]) {
      assert.isTrue(Result.isFailure(decodeLeaf(Listen, bad)), String(bad))
    }
  })

  it("base_url drops trailing slashes and needs http or https", () => {
    assert.deepStrictEqual(
      decodeLeaf(BaseUrl, "http://127.0.0.1:8091/"),
      Result.succeed("http://127.0.0.1:8091"),
    )
    assert.deepStrictEqual(
      decodeLeaf(BaseUrl, "https://proxy.example/v//"),
      Result.succeed("https://proxy.example/v"),
    )
    for (const bad of ["ftp://x", "localhost:11434", "", 5]) {
      assert.isTrue(Result.isFailure(decodeLeaf(BaseUrl, bad)), String(bad))
    }
  })

  it("sha256 accepts upper case and stores lower case", () => {
    assert.deepStrictEqual(decodeLeaf(Sha256Hex, "AB".repeat(32)), Result.succeed("ab".repeat(32)))
    assert.isTrue(Result.isFailure(decodeLeaf(Sha256Hex, "ab".repeat(31))))
    assert.isTrue(Result.isFailure(decodeLeaf(Sha256Hex, "g".repeat(64))))
  })
})

describe("unknown keys", () => {
  it.effect("are errors at the top level", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf({ ...baseConfig(), tenant: {} })
      assert.strictEqual(problems.length, 1)
      assert.match(problems[0]!, /^tenant: unknown key \(expected one of: server, .*tenants\)$/)
    }),
  )

  it.effect("are errors in every nested level", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["server", "listn"], "127.0.0.1:1")
      raw = patch(raw, ["providers", "anthropic", "api_key"], "sk-inline")
      raw = patch(raw, ["routes", "claude", "targets", 0, "priority"], 2)
      raw = patch(raw, ["routes", "claude", "timeouts"], { first_byte: "5s" })
      raw = patch(raw, ["tenants", "acme", "budgets"], {
        month: { limit_usd: 1, mode: "hard", rollover: true },
      })
      const problems = yield* problemsOf(raw)
      assert.deepStrictEqual(
        problems.map((line) => line.slice(0, line.indexOf(":"))),
        [
          "server.listn",
          "providers.anthropic.api_key",
          "routes.claude.timeouts.first_byte",
          "routes.claude.targets[0].priority",
          "tenants.acme.budgets.month.rollover",
        ],
      )
      assert.isTrue(problems.every((line) => line.includes(": unknown key (expected one of: ")))
    }),
  )

  it.effect("a key of another provider kind is unknown", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(
        patch(baseConfig(), ["providers", "local"], { kind: "ollama", api_key_env: "X" }),
      )
      assert.deepStrictEqual(problems, [
        "providers.local.api_key_env: unknown key (expected one of: kind, base_url)",
      ])
    }),
  )
})

describe("defaults", () => {
  it.effect("an empty config gets every default of the SPEC", () =>
    Effect.gen(function* () {
      const { config, warnings } = yield* decode(null)
      assert.deepStrictEqual(warnings, [
        "routes: none configured: the gateway will refuse every request (no route to serve it)",
        "tenants: none configured: the gateway will refuse every request (no tenant holds a key)",
      ])
      assert.strictEqual(config.path, "/etc/tollgate/tollgate.yaml")
      assert.deepStrictEqual(config.server, {
        host: "127.0.0.1",
        port: 8080,
        shutdownGraceMs: 30_000,
        maxBodyBytes: 10_485_760,
        maxBufferedBytes: defaultMaxBufferedBytes(),
        bodyTimeoutMs: 60_000,
        maxConnections: 10_000,
      })
      assert.isAtLeast(config.server.maxBufferedBytes, 64 * 1024 * 1024)
      assert.isAtMost(config.server.maxBufferedBytes, 1024 * 1024 * 1024)
      assert.deepStrictEqual(config.admin, { tokenEnv: "TOLLGATE_ADMIN_TOKEN" })
      assert.deepStrictEqual(config.store, { kind: "memory" })
      assert.strictEqual(config.usageFile, "/srv/tollgate/data/usage.jsonl")
      assert.strictEqual(config.keysFile, "/srv/tollgate/data/keys.jsonl")
      // Beside the config (ADR 0051); with inline prices no file is read.
      assert.strictEqual(config.pricingFile, "/etc/tollgate/pricing.yaml")
      assert.deepStrictEqual(config.reservation, { outputTokens: 4096 })
      assert.deepStrictEqual(config.retry, { maxAttempts: 3, budgetRatio: 0.1 })
      assert.deepStrictEqual(config.breaker, {
        minRequests: 20,
        failureRatio: 0.5,
        openForMs: 30_000,
        shared: false,
      })
      assert.deepStrictEqual(config.timeouts, {
        connectMs: 5_000,
        firstTokenMs: 60_000,
        idleMs: 60_000,
        totalMs: 600_000,
      })
      assert.deepStrictEqual(config.sessions, { derive: true, maxPerTenant: 10_000 })
      // Tracing is off until telemetry.otlp_endpoint is set.
      assert.deepStrictEqual(config.telemetry, {
        otlpEndpoint: undefined,
        otlpProtocol: "http/json",
        serviceName: "tollgate",
        sampleRatio: 1,
      })
      assert.strictEqual(config.providers.size, 0)
    }),
  )

  it.effect("empty (null) sections get their defaults", () =>
    Effect.gen(function* () {
      const { config } = yield* decode({ ...baseConfig(), server: null, retry: null, store: null })
      assert.strictEqual(config.server.port, 8080)
      assert.deepStrictEqual(config.store, { kind: "memory" })
    }),
  )

  it.effect("providers get the base_url and key env of their kind", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["providers"], {
        anthropic: { kind: "anthropic" },
        openai: { kind: "openai" },
        vertex: { kind: "vertex", project: "p", region: "us-east5" },
        everywhere: { kind: "vertex", project: "p", region: "global" },
        ci: {
          kind: "vertex",
          project: "p",
          region: "us-east5",
          base_url: "http://127.0.0.1:8092/",
          access_token_env: "VERTEX_TOKEN",
        },
        local: { kind: "ollama" },
      })
      const { config } = yield* decode(raw, {
        env: { ...{ ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o" }, VERTEX_TOKEN: "t" },
      })
      assert.deepStrictEqual(
        [...config.providers.values()],
        [
          {
            name: "anthropic",
            kind: "anthropic",
            baseUrl: "https://api.anthropic.com",
            apiKeyEnv: "ANTHROPIC_API_KEY",
          },
          { name: "openai", kind: "openai", baseUrl: "https://api.openai.com", apiKeyEnv: "OPENAI_API_KEY" },
          {
            name: "vertex",
            kind: "vertex",
            project: "p",
            region: "us-east5",
            baseUrl: "https://us-east5-aiplatform.googleapis.com",
            accessTokenEnv: undefined,
          },
          {
            name: "everywhere",
            kind: "vertex",
            project: "p",
            region: "global",
            baseUrl: "https://aiplatform.googleapis.com",
            accessTokenEnv: undefined,
          },
          {
            name: "ci",
            kind: "vertex",
            project: "p",
            region: "us-east5",
            baseUrl: "http://127.0.0.1:8092",
            accessTokenEnv: "VERTEX_TOKEN",
          },
          { name: "local", kind: "ollama", baseUrl: "http://localhost:11434" },
        ],
      )
    }),
  )

  it.effect("a redis store needs its url", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* problemsOf(patch(baseConfig(), ["store"], { kind: "redis" })), [
        "store.url: is required",
      ])
      const { config } = yield* decode(
        patch(baseConfig(), ["store"], { kind: "redis", url: "redis://r:6379/0" }),
      )
      assert.deepStrictEqual(config.store, {
        kind: "redis",
        url: "redis://r:6379/0",
        cluster: false,
        leaseRequests: 32,
      })
      const clustered = yield* decode(
        patch(baseConfig(), ["store"], {
          kind: "redis",
          url: "redis://r:7000",
          cluster: true,
          lease_requests: 1,
        }),
      )
      assert.deepStrictEqual(clustered.config.store, {
        kind: "redis",
        url: "redis://r:7000",
        cluster: true,
        leaseRequests: 1,
      })
      assert.deepStrictEqual(
        yield* problemsOf(
          patch(baseConfig(), ["store"], { kind: "redis", url: "redis://r", lease_requests: 0 }),
        ),
        ["store.lease_requests: must be a positive integer"],
      )
      assert.deepStrictEqual(
        yield* problemsOf(
          patch(baseConfig(), ["store"], { kind: "redis", url: "redis://r", cluster: "yes" }),
        ),
        ["store.cluster: must be true or false"],
      )
      assert.deepStrictEqual(
        yield* problemsOf(
          patch(baseConfig(), ["store"], { kind: "redis", url: "redis://r:7000/3", cluster: true }),
        ),
        [
          "store.url: a Redis Cluster has only database 0: leave the database number out with store.cluster: true",
        ],
      )
    }),
  )

  it.effect("tenants without limits or budgets have them undefined", () =>
    Effect.gen(function* () {
      const { config } = yield* decode(baseConfig())
      const acme = config.tenants.get("acme")!
      assert.deepStrictEqual(acme, {
        name: "acme",
        keys: [{ id: "ci", sha256: HASH_A, budgets: { day: undefined, week: undefined, month: undefined } }],
        routes: "*",
        limits: { requestsPerMinute: undefined, tokensPerMinute: undefined, concurrentRequests: undefined },
        budgets: { day: undefined, week: undefined, month: undefined, session: undefined },
      })
    }),
  )
})

describe("per-route overrides", () => {
  it.effect(
    "a route's budget_ratio is accepted and ignored with a warning: the retry budget is process-wide",
    () =>
      Effect.gen(function* () {
        const raw = patch(baseConfig(), ["routes", "claude", "retry"], { max_attempts: 4, budget_ratio: 0.5 })
        const { config, warnings } = yield* decode(raw)
        assert.deepStrictEqual(config.routes.get("claude")!.retry, { maxAttempts: 4, budgetRatio: 0.1 })
        assert.isTrue(warnings.some((w) => w.startsWith("routes.claude.retry.budget_ratio: ignored")))
      }),
  )

  it.effect("merge over the global retry and timeouts", () =>
    Effect.gen(function* () {
      let raw = patch(baseConfig(), ["retry"], { max_attempts: 5, budget_ratio: 0.2 })
      raw = patch(raw, ["timeouts"], { connect: "2s", idle: "30s" })
      raw = patch(raw, ["routes", "claude", "retry"], { max_attempts: 4 })
      raw = patch(raw, ["routes", "claude", "timeouts"], { first_token: "20s" })
      const { config } = yield* decode(raw)
      const claude = config.routes.get("claude")!
      assert.deepStrictEqual(claude.retry, { maxAttempts: 4, budgetRatio: 0.2 })
      assert.deepStrictEqual(claude.timeouts, {
        connectMs: 2_000,
        firstTokenMs: 20_000,
        idleMs: 30_000,
        totalMs: 600_000,
      })
      const gpt = config.routes.get("gpt")!
      assert.deepStrictEqual(gpt.retry, config.retry)
      assert.deepStrictEqual(gpt.timeouts, config.timeouts)
    }),
  )
})

describe("telemetry", () => {
  it.effect("decodes every key; the endpoint loses its trailing slash", () =>
    Effect.gen(function* () {
      const raw = patch(baseConfig(), ["telemetry"], {
        otlp_endpoint: "http://127.0.0.1:4318/",
        otlp_protocol: "http/protobuf",
        service_name: "gateway-eu",
        sample_ratio: 0.1,
      })
      const { config } = yield* decode(raw)
      assert.deepStrictEqual(config.telemetry, {
        otlpEndpoint: "http://127.0.0.1:4318",
        otlpProtocol: "http/protobuf",
        serviceName: "gateway-eu",
        sampleRatio: 0.1,
      })
    }),
  )

  it.effect("an endpoint alone gets the other defaults", () =>
    Effect.gen(function* () {
      const { config } = yield* decode(
        patch(baseConfig(), ["telemetry"], { otlp_endpoint: "https://otel.internal:4318" }),
      )
      assert.deepStrictEqual(config.telemetry, {
        otlpEndpoint: "https://otel.internal:4318",
        otlpProtocol: "http/json",
        serviceName: "tollgate",
        sampleRatio: 1,
      })
    }),
  )

  it.effect("sample_ratio may be 0 or 1", () =>
    Effect.gen(function* () {
      for (const ratio of [0, 1]) {
        const { config } = yield* decode(patch(baseConfig(), ["telemetry", "sample_ratio"], ratio))
        assert.strictEqual(config.telemetry.sampleRatio, ratio)
      }
    }),
  )

  it.effect("reports each bad value with its path", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(
        patch(baseConfig(), ["telemetry"], {
          otlp_endpoint: "grpc://127.0.0.1:4317",
          otlp_protocol: "grpc",
          service_name: " tollgate",
          sample_ratio: 1.5,
        }),
      )
      assert.deepStrictEqual(problems, [
        "telemetry.otlp_endpoint: must be an http:// or https:// URL without credentials, query or fragment, e.g. http://127.0.0.1:4318 (a collector token goes in OTEL_EXPORTER_OTLP_HEADERS)",
        'telemetry.otlp_protocol: must be "http/json" or "http/protobuf"',
        "telemetry.service_name: must be a non-empty string without leading or trailing spaces",
        "telemetry.sample_ratio: must be a number from 0 to 1",
      ])
    }),
  )

  it.effect(
    "otlp_endpoint takes no credentials, query or fragment (fetch refuses credentials; /v1/traces is appended)",
    () =>
      Effect.gen(function* () {
        for (const url of [
          "https://user:token@otel.example.com",
          "https://otel.example.com/?api_key=x",
          "https://otel.example.com/#x",
        ]) {
          assert.deepStrictEqual(
            yield* problemsOf(patch(baseConfig(), ["telemetry"], { otlp_endpoint: url })),
            [
              "telemetry.otlp_endpoint: must be an http:// or https:// URL without credentials, query or fragment, e.g. http://127.0.0.1:4318 (a collector token goes in OTEL_EXPORTER_OTLP_HEADERS)",
            ],
          )
        }
      }),
  )

  it.effect("breaker.shared needs the Redis store", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* problemsOf(patch(baseConfig(), ["breaker"], { shared: true })), [
        "breaker.shared: needs store.kind: redis (the copies share their breakers through the limit store's Redis)",
      ])
      const { config } = yield* decode(
        patch(patch(baseConfig(), ["breaker"], { shared: true }), ["store"], {
          kind: "redis",
          url: "redis://r:6379/0",
        }),
      )
      assert.strictEqual(config.breaker.shared, true)
    }),
  )

  it.effect("an unknown key is an error", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(patch(baseConfig(), ["telemetry", "otlp_headers"], { a: "b" }))
      assert.strictEqual(problems.length, 1)
      assert.match(problems[0]!, /^telemetry\.otlp_headers: unknown key \(expected one of: otlp_endpoint, /)
    }),
  )
})
