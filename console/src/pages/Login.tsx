import { useState } from "preact/hooks"
import { ApiError, signIn } from "../api.js"

/** The admin token, typed once: checked against the API before anything is shown. */
export const Login = ({ onSignedIn }: { onSignedIn: () => void }) => {
  const [token, setToken] = useState("")
  const [error, setError] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      await signIn(token.trim())
      setToken("")
      onSignedIn()
    } catch (e) {
      setError(
        e instanceof ApiError && e.status === 401
          ? "That is not the admin token of this gateway."
          : e instanceof Error
            ? e.message
            : String(e),
      )
    } finally {
      setBusy(false)
    }
  }
  return (
    <main id="main" class="login">
      <form onSubmit={submit} aria-describedby="login-help">
        <h1 tabIndex={-1}>Tollgate console</h1>
        <p id="login-help">
          Sign in with the admin token (the value of <code>admin.token_env</code>). It stays in this tab until
          you sign out.
        </p>
        <label for="token">Admin token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          required
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
          aria-invalid={error !== undefined}
          aria-describedby={error === undefined ? undefined : "login-error"}
        />
        <button type="submit" disabled={busy || token.trim() === ""}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {error !== undefined && (
          <p id="login-error" class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  )
}
