import { useEffect, useState } from "preact/hooks"
import { dateTime, percent, relative } from "../format.js"
import type { Breaker } from "../types.js"
import { Problem, useApi } from "../useApi.js"
import { Page } from "../ui.js"

const STATE_TEXT = { closed: "Closed", open: "Open", half_open: "Half-open" } as const

/** Every breaker this copy has used, refreshed every 2 s. */
export const Breakers = () => {
  const { data, error } = useApi<{ breakers: ReadonlyArray<Breaker> }>("/admin/breakers", 2_000)
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1_000)
    return () => clearInterval(timer)
  }, [])
  return (
    <Page id="breakers" title="Breakers" head={<p class="muted">Live: refreshed every 2 seconds.</p>}>
      <Problem error={error} />
      {data !== undefined &&
        (data.breakers.length === 0 ? (
          <p>No target has been used yet.</p>
        ) : (
          <table>
            <caption class="visually-hidden">Circuit breakers per target</caption>
            <thead>
              <tr>
                <th scope="col">Target</th>
                <th scope="col">Tenant</th>
                <th scope="col">State</th>
                <th scope="col" class="num">
                  Failures (60 s)
                </th>
                <th scope="col" class="num">
                  Attempts (60 s)
                </th>
                <th scope="col">Next test</th>
                <th scope="col">Cooldown until</th>
              </tr>
            </thead>
            <tbody>
              {data.breakers.map((b) => (
                <tr key={`${b.tenant}/${b.provider}/${b.model}/${b.region}`} data-state={b.state}>
                  <th scope="row">
                    {b.provider} / {b.model}
                    {b.region !== null && <span class="muted"> ({b.region})</span>}
                  </th>
                  <td>{b.tenant ?? "all tenants"}</td>
                  <td>
                    <span class={`badge ${b.state}`} data-testid="breaker-state">
                      {STATE_TEXT[b.state]}
                    </span>
                  </td>
                  <td class="num">{percent(b.failure_ratio)}</td>
                  <td class="num">{b.attempts}</td>
                  <td title={dateTime(b.testable_at)}>{relative(b.testable_at, now)}</td>
                  <td title={dateTime(b.cooldown_until)}>{relative(b.cooldown_until, now)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
    </Page>
  )
}
