import { describe, expect, it } from "vitest"
import { keyCreatedText } from "../../src/cli/keysCommand.js"
import { generateKey, hashKey } from "../../src/keys/keys.js"

describe("tollgate keys create", () => {
  it("says that POST /admin/keys makes keys without a restart, and still ends with the YAML entry", () => {
    const secret = generateKey()
    const text = keyCreatedText("acme", "ci", secret)
    const lines = text.split("\n")
    expect(
      lines.filter((line) => line.includes("POST /admin/keys") && line.includes("without a restart")),
    ).toHaveLength(1)
    expect(text.split(secret)).toHaveLength(2)
    expect(text.endsWith(`- id: ci\n  sha256: ${hashKey(secret)}`)).toBe(true)
  })
})
