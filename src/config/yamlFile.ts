/**
 * Reading a YAML file into plain data, with failures as one-line descriptions.
 */
import { readFile } from "node:fs/promises"
import { Data, Effect, Result } from "effect"
import { LineCounter, parseDocument } from "yaml"

/** The file could not be read, or is not valid YAML; `detail` is one line, e.g. `3:5: Map keys must be unique`. */
export class YamlFileError extends Data.TaggedError("YamlFileError")<{
  readonly file: string
  readonly reason: "read" | "syntax"
  readonly detail: string
}> {}

/** Parsed YAML plus the parser's warnings (each `line:column: message`). */
export interface YamlDocument {
  readonly value: unknown
  readonly warnings: ReadonlyArray<string>
}

const readErrorDetail = (error: unknown): string =>
  error instanceof Error && "code" in error && typeof error.code === "string"
    ? `${error.code}: ${error.message.replace(/^\w+: /, "")}`
    : String(error)

/**
 * Parses YAML 1.2 text (merge keys `<<` allowed, duplicate keys refused). An empty document
 * is `null`. The first syntax error fails, with its line and column (1-based).
 */
export const parseYaml = (text: string, file: string): Result.Result<YamlDocument, YamlFileError> => {
  const lineCounter = new LineCounter()
  const document = parseDocument(text, { lineCounter, prettyErrors: false, merge: true, uniqueKeys: true })
  const at = (pos: readonly [number, number]) => {
    const { line, col } = lineCounter.linePos(pos[0])
    return `${line}:${col}`
  }
  const first = document.errors[0]
  if (first !== undefined) {
    return Result.fail(
      new YamlFileError({ file, reason: "syntax", detail: `${at(first.pos)}: ${first.message}` }),
    )
  }
  const warnings = document.warnings.map((warning) => `${at(warning.pos)}: ${warning.message}`)
  try {
    return Result.succeed({ value: document.toJS({ maxAliasCount: 1000 }) as unknown, warnings })
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error)
    return Result.fail(new YamlFileError({ file, reason: "syntax", detail }))
  }
}

/** Reads and parses one YAML file (UTF-8). */
export const readYamlFile = (file: string): Effect.Effect<YamlDocument, YamlFileError> =>
  Effect.tryPromise({
    try: () => readFile(file, "utf8"),
    catch: (error) => new YamlFileError({ file, reason: "read", detail: readErrorDetail(error) }),
  }).pipe(Effect.flatMap((text) => Effect.fromResult(parseYaml(text, file))))

/** `cannot read FILE (ENOENT: …)` or `FILE:3:5: message`. */
export const describeYamlError = (error: YamlFileError): string =>
  error.reason === "read" ? `cannot read ${error.file} (${error.detail})` : `${error.file}:${error.detail}`
