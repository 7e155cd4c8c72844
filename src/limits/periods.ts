/**
 * The UTC calendar periods of the budgets (limits-and-budgets.md "Budgets"):
 * day `YYYY-MM-DD`, ISO week `YYYY-Www` (Monday start; the week belongs to
 * the year of its Thursday, so 2027-01-01 is in `2026-W53`), month `YYYY-MM`.
 * Each request asks for its periods, so the last bounds of each are cached.
 */

export type PeriodName = "day" | "week" | "month"

/** One period: its id and its bounds, epoch ms (`from` inclusive, `until` exclusive). */
export interface Period {
  readonly id: string
  readonly from: number
  readonly until: number
}

export const DAY_MS = 24 * 60 * 60 * 1000

const pad = (n: number, width = 2): string => String(n).padStart(width, "0")

const dayAt = (now: number): Period => {
  const from = Math.floor(now / DAY_MS) * DAY_MS
  return { id: new Date(from).toISOString().slice(0, 10), from, until: from + DAY_MS }
}

const weekAt = (now: number): Period => {
  const day = Math.floor(now / DAY_MS) * DAY_MS
  // 1970-01-01 was a Thursday: days since a Monday are (days + 3) mod 7.
  const sinceMonday = (Math.floor(day / DAY_MS) + 3) % 7
  const from = day - sinceMonday * DAY_MS
  const thursday = new Date(from + 3 * DAY_MS)
  const year = thursday.getUTCFullYear()
  const week = Math.floor((thursday.getTime() - Date.UTC(year, 0, 1)) / (7 * DAY_MS)) + 1
  return { id: `${pad(year, 4)}-W${pad(week)}`, from, until: from + 7 * DAY_MS }
}

const monthAt = (now: number): Period => {
  const date = new Date(now)
  const from = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
  const until = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
  return { id: date.toISOString().slice(0, 7), from, until }
}

const cached = (at: (now: number) => Period) => {
  let last: Period = { id: "", from: 0, until: -1 }
  return (now: number): Period => {
    if (now >= last.from && now < last.until) return last
    last = at(now)
    return last
  }
}

/** The UTC day of `now`, `YYYY-MM-DD`, with its bounds. */
export const dayPeriod = cached(dayAt)
/** The ISO week of `now` (Monday 00:00 UTC to the next Monday), `YYYY-Www`, with its bounds. */
export const weekPeriod = cached(weekAt)
/** The UTC calendar month of `now`, `YYYY-MM`, with its bounds. */
export const monthPeriod = cached(monthAt)

/** The period `name` of `now`. */
export const periodOf = (name: PeriodName, now: number): Period =>
  name === "day" ? dayPeriod(now) : name === "week" ? weekPeriod(now) : monthPeriod(now)

/** The UTC calendar month of `now`, `YYYY-MM`. */
export const monthOf = (now: number): string => monthPeriod(now).id
