/**
 * A route's targets as the file gives them (`provider`+`model` or `alias`,
 * with an optional `weight`) resolved against `aliases:` (ADR 0073), with
 * the problems of each entry. The strategy's own rules (weights only on a
 * weighted route, at least one weight above 0 there) are checked here too.
 */
import type { RouteStrategy, TargetConfig } from "./model.js"
import { formatPath } from "./problems.js"
import type { AliasFile, TargetFile } from "./schema.js"

/**
 * The resolved targets of route `route`, in file order; an entry that cannot
 * be resolved is `undefined` (its index kept, so later checks name the right
 * entry) and its problem is pushed.
 */
export const resolveTargets = (
  route: string,
  strategy: RouteStrategy,
  files: ReadonlyArray<TargetFile>,
  aliases: ReadonlyMap<string, AliasFile>,
  aliasNames: ReadonlySet<string>,
  problems: Array<string>,
): Array<TargetConfig | undefined> => {
  const path = (index: number, key?: string) =>
    formatPath(
      key === undefined ? ["routes", route, "targets", index] : ["routes", route, "targets", index, key],
    )
  const targets = files.map((file, index): TargetConfig | undefined => {
    if (file.weight !== undefined && strategy !== "weighted") {
      problems.push(
        `${path(index, "weight")}: only a route with strategy: weighted picks by weight (this route's strategy is ${strategy})`,
      )
    }
    const weight = strategy === "weighted" ? (file.weight ?? 0) : 0
    if (file.alias !== undefined) {
      if (file.provider !== undefined || file.model !== undefined) {
        problems.push(`${path(index)}: give alias, or provider and model, not both`)
        return undefined
      }
      const alias = aliases.get(file.alias)
      if (alias === undefined) {
        // An alias that is present but broken has its own problem under aliases.
        if (!aliasNames.has(file.alias))
          problems.push(`${path(index, "alias")}: unknown alias "${file.alias}"`)
        return undefined
      }
      return { provider: alias.provider, model: alias.model, weight, alias: file.alias }
    }
    if (file.provider === undefined || file.model === undefined) {
      if (file.provider === undefined && file.model === undefined)
        problems.push(`${path(index)}: needs provider and model, or alias`)
      else problems.push(`${path(index, file.provider === undefined ? "provider" : "model")}: is required`)
      return undefined
    }
    return { provider: file.provider, model: file.model, weight, alias: undefined }
  })
  if (strategy === "weighted" && files.length > 0 && files.every((file) => (file.weight ?? 0) === 0)) {
    problems.push(
      `${formatPath(["routes", route, "targets"])}: strategy weighted needs a target with weight above 0`,
    )
  }
  return targets
}
