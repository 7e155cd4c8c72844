import { Effect } from "effect"

/**
 * What a synchronous step leaves to run as an Effect — the logging of a
 * write or a settle that failed, a settle that must go to a remote store —
 * or undefined when it left nothing (the usual case: no Effect allocated).
 */
export type Leftover = Effect.Effect<void> | undefined

/** `a`, then `b`. */
export const andThen = (a: Leftover, b: Leftover): Leftover =>
  a === undefined ? b : b === undefined ? a : Effect.andThen(a, b)
