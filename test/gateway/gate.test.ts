import { describe, expect, it } from "vitest"
import type { TenantConfig } from "../../src/config/model.js"
import { BudgetExceeded, RateLimited } from "../../src/domain/errors.js"
import { makeBufferBudget } from "../../src/ops/BodyBuffers.js"
import { makeGate } from "../../src/limits/gate.js"
import { tenantConfig } from "../support/tenants.js"

const tenant = (
  name: string,
  limits: Partial<TenantConfig["limits"]> = {},
  month?: { limitMicroUsd: number; mode: "hard" | "soft" },
): TenantConfig => tenantConfig(name, limits, month === undefined ? {} : { month })

describe("the buffer budget", () => {
  it("holds at most the cap in total and half of it per tenant, and gives bytes back", () => {
    const budget = makeBufferBudget(100)
    expect(budget.take("a", 50)).toBe(true)
    expect(budget.take("a", 1)).toBe(false) // a's half is full
    expect(budget.take("b", 40)).toBe(true)
    expect(budget.take("c", 11)).toBe(false) // the total would pass 100
    expect(budget.take("c", 10)).toBe(true)
    expect(budget.held()).toBe(100)
    budget.give("a", 50)
    expect(budget.held()).toBe(50)
    expect(budget.take("a", 50)).toBe(true)
    expect(budget.take("b", 10)).toBe(false) // total again at 100
  })

  it("with one tenant configured, that tenant may hold the whole cap", () => {
    const budget = makeBufferBudget(100, () => 1)
    expect(budget.take("only", 100)).toBe(true)
    expect(budget.take("only", 1)).toBe(false)
  })
})

describe("admission before the body", () => {
  it("concurrent_requests: the tenant's requests in flight are capped, other tenants are not", () => {
    const gate = makeGate(() => 0)
    const a = tenant("a", { concurrentRequests: 2 })
    const b = tenant("b")
    expect(gate.enter(a, "/v1/messages")).toBeUndefined()
    expect(gate.enter(a, "/v1/messages")).toBeUndefined()
    const refused = gate.enter(a, "/v1/messages")
    expect(refused).toBeInstanceOf(RateLimited)
    expect((refused as RateLimited).message).toContain("concurrent_requests")
    for (let i = 0; i < 100; i++) expect(gate.enter(b, "/v1/messages")).toBeUndefined()
    gate.leave(a)
    expect(gate.inFlight("a")).toBe(1)
    expect(gate.enter(a, "/v1/messages")).toBeUndefined()
    expect(gate.inFlight("a")).toBe(2)
  })

  it("after the store refused for the request limit, the tenant is refused until its retry-after", () => {
    let now = 1_000_000
    const gate = makeGate(() => now)
    const a = tenant("a", { requestsPerMinute: 1 })
    gate.learnRequestLimit(
      a,
      new RateLimited({ message: "requests_per_minute exceeded", retryAfterSeconds: 3 }),
      now + 3_000,
    )
    const refused = gate.enter(a, "/v1/messages") as RateLimited
    expect(refused).toBeInstanceOf(RateLimited)
    expect(refused.retryAfterSeconds).toBe(3)
    now += 2_500
    expect((gate.enter(a, "/v1/messages") as RateLimited).retryAfterSeconds).toBe(1)
    now += 500
    expect(gate.enter(a, "/v1/messages")).toBeUndefined()
  })

  it("a settled month spend at a hard limit refuses until the month ends; count_tokens and soft budgets pass", () => {
    let now = Date.UTC(2026, 11, 31, 23, 59)
    const gate = makeGate(() => now)
    const hard = tenant("hard", {}, { limitMicroUsd: 100, mode: "hard" })
    const soft = tenant("soft", {}, { limitMicroUsd: 100, mode: "soft" })
    gate.learnMonthSpend(hard, "2026-12", 99)
    expect(gate.enter(hard, "/v1/messages")).toBeUndefined()
    gate.learnMonthSpend(hard, "2026-12", 100)
    gate.learnMonthSpend(hard, "2026-12", 50) // an older answer never lowers what is known
    expect(gate.enter(hard, "/v1/chat/completions")).toBeInstanceOf(BudgetExceeded)
    expect(gate.enter(hard, "/v1/messages/count_tokens")).toBeUndefined()
    gate.learnMonthSpend(soft, "2026-12", 1_000)
    expect(gate.enter(soft, "/v1/messages")).toBeUndefined()
    now = Date.UTC(2027, 0, 1, 0, 0, 1)
    expect(gate.enter(hard, "/v1/messages")).toBeUndefined()
    // A late answer about December (read before midnight) does not lock January.
    gate.learnMonthSpend(hard, "2027-01", 0)
    gate.learnMonthSpend(hard, "2026-12", 100)
    expect(gate.enter(hard, "/v1/messages")).toBeUndefined()
  })
})
