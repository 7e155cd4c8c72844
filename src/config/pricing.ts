/**
 * The price table (`config/pricing.yaml`): USD per million tokens in the file, integer
 * micro-USD per million tokens once decoded, and the lookup that picks a target's price.
 *
 * ```yaml
 * prices:
 *   - { model: claude-sonnet-5-5, input: 3, output: 10, cache_read: 0.3, cache_write: 3.75 }
 *   - { provider: vertex, model: claude-sonnet-5-5@20261001, input: 3.3, output: 11 }
 * ```
 *
 * `input` and `output` are required; `cache_read` and `cache_write` default to 0.
 */
import { Effect, Result, Schema } from "effect"
import type { PriceEntry, ProviderConfig } from "./model.js"
import { Name, UsdToMicro } from "./primitives.js"
import { formatPath, parseErrorIssues } from "./problems.js"
import { parseOptions } from "./schema.js"

/** One row of `prices:`. */
export const PriceRow = Schema.Struct({
  provider: Schema.optionalKey(Name),
  model: Name,
  input: UsdToMicro,
  output: UsdToMicro,
  cacheRead: UsdToMicro.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(0))),
  cacheWrite: UsdToMicro.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(0))),
}).pipe(
  Schema.encodeKeys({ cacheRead: "cache_read", cacheWrite: "cache_write" }),
  Schema.annotateEncoded({ message: "must be a mapping with model, input and output" }),
)

/** The whole price file: `{ prices: [...] }`. */
export const PriceTable = Schema.Struct({
  prices: Schema.Array(PriceRow).annotate({ message: "must be a list of prices" }),
}).annotate({ message: "must be a mapping with a prices list" })

const toEntry = (row: typeof PriceRow.Type): PriceEntry => ({
  provider: row.provider,
  model: row.model,
  input: row.input,
  output: row.output,
  cacheRead: row.cacheRead,
  cacheWrite: row.cacheWrite,
})

/**
 * Decodes a parsed price file. Every problem is reported against `pricing.file` and names
 * `file`, then the path inside it (`pricing.file: /etc/tollgate/pricing.yaml: prices[3].input: …`).
 * Two rows for the same provider (or none) and model are an error.
 */
export const decodePriceTable = (
  raw: unknown,
  file: string,
): Result.Result<ReadonlyArray<PriceEntry>, ReadonlyArray<string>> => {
  const inFile = `pricing.file: ${file}: `
  const decoded = Schema.decodeUnknownResult(PriceTable)(raw, parseOptions)
  if (Result.isFailure(decoded)) {
    const lines = parseErrorIssues(decoded.failure).map(
      (issue) => `${inFile}${issue.path.length === 0 ? "" : `${formatPath(issue.path)}: `}${issue.message}`,
    )
    return Result.fail([...new Set(lines)])
  }
  const problems: Array<string> = []
  const seen = new Map<string, number>()
  decoded.success.prices.forEach((row, index) => {
    const key = JSON.stringify([row.provider ?? null, row.model])
    const first = seen.get(key)
    if (first === undefined) seen.set(key, index)
    else
      problems.push(
        `${inFile}prices[${index}]: duplicate price for ${describe(row)}, first at prices[${first}]`,
      )
  })
  return problems.length > 0 ? Result.fail(problems) : Result.succeed(decoded.success.prices.map(toEntry))
}

const describe = (row: { readonly provider?: string | undefined; readonly model: string }): string =>
  row.provider === undefined ? `model "${row.model}"` : `provider "${row.provider}" model "${row.model}"`

/**
 * The price of `model` on `provider`: a `provider`+`model` entry wins over a `model`-only one;
 * an Ollama provider with neither costs 0; otherwise `undefined` (no price).
 * A linear scan: price tables are small; callers on the hot path should keep the result per target.
 */
export const priceFor = (
  prices: ReadonlyArray<PriceEntry>,
  provider: ProviderConfig,
  model: string,
): PriceEntry | undefined => {
  let modelOnly: PriceEntry | undefined
  for (const entry of prices) {
    if (entry.model !== model) continue
    if (entry.provider === provider.name) return entry
    if (entry.provider === undefined) modelOnly ??= entry
  }
  if (modelOnly !== undefined) return modelOnly
  return provider.kind === "ollama"
    ? { provider: provider.name, model, input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
    : undefined
}
