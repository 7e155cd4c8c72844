import "uplot/dist/uPlot.min.css"
import "./style.css"
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { onSignedOut, signedIn, signOut } from "./api.js"
import { Login } from "./pages/Login.js"
import { Overview } from "./pages/Overview.js"
import { Tenants } from "./pages/Tenants.js"
import { Breakers } from "./pages/Breakers.js"
import { Usage } from "./pages/Usage.js"
import { Keys } from "./pages/Keys.js"

const PAGES = [
  { path: "overview", title: "Overview", Page: Overview },
  { path: "tenants", title: "Tenants", Page: Tenants },
  { path: "breakers", title: "Breakers", Page: Breakers },
  { path: "usage", title: "Usage", Page: Usage },
  { path: "keys", title: "Keys", Page: Keys },
] as const

const currentPath = (): string => {
  const path = location.hash.replace(/^#\/?/, "")
  return PAGES.some((p) => p.path === path) ? path : "overview"
}

const App = () => {
  const [authed, setAuthed] = useState(signedIn())
  const [path, setPath] = useState(currentPath())
  useEffect(() => onSignedOut(() => setAuthed(false)), [])
  useEffect(() => {
    const changed = () => setPath(currentPath())
    addEventListener("hashchange", changed)
    return () => removeEventListener("hashchange", changed)
  }, [])
  const page = PAGES.find((p) => p.path === path)!
  useEffect(() => {
    document.title = authed ? `${page.title} · Tollgate` : "Sign in · Tollgate"
    // Moves focus to the page's heading for keyboard and screen-reader users.
    document.querySelector<HTMLElement>("main h1")?.focus()
  }, [authed, page])
  if (!authed) return <Login onSignedIn={() => setAuthed(true)} />
  const { Page } = page
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="bar">
        <span class="brand">Tollgate</span>
        <nav aria-label="Pages">
          <ul>
            {PAGES.map((p) => (
              <li key={p.path}>
                <a href={`#/${p.path}`} aria-current={p.path === path ? "page" : undefined}>
                  {p.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button type="button" class="secondary" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main">
        <Page />
      </main>
    </>
  )
}

render(<App />, document.getElementById("app")!)
