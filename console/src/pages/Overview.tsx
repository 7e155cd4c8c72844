import { useMemo, useState } from "preact/hooks"
import { query } from "../api.js"
import { Chart } from "../chart.js"
import { count, percent, usd } from "../format.js"
import type { Series, UsageAnswer } from "../types.js"
import { Problem, useApi, UsageSourceNote } from "../useApi.js"
import { Page } from "../ui.js"

const RANGES = [
  { id: "1h", label: "Last hour", ms: 3_600_000, resolution: "minute" },
  { id: "24h", label: "Last 24 hours", ms: 86_400_000, resolution: "hour" },
  { id: "7d", label: "Last 7 days", ms: 7 * 86_400_000, resolution: "hour" },
  { id: "30d", label: "Last 30 days", ms: 30 * 86_400_000, resolution: "day" },
] as const

const sum = (values: ReadonlyArray<number>): number => values.reduce((a, b) => a + b, 0)

/** Requests, errors and spend over time, from the usage index (`/admin/usage/series`). */
export const Overview = () => {
  const [range, setRange] = useState<(typeof RANGES)[number]>(RANGES[1])
  // The window is fixed when the range is chosen (a refresh moves it to now).
  const [since, setSince] = useState(() => new Date(Date.now() - range.ms).toISOString())
  const choose = (next: (typeof RANGES)[number]) => {
    setRange(next)
    setSince(new Date(Date.now() - next.ms).toISOString())
  }
  const { data, error, loading, reload, source } = useApi<Series>(
    `/admin/usage/series${query({ since, resolution: range.resolution })}`,
  )
  // The prompt cache of each target on each route over the same range (ADR 0073).
  const cache = useApi<UsageAnswer>(`/admin/usage${query({ since, group_by: "target" })}`)
  const charts = useMemo(() => {
    if (data === undefined) return undefined
    return {
      traffic: [
        { label: "Requests", color: "--series-1", values: data.requests },
        { label: "Errors", color: "--series-err", values: data.errors },
      ],
      spend: [
        {
          label: "Spend",
          color: "--series-2",
          values: data.cost_micro_usd.map((v) => v / 1_000_000),
          bars: true,
        },
      ],
    }
  }, [data])
  return (
    <Page
      id="overview"
      title="Overview"
      head={
        <>
          <div role="group" aria-label="Time range" class="segmented">
            {RANGES.map((r) => (
              <button type="button" key={r.id} aria-pressed={r.id === range.id} onClick={() => choose(r)}>
                {r.label}
              </button>
            ))}
          </div>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setSince(new Date(Date.now() - range.ms).toISOString())
              reload()
            }}
          >
            Refresh
          </button>
        </>
      }
    >
      <UsageSourceNote source={source} />
      <Problem error={error} />
      {data !== undefined && charts !== undefined && (
        <>
          <dl class="stats" aria-live="polite" aria-busy={loading}>
            <div>
              <dt>Requests</dt>
              <dd data-testid="total-requests">{count(sum(data.requests))}</dd>
            </div>
            <div>
              <dt>Errors</dt>
              <dd data-testid="total-errors">{count(sum(data.errors))}</dd>
            </div>
            <div>
              <dt>Spend</dt>
              <dd data-testid="total-spend">{usd(sum(data.cost_micro_usd))}</dd>
            </div>
          </dl>
          <Chart
            title="Requests and errors"
            t={data.t}
            series={charts.traffic}
            format={formatCount}
            integer
          />
          <Chart title="Spend (USD)" t={data.t} series={charts.spend} format={formatUsd} />
        </>
      )}
      {cache.data !== undefined && <CacheTable answer={cache.data} loading={cache.loading} />}
    </Page>
  )
}

/** Each target on each route that read or wrote the prompt cache: its hit ratio and what the cache saved. */
const CacheTable = ({ answer, loading }: { answer: UsageAnswer; loading: boolean }) => {
  const rows = (answer.groups ?? []).filter(
    (g) => g.key !== null && g.cache_read_tokens + g.cache_write_tokens > 0,
  )
  return (
    <table aria-busy={loading} data-testid="cache-table">
      <caption>
        Prompt cache: {percent(answer.totals.cache_hit_ratio)} of prompt tokens read from it,{" "}
        {usd(answer.totals.cache_saved_micro_usd)} saved
      </caption>
      <thead>
        <tr>
          <th scope="col">Route / provider / model</th>
          <th scope="col" class="num">
            Cache hits
          </th>
          <th scope="col" class="num">
            Cache read
          </th>
          <th scope="col" class="num">
            Saved
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.length === 0 && (
          <tr>
            <td colSpan={4} class="muted">
              No prompt-cache use in this range
            </td>
          </tr>
        )}
        {rows.map((g) => (
          <tr key={g.key!} data-target={g.key!}>
            <th scope="row">{g.key}</th>
            <td class="num">{percent(g.cache_hit_ratio)}</td>
            <td class="num">{count(g.cache_read_tokens)}</td>
            <td class="num">{usd(g.cache_saved_micro_usd)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

const formatCount = (v: number): string => count(Math.round(v))
const formatUsd = (v: number): string => usd(Math.round(v * 1_000_000))
