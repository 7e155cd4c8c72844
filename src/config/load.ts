/**
 * Loading `tollgate.yaml` from disk: read, parse YAML, decode (see `decode.ts`).
 * `serve` and `config validate` both come through here, so validate finds every error a
 * server start would hit.
 */
import * as NodePath from "node:path"
import { Effect } from "effect"
import { decodeConfig, type LoadMode, type Loaded } from "./decode.js"
import { ConfigInvalid } from "./problems.js"
import { readYamlFile, type YamlFileError } from "./yamlFile.js"

export { decodeConfig, type DecodeOptions, type LoadMode, type Loaded } from "./decode.js"

/**
 * Reads and decodes the config at `path` (relative to the working directory) and the price
 * table it names. Fails with every problem found; `warnings` are for the caller to print or log.
 * In `serve` mode an unset provider key env var is a problem; in `validate` mode a warning.
 */
export const loadConfig = Effect.fn("Config.load")(function* (path: string, mode: LoadMode) {
  const absolute = NodePath.resolve(path)
  const file = yield* readYamlFile(absolute).pipe(
    Effect.mapError((error) => new ConfigInvalid({ problems: [describeConfigFileError(error)] })),
  )
  const loaded: Loaded = yield* decodeConfig(file.value, { path: absolute, mode })
  const yamlWarnings = file.warnings.map((warning) => `${absolute}:${warning}`)
  return { config: loaded.config, warnings: [...yamlWarnings, ...loaded.warnings] } satisfies Loaded
})

/** `FILE: cannot read (ENOENT: …)` or `FILE:3:5: message`: the file itself is the path. */
const describeConfigFileError = (error: YamlFileError): string =>
  error.reason === "read" ? `${error.file}: cannot read (${error.detail})` : `${error.file}:${error.detail}`
