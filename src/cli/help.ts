/**
 * How `--help` reads: Effect's help, with a usage line that names the command's own flags
 * (`tollgate keys create --tenant NAME [--id ID]`) where Effect writes `[flags]`, the command's
 * example (`Command.withExamples`), and an ENVIRONMENT section listing the variables it reads
 * ({@link withEnvironment}). Colors only on a terminal without `NO_COLOR` (nor `TERM=dumb`).
 */
import { Context, Effect, Layer } from "effect"
import { CliOutput, Command, TerminalCapabilities, type HelpDoc } from "effect/cli"

/** An environment variable a command reads, as its help lists it. */
export interface EnvVarDoc {
  /** The variable's name, or how to find it (`the variables named by providers.*.api_key_env`). */
  readonly name: string
  readonly description: string
}

/** The environment variables a command reads (a help annotation; empty unless set). */
export const Environment = Context.Reference<ReadonlyArray<EnvVarDoc>>("tollgate/cli/Environment", {
  defaultValue: () => [],
})

/** Read by every command's help, so every ENVIRONMENT section lists it last. */
const noColor: EnvVarDoc = {
  name: "NO_COLOR",
  description: "When set (non-empty), help is printed without colors.",
}

/**
 * Documents a command: its one example (`tollgate …`, with what it does) and the environment
 * variables it reads, for its `--help`.
 */
export const documented =
  (example: HelpDoc.ExampleDoc, environment: ReadonlyArray<EnvVarDoc> = []) =>
  <Name extends string, Input, E, R, ContextInput>(
    command: Command.Command<Name, Input, ContextInput, E, R>,
  ): Command.Command<Name, Input, ContextInput, E, R> =>
    command.pipe(Command.withExamples([example]), Command.annotate(Environment, environment))

/** `--name VALUE`, in brackets when optional; a boolean flag has no value. */
const flagUsage = (flag: HelpDoc.FlagDoc): string => {
  const text = flag.type === "boolean" ? `--${flag.name}` : `--${flag.name} ${flag.type}`
  return flag.required ? text : `[${text}]`
}

const style = (on: boolean, code: number) => (text: string) => (on ? `\x1b[${code}m${text}\x1b[0m` : text)

/** The ENVIRONMENT section: one aligned row per variable, as the FLAGS section lays them out. */
const environmentSection = (vars: ReadonlyArray<EnvVarDoc>, colors: boolean): string => {
  const width = Math.max(...vars.map((v) => v.name.length)) + 4
  const rows = vars.map(
    (v) => `  ${style(colors, 32)(v.name)}${" ".repeat(width - v.name.length)}${v.description}`,
  )
  return [style(colors, 1)("ENVIRONMENT"), ...rows].join("\n")
}

/** `formatter` with the command's flags in the usage line and its ENVIRONMENT section. */
export const withFlagUsage = (formatter: CliOutput.Formatter, colors = false): CliOutput.Formatter => ({
  ...formatter,
  formatHelpDoc: (doc) => {
    const text = formatter.formatHelpDoc(
      doc.flags.length === 0
        ? doc
        : { ...doc, usage: doc.usage.replace("[flags]", doc.flags.map(flagUsage).join(" ")) },
    )
    const vars = [...Context.get(doc.annotations, Environment), noColor]
    // Effect's help puts EXAMPLES right under the SUBCOMMANDS table; every other section has a blank line above.
    const spaced = text.replace(/([^\n])\n((?:\x1b\[1m)?EXAMPLES)/, "$1\n\n$2")
    return `${spaced}\n\n${environmentSection(vars, colors)}`
  },
})

/**
 * Installs the help formatter: colors only when standard output is a terminal and neither
 * `NO_COLOR` nor `TERM=dumb` is set (`TerminalCapabilities`). Provide it where the CLI runs.
 */
export const layer: Layer.Layer<never> = Layer.effect(CliOutput.Formatter)(
  Effect.gen(function* () {
    const { canColor } = yield* TerminalCapabilities.TerminalCapabilities
    return withFlagUsage(CliOutput.defaultFormatter({ colors: canColor }), canColor)
  }),
)
