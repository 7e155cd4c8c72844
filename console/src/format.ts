/** Display helpers: money is integer micro-USD until it is shown. */

export const usd = (micro: number): string => {
  const dollars = micro / 1_000_000
  const digits = Math.abs(dollars) >= 100 ? 2 : Math.abs(dollars) >= 1 ? 2 : 4
  return `$${dollars.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })}`
}

export const count = (n: number): string => n.toLocaleString("en-US")

export const percent = (ratio: number): string => `${Math.round(ratio * 100)} %`

/** "in 12 s", "3 min ago", or the date and time for what is further away. */
export const relative = (iso: string | null, now: number): string => {
  if (iso === null) return "—"
  const ms = Date.parse(iso) - now
  const abs = Math.abs(ms)
  const text =
    abs < 60_000
      ? `${Math.round(abs / 1000)} s`
      : abs < 3_600_000
        ? `${Math.round(abs / 60_000)} min`
        : undefined
  if (text === undefined) return dateTime(iso)
  return ms >= 0 ? `in ${text}` : `${text} ago`
}

export const dateTime = (iso: string | null): string =>
  iso === null ? "—" : new Date(iso).toISOString().replace("T", " ").slice(0, 19) + " UTC"
