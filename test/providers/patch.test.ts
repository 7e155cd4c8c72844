import { describe, expect, it } from "vitest"
import { findMember, removeMember, setMember } from "../../src/providers/patch.js"

const patched = (body: string, key: string, json: string) =>
  setMember(Buffer.from(body), key, json).toString("utf8")

describe("byte patches of a client body", () => {
  it("replaces a top-level value and leaves every other byte as sent", () => {
    const body = '{ "model" : "claude",\n "max_tokens":1e3, "x":{"model":"inner"}, "s":"a\\"model\\"" }'
    expect(patched(body, "model", '"claude-sonnet-5-5"')).toBe(
      '{ "model" : "claude-sonnet-5-5",\n "max_tokens":1e3, "x":{"model":"inner"}, "s":"a\\"model\\"" }',
    )
  })

  it("adds an absent member first, in empty and non-empty objects", () => {
    expect(patched("{}", "anthropic_version", '"v"')).toBe('{"anthropic_version":"v"}')
    expect(patched('{"a":1}', "b", "2")).toBe('{"b":2,"a":1}')
  })

  it("collapses duplicate keys, so the upstream sees exactly one model", () => {
    const out = patched('{"model":"a","x":1,"model":"b"}', "model", '"chosen"')
    expect(out.match(/"model"/g)).toHaveLength(1)
    expect(JSON.parse(out)).toEqual({ model: "chosen", x: 1 })
  })

  it("finds keys written with escapes, and removes members with their comma", () => {
    expect(findMember(Buffer.from('{"mod\\u0065l":"a"}'), "model")).toBeDefined()
    expect(removeMember(Buffer.from('{"model":"a","b":1}'), "model").toString()).toBe('{"b":1}')
    expect(removeMember(Buffer.from('{"b":1, "model":"a"}'), "model").toString()).toBe('{"b":1}')
  })
})
