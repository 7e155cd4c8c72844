import { count, usd } from "../format.js"
import type { BudgetView, TenantView, WindowView } from "../types.js"
import { Problem, useApi } from "../useApi.js"
import { Page } from "../ui.js"

/** A bar of `value` against `max` with its numbers as text (never colour alone). */
const Bar = ({ label, value, max, text }: { label: string; value: number; max: number; text: string }) => {
  const ratio = max > 0 ? Math.min(1, value / max) : 0
  const level = ratio >= 1 ? "full" : ratio >= 0.8 ? "high" : "ok"
  return (
    <div class="bar-row">
      <span class="bar-label">{label}</span>
      <meter min={0} max={max} value={Math.min(value, max)} aria-label={label} class={level} />
      <span class="bar-text">{text}</span>
    </div>
  )
}

const BUDGET_ORDER = ["day", "week", "month", "session"] as const

const BudgetBars = ({
  owner,
  budgets,
  monthSpend,
}: {
  owner: string
  budgets: TenantView["budgets"]
  monthSpend?: number
}) => {
  const rows = BUDGET_ORDER.flatMap((name) => {
    const budget: BudgetView | null | undefined = budgets[name]
    if (budget === null || budget === undefined) return []
    const spend = budget.spend_micro_usd ?? (name === "month" ? monthSpend : undefined)
    if (spend === undefined || spend === null)
      return [
        <p key={name} class="muted">
          {name} budget: {usd(budget.limit_micro_usd)} ({budget.mode}) — per session, see below
        </p>,
      ]
    const reserved = budget.reserved_micro_usd ?? 0
    return [
      <Bar
        key={name}
        label={`${owner} ${name}${budget.period === undefined ? "" : ` (${budget.period})`}`}
        value={spend + reserved}
        max={budget.limit_micro_usd}
        text={`${usd(spend)}${reserved > 0 ? ` + ${usd(reserved)} reserved` : ""} of ${usd(budget.limit_micro_usd)} (${budget.mode})`}
      />,
    ]
  })
  return rows.length === 0 ? null : <>{rows}</>
}

const Window = ({ name, w }: { name: string; w: WindowView }) =>
  w.limit === null ? (
    <p class="muted">
      {name}: no limit ({count(w.current)} this minute)
    </p>
  ) : (
    <Bar
      label={name}
      value={w.estimate}
      max={w.limit}
      text={`${count(Math.round(w.estimate))} of ${count(w.limit)} in the last 60 s`}
    />
  )

/** Each tenant's spend against its budgets and its rate-limit windows, refreshed every 5 s. */
export const Tenants = () => {
  const { data, error } = useApi<{ tenants: ReadonlyArray<TenantView> }>("/admin/tenants", 5_000)
  return (
    <Page id="tenants" title="Tenants" head={<p class="muted">Refreshed every 5 seconds.</p>}>
      <Problem error={error} />
      {data?.tenants.map((tenant) => (
        <article
          class="card"
          key={tenant.name}
          aria-labelledby={`tenant-${tenant.name}`}
          data-tenant={tenant.name}
        >
          <h2 id={`tenant-${tenant.name}`}>{tenant.name}</h2>
          {tenant.store_error !== undefined && (
            <p class="error" role="alert">
              The limit store could not be read: {tenant.store_error}
            </p>
          )}
          {tenant.month !== null && (
            <p>
              Spend this month ({tenant.month.month}):{" "}
              <strong data-testid="month-spend">{usd(tenant.month.spend_micro_usd)}</strong>
              {tenant.month.reserved_micro_usd > 0 && <> + {usd(tenant.month.reserved_micro_usd)} reserved</>}
            </p>
          )}
          <BudgetBars
            owner="Tenant"
            budgets={tenant.budgets}
            {...(tenant.month === null ? {} : { monthSpend: tenant.month.spend_micro_usd })}
          />
          {tenant.keys.map((key) => (
            <BudgetBars key={key.id} owner={`Key ${key.id}`} budgets={key.budgets} />
          ))}
          {tenant.rate_limits !== null && (
            <>
              <h3>Rate limits</h3>
              <Window name="Requests per minute" w={tenant.rate_limits.requests} />
              <Window name="Tokens per minute" w={tenant.rate_limits.tokens} />
            </>
          )}
          {tenant.sessions !== null && tenant.sessions.length > 0 && (
            <details>
              <summary>
                {tenant.sessions.length} session{tenant.sessions.length === 1 ? "" : "s"} in the last 24 hours
              </summary>
              <table>
                <caption class="visually-hidden">Sessions of {tenant.name}</caption>
                <thead>
                  <tr>
                    <th scope="col">Session</th>
                    <th scope="col">Spend</th>
                    <th scope="col">Last request</th>
                  </tr>
                </thead>
                <tbody>
                  {[...tenant.sessions]
                    .sort((a, b) => b.spend_micro_usd - a.spend_micro_usd)
                    .slice(0, 50)
                    .map((s) => (
                      <tr key={s.id}>
                        <th scope="row">
                          <code>{s.id}</code>
                        </th>
                        <td>
                          <SessionSpend
                            id={s.id}
                            spend={s.spend_micro_usd + s.reserved_micro_usd}
                            budget={tenant.budgets["session"] ?? null}
                          />
                        </td>
                        <td>{s.last_request_at}</td>
                      </tr>
                    ))}
                </tbody>
              </table>
            </details>
          )}
        </article>
      ))}
    </Page>
  )
}

/** A session's spend, against the tenant's session budget as a bar when it has one. */
const SessionSpend = ({ id, spend, budget }: { id: string; spend: number; budget: BudgetView | null }) =>
  budget === null ? (
    <span class="bar-text">{usd(spend)}</span>
  ) : (
    <Bar
      label={`Session ${id}`}
      value={spend}
      max={budget.limit_micro_usd}
      text={`${usd(spend)} of ${usd(budget.limit_micro_usd)} (${budget.mode})`}
    />
  )
