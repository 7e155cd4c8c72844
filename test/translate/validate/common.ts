/** What the request validators share: the JSON guards and the problem list, started at the top level. */

export type Json = Record<string, unknown>
export const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
export const isString = (v: unknown): v is string => typeof v === "string"

/**
 * A validator's problem list with `bad` (adds one) and `onlyKeys` (an unknown field of `value` is one),
 * after checking `body`'s top-level fields against `topLevel` and its `model`.
 */
export const startProblems = (body: Json, topLevel: ReadonlySet<string>) => {
  const problems: Array<string> = []
  const bad = (path: string, why: string) => problems.push(`${path}: ${why}`)
  const onlyKeys = (value: Json, path: string, keys: ReadonlyArray<string>) => {
    for (const key of Object.keys(value)) if (!keys.includes(key)) bad(`${path}.${key}`, "unknown field")
  }
  for (const key of Object.keys(body)) if (!topLevel.has(key)) bad(key, "unknown field")
  if (!isString(body["model"]) || body["model"] === "") bad("model", "must be a non-empty string")
  return { problems, bad, onlyKeys }
}
