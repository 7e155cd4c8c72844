import { useState } from "preact/hooks"
import { ApiError, download, query } from "../api.js"
import { count, percent, usd } from "../format.js"
import type { TenantView, Totals, UsageAnswer } from "../types.js"
import { Problem, useApi, UsageSourceNote } from "../useApi.js"
import { Page, TenantOptions } from "../ui.js"

const GROUPS = ["model", "provider", "route", "tenant", "key", "day", "session", "target"] as const

/** The numeric columns of a group, as in `/admin/usage` and its CSV. */
const COLUMNS = [
  { field: "requests", label: "Requests" },
  { field: "input_tokens", label: "Input tokens" },
  { field: "output_tokens", label: "Output tokens" },
  { field: "cache_read_tokens", label: "Cache read" },
  { field: "cache_write_tokens", label: "Cache write" },
  { field: "cost_micro_usd", label: "Cost" },
  { field: "cache_saved_micro_usd", label: "Cache saved" },
  { field: "cache_hit_ratio", label: "Cache hits" },
] as const satisfies ReadonlyArray<{ field: keyof Totals; label: string }>

const today = (): string => new Date().toISOString().slice(0, 10)
const daysAgo = (days: number): string => new Date(Date.now() - days * 86_400_000).toISOString().slice(0, 10)
/** The day after `date` (the `until` bound is exclusive: a range of dates includes its last day). */
const dayAfter = (date: string): string => new Date(Date.parse(date) + 86_400_000).toISOString().slice(0, 10)

/** `/admin/usage` over a date range, grouped; the same as CSV. */
export const Usage = () => {
  const tenants = useApi<{ tenants: ReadonlyArray<TenantView> }>("/admin/tenants")
  const [form, setForm] = useState({ tenant: "", since: daysAgo(6), until: today(), group_by: "model" })
  const [applied, setApplied] = useState(form)
  const params = {
    tenant: applied.tenant,
    since: applied.since,
    until: applied.until === "" ? undefined : dayAfter(applied.until),
    group_by: applied.group_by,
  }
  const { data, error, loading, source } = useApi<UsageAnswer>(`/admin/usage${query(params)}`)
  const [downloadError, setDownloadError] = useState<string | undefined>()
  const set = (field: keyof typeof form) => (event: Event) =>
    setForm({ ...form, [field]: (event.target as HTMLInputElement | HTMLSelectElement).value })
  const csv = async () => {
    setDownloadError(undefined)
    try {
      await download(`/admin/usage${query({ ...params, format: "csv" })}`, "tollgate-usage.csv")
    } catch (e) {
      setDownloadError(e instanceof ApiError || e instanceof Error ? e.message : String(e))
    }
  }
  return (
    <Page id="usage" title="Usage">
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault()
          setApplied(form)
        }}
      >
        <label>
          Tenant
          <select value={form.tenant} onChange={set("tenant")} name="tenant">
            <option value="">All tenants</option>
            <TenantOptions tenants={tenants.data?.tenants} />
          </select>
        </label>
        <label>
          From (UTC)
          <input type="date" name="since" value={form.since} onInput={set("since")} />
        </label>
        <label>
          To (UTC, inclusive)
          <input type="date" name="until" value={form.until} onInput={set("until")} />
        </label>
        <label>
          Group by
          <select value={form.group_by} onChange={set("group_by")} name="group_by">
            {GROUPS.map((g) => (
              <option key={g} value={g}>
                {g}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Show</button>
        <button type="button" class="secondary" onClick={csv}>
          Download CSV
        </button>
      </form>
      <UsageSourceNote source={source} />
      <Problem error={error ?? downloadError} />
      {data !== undefined && (
        <table aria-busy={loading}>
          <caption>
            {count(data.totals.requests)} requests, {usd(data.totals.cost_micro_usd)}
          </caption>
          <thead>
            <tr>
              <th scope="col">{applied.group_by}</th>
              {COLUMNS.map((column) => (
                <th scope="col" class="num" key={column.field}>
                  {column.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {(data.groups ?? []).map((g) => (
              <tr key={g.key ?? "(none)"}>
                <th scope="row">{g.key ?? <span class="muted">(none)</span>}</th>
                {COLUMNS.map(({ field }) => (
                  <td class="num" key={field}>
                    {field === "cost_micro_usd" || field === "cache_saved_micro_usd"
                      ? usd(g[field])
                      : field === "cache_hit_ratio"
                        ? percent(g[field])
                        : count(g[field])}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  )
}
