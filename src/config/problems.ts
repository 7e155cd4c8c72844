/**
 * The one error of configuration loading and how its `path: message` lines are made.
 */
import { Schema, SchemaAST, SchemaIssue } from "effect"

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

/**
 * Effect's wording of the leaf issues → the wording of `config validate`. A `message`
 * annotation (see `primitives.ts` and `schema.ts`) wins; a missing key "is required"; an
 * unexpected key lists the keys its mapping accepts, as written in the file.
 */
const leafHook: SchemaIssue.LeafHook = (issue) => {
  if (issue._tag === "MissingKey") return "is required"
  if (issue._tag === "UnexpectedKey") {
    const names = SchemaAST.isObjects(issue.ast)
      ? issue.ast.propertySignatures.map((signature) => String(signature.name))
      : []
    return names.length === 0 ? "unknown key" : `unknown key (expected one of: ${names.join(", ")})`
  }
  return SchemaIssue.defaultLeafHook(issue)
}

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1({ leafHook })

/** A parse issue with the wording of `config validate`. */
export interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** The issues of a Schema parse error, in document order. */
export const parseErrorIssues = (error: Schema.SchemaError): Array<Issue> =>
  formatIssue(error.issue).issues.map((issue) => ({
    path: (issue.path ?? []).map((segment) => (typeof segment === "object" ? segment.key : segment)),
    message: issue.message,
  }))

/** One `path: message` line per issue (duplicates dropped), `prefix` prepended to each path. */
export const parseErrorProblems = (
  error: Schema.SchemaError,
  prefix: ReadonlyArray<PropertyKey>,
): Array<string> => [
  ...new Set(
    parseErrorIssues(error).map((issue) => `${formatPath([...prefix, ...issue.path])}: ${issue.message}`),
  ),
]
