import { useState } from "preact/hooks"
import { ApiError, send } from "../api.js"
import { dateTime } from "../format.js"
import type { CreatedKey, KeyView, TenantView } from "../types.js"
import { Problem, useApi } from "../useApi.js"
import { Page, TenantOptions } from "../ui.js"

const message = (e: unknown): string => (e instanceof ApiError || e instanceof Error ? e.message : String(e))

/**
 * Keys: every key, config and runtime; create a runtime key (its secret is
 * shown once, held only by this page until dismissed, never fetched again)
 * and revoke one.
 */
export const Keys = () => {
  const keys = useApi<{ keys: ReadonlyArray<KeyView> }>("/admin/keys")
  const tenants = useApi<{ tenants: ReadonlyArray<TenantView> }>("/admin/tenants")
  const [form, setForm] = useState({ tenant: "", id: "", expires: "" })
  const [created, setCreated] = useState<CreatedKey | undefined>()
  const [problem, setProblem] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const tenant = form.tenant === "" ? (tenants.data?.tenants[0]?.name ?? "") : form.tenant

  const create = async (event: Event) => {
    event.preventDefault()
    setProblem(undefined)
    setBusy(true)
    try {
      const body = {
        tenant,
        id: form.id.trim(),
        ...(form.expires === "" ? {} : { expires_at: new Date(`${form.expires}Z`).toISOString() }),
      }
      setCreated(await send<CreatedKey>("POST", "/admin/keys", body))
      setForm({ ...form, id: "", expires: "" })
      keys.reload()
    } catch (e) {
      setProblem(message(e))
    } finally {
      setBusy(false)
    }
  }

  const revoke = async (key: KeyView) => {
    if (!confirm(`Revoke key "${key.id}" of ${key.tenant}? Requests with it get 401 from now on.`)) return
    setProblem(undefined)
    try {
      await send("DELETE", `/admin/keys/${encodeURIComponent(key.tenant)}/${encodeURIComponent(key.id)}`)
      keys.reload()
    } catch (e) {
      setProblem(message(e))
    }
  }

  return (
    <Page id="keys" title="Keys">
      {created !== undefined && (
        <div class="secret" role="status" aria-live="polite">
          <h2>
            Key "{created.id}" of {created.tenant} created
          </h2>
          <p>
            Copy the secret now: it is shown this once. Tollgate keeps only its SHA-256 and cannot show it
            again.
          </p>
          <label for="secret">Secret</label>
          <div class="copy">
            <input
              id="secret"
              readOnly
              value={created.secret}
              onFocus={(e) => (e.target as HTMLInputElement).select()}
            />
            <button type="button" onClick={() => void navigator.clipboard?.writeText(created.secret)}>
              Copy
            </button>
          </div>
          <button type="button" class="secondary" onClick={() => setCreated(undefined)}>
            Done — forget the secret
          </button>
        </div>
      )}
      <form class="filters" onSubmit={create} aria-label="Create a key">
        <label>
          Tenant
          <select
            name="tenant"
            value={tenant}
            onChange={(e) => setForm({ ...form, tenant: (e.target as HTMLSelectElement).value })}
          >
            <TenantOptions tenants={tenants.data?.tenants} />
          </select>
        </label>
        <label>
          Key id
          <input
            name="id"
            required
            maxLength={128}
            value={form.id}
            onInput={(e) => setForm({ ...form, id: (e.target as HTMLInputElement).value })}
          />
        </label>
        <label>
          Expires (UTC, optional)
          <input
            name="expires"
            type="datetime-local"
            value={form.expires}
            onInput={(e) => setForm({ ...form, expires: (e.target as HTMLInputElement).value })}
          />
        </label>
        <button type="submit" disabled={busy || form.id.trim() === "" || tenant === ""}>
          Create key
        </button>
      </form>
      <Problem error={problem ?? keys.error ?? tenants.error} />
      {keys.data !== undefined && (
        <table>
          <caption class="visually-hidden">Keys</caption>
          <thead>
            <tr>
              <th scope="col">Tenant</th>
              <th scope="col">Key</th>
              <th scope="col">Source</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Last used</th>
              <th scope="col">Status</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.data.keys.map((key) => {
              const expired = key.expires_at !== null && Date.parse(key.expires_at) <= Date.now()
              const status = key.revoked_at !== null ? "revoked" : expired ? "expired" : "active"
              return (
                <tr key={`${key.tenant}/${key.id}`} data-key={`${key.tenant}/${key.id}`}>
                  <td>{key.tenant}</td>
                  <th scope="row">{key.id}</th>
                  <td>{key.source}</td>
                  <td>{dateTime(key.created_at)}</td>
                  <td>{dateTime(key.expires_at)}</td>
                  <td>{dateTime(key.last_used_at)}</td>
                  <td>
                    <span class={`badge ${status}`} data-testid="key-status">
                      {status}
                    </span>
                  </td>
                  <td>
                    {key.source === "runtime" && status !== "revoked" && (
                      <button type="button" class="danger" onClick={() => void revoke(key)}>
                        Revoke<span class="visually-hidden"> {key.id}</span>
                      </button>
                    )}
                  </td>
                </tr>
              )
            })}
          </tbody>
        </table>
      )}
    </Page>
  )
}
