import { useMemo, useState } from "preact/hooks"
import { query } from "../api.js"
import { Chart } from "../chart.js"
import { count, usd } from "../format.js"
import type { Series } from "../types.js"
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
    </Page>
  )
}

const formatCount = (v: number): string => count(Math.round(v))
const formatUsd = (v: number): string => usd(Math.round(v * 1_000_000))
