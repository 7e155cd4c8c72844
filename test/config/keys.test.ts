import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import { parse } from "yaml"
import { keyCreatedText, keyEntryYaml } from "../../src/cli/keysCommand.js"
import { generateKey, generateKeyId, hashKey, keyPattern, randomString } from "../../src/keys/keys.js"

describe("generateKey", () => {
  it("is tg_ and 32 base62 characters", () => {
    for (let i = 0; i < 200; i++) expect(generateKey()).toMatch(/^tg_[0-9A-Za-z]{32}$/)
    expect(keyPattern.test(generateKey())).toBe(true)
  })

  it("does not repeat", () => {
    const keys = new Set(Array.from({ length: 1000 }, generateKey))
    expect(keys.size).toBe(1000)
  })

  it("draws every base62 character about equally often", () => {
    const counts = new Map<string, number>()
    const samples = 2000
    for (let i = 0; i < samples; i++) {
      for (const char of generateKey().slice(3)) counts.set(char, (counts.get(char) ?? 0) + 1)
    }
    expect(counts.size).toBe(62)
    const expected = (samples * 32) / 62
    // Each count is binomial with sd ≈ 32; ±30 % is more than 9 sd, so only a real bias fails this.
    for (const count of counts.values()) {
      expect(count).toBeGreaterThan(expected * 0.7)
      expect(count).toBeLessThan(expected * 1.3)
    }
  })
})

describe("randomString and generateKeyId", () => {
  it("uses only the alphabet and the requested length", () => {
    expect(randomString("ab", 64)).toMatch(/^[ab]{64}$/)
    expect(randomString("0123456789", 0)).toBe("")
  })

  it("key ids are key- and 8 lower-case base36 characters", () => {
    for (let i = 0; i < 100; i++) expect(generateKeyId()).toMatch(/^key-[0-9a-z]{8}$/)
  })
})

describe("hashKey", () => {
  it("is the lower-case hex SHA-256 of the secret, as node's crypto computes it", () => {
    const key = generateKey()
    expect(hashKey(key)).toBe(createHash("sha256").update(key).digest("hex"))
    expect(hashKey("test")).toBe("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
  })
})

describe("keys create output", () => {
  it("is the YAML list entry to paste under a tenant's keys", () => {
    const hash = "ab".repeat(32)
    expect(keyEntryYaml("ci", hash)).toBe(`- id: ci\n  sha256: ${hash}`)
    expect(parse(keyEntryYaml("my key: 1", hash))).toEqual([{ id: "my key: 1", sha256: hash }])
  })

  it("shows the secret once and the entry with its hash", () => {
    const secret = generateKey()
    const text = keyCreatedText("acme", "ci", secret)
    expect(text.split(secret).length - 1).toBe(1)
    expect(text).toContain("tenants.acme.keys")
    expect(text.endsWith(`- id: ci\n  sha256: ${hashKey(secret)}`)).toBe(true)
  })
})
