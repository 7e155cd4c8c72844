// The soak's RSS rule (#35, ADR 0076): where the warm-up ends, the least-squares fit, and when a slope is judged.
// Kept apart from bench/soak.mjs so that test/e2e/soakRule.test.ts can hold the rule to figures.

/** The warm-up's share of the run: RSS follows the heap's highest point, which takes about 20 minutes to reach. */
export const WARMUP_SHARE = 1 / 3
/** The warm-up is never longer than this: in a 60-minute run the slope is judged over minutes 20 to 60. */
export const WARMUP_MAX_MS = 20 * 60_000
/**
 * A slope is judged only after the whole 20-minute warm-up and over at least this much time after it: a run of
 * 55 minutes or more (a 60-minute run's last sample comes a little before minute 60). A shorter fit is reported,
 * not judged: it follows the heap still finding its high.
 */
export const MIN_SLOPE_WINDOW_MS = 35 * 60_000
/** The default bound on the slope, MB per 10 minutes. */
export const SLOPE_LIMIT_MB = 0.5

/** Milliseconds of a run of `durationMs` that are warm-up: a third of it, at most 20 minutes. */
export const warmupMsOf = (durationMs) => Math.min(WARMUP_SHARE * durationMs, WARMUP_MAX_MS)

/** `{ a, b }` of y = a + b·x over [x, y] points, or null with fewer than 3 points or no spread in x. */
export const leastSquares = (points) => {
  if (points.length < 3) return null
  const n = points.length
  const mx = points.reduce((s, p) => s + p[0], 0) / n
  const my = points.reduce((s, p) => s + p[1], 0) / n
  let sxy = 0
  let sxx = 0
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my)
    sxx += (x - mx) ** 2
  }
  if (sxx === 0) return null
  const b = sxy / sxx
  return { a: my - b * mx, b }
}

/**
 * The slope of `key` (MB) over the load samples ({ t_s, [key] }) after the warm-up of a run of `durationMs`, in MB
 * per 10 minutes, and whether it is judged: `{ slope, judged, pass, windowMs, warmupMs }`; `pass` is null when
 * the warm-up is shorter than WARMUP_MAX_MS, the window after it shorter than MIN_SLOPE_WINDOW_MS, or there are
 * too few samples to fit.
 */
export const judgeSlope = (samples, key, durationMs, limitMb = SLOPE_LIMIT_MB) => {
  const warmupMs = warmupMsOf(durationMs)
  const points = samples
    .filter((s) => s.t_s * 1000 >= warmupMs && s[key] !== null && s[key] !== undefined)
    .map((s) => [s.t_s / 60, s[key]])
  const windowMs = samples.length === 0 ? 0 : Math.max(0, samples.at(-1).t_s * 1000 - warmupMs)
  const fit = leastSquares(points)
  const slope = fit === null ? null : fit.b * 10
  const judged = warmupMs >= WARMUP_MAX_MS && windowMs >= MIN_SLOPE_WINDOW_MS && slope !== null
  return { slope, fit, judged, pass: judged ? slope < limitMb : null, windowMs, warmupMs }
}
