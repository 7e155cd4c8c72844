/**
 * How `--help` reads: Effect's help, with a usage line that names the command's own flags
 * (`tollgate keys create --tenant NAME [--id ID]`) where Effect writes `[flags]`.
 */
import { Effect, Layer } from "effect"
import { CliOutput, type HelpDoc } from "effect/cli"

/** `--name VALUE`, in brackets when optional; a boolean flag has no value. */
const flagUsage = (flag: HelpDoc.FlagDoc): string => {
  const text = flag.type === "boolean" ? `--${flag.name}` : `--${flag.name} ${flag.type}`
  return flag.required ? text : `[${text}]`
}

/** `formatter` with the command's flags in the usage line. */
export const withFlagUsage = (formatter: CliOutput.Formatter): CliOutput.Formatter => ({
  ...formatter,
  formatHelpDoc: (doc) =>
    formatter.formatHelpDoc(
      doc.flags.length === 0
        ? doc
        : { ...doc, usage: doc.usage.replace("[flags]", doc.flags.map(flagUsage).join(" ")) },
    ),
})

/** Installs the help formatter (colors as the terminal allows). Provide it where the CLI runs. */
export const layer: Layer.Layer<never> = Layer.effect(CliOutput.Formatter)(
  Effect.sync(() => withFlagUsage(CliOutput.defaultFormatter())),
)
