/**
 * The one error of configuration loading and how its `path: message` lines are made.
 */
import { ParseResult, Schema } from "effect"

/**
 * The config or the price table is invalid. `problems` holds every problem found, one line
 * each, `path: message` (e.g. `routes.claude.targets[2].provider: unknown provider "foo"`).
 */
export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  problems: Schema.Array(Schema.String),
}) {
  override get message(): string {
    return `invalid configuration:\n${this.problems.join("\n")}`
  }
}

const plainKey = /^[A-Za-z0-9_-]+$/

/**
 * Renders a path as config readers write it: `routes.claude.targets[2].provider`; names that
 * are not plain words are quoted (`routes["gpt-4.1"]`).
 */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((segment, index) => {
      if (typeof segment === "number") return `[${segment}]`
      const name = String(segment)
      if (!plainKey.test(name)) return `[${JSON.stringify(name)}]`
      return index === 0 ? name : `.${name}`
    })
    .join("")

const unexpected = /^is unexpected, expected: (.*)$/s

/** Effect's wording → the wording of `config validate`. */
const rewordIssue = (issue: ParseResult.ArrayFormatterIssue): string => {
  if (issue._tag === "Missing") return "is required"
  if (issue._tag === "Unexpected") {
    const expected = unexpected.exec(issue.message)?.[1]
    const names =
      expected === undefined ? [] : expected.split(" | ").map((name) => name.replace(/^"|"$/g, ""))
    return names.length === 0 ? "unknown key" : `unknown key (expected one of: ${names.join(", ")})`
  }
  return issue.message
}

/** A parse issue with the wording of `config validate`. */
export interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** The issues of a Schema parse error, in document order. */
export const parseErrorIssues = (error: ParseResult.ParseError): Array<Issue> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({
    path: issue.path,
    message: rewordIssue(issue),
  }))

/** One `path: message` line per issue (duplicates dropped), `prefix` prepended to each path. */
export const parseErrorProblems = (
  error: ParseResult.ParseError,
  prefix: ReadonlyArray<PropertyKey>,
): Array<string> => [
  ...new Set(
    parseErrorIssues(error).map((issue) => `${formatPath([...prefix, ...issue.path])}: ${issue.message}`),
  ),
]
