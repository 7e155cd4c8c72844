/**
 * The web console's files (SPEC "Console", ADR 0059): built by
 * `scripts/build.mjs` from `console/` into `dist/console/` and embedded in
 * `bin/tollgate` (and so in the single executable); served at `/admin/ui`
 * without the token (they hold no data: every datum comes from the admin
 * API, which the page calls with the token the user types).
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { gzipSync } from "node:zlib"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse, HttpRouter } from "effect/http"

/** The files, embedded by the bundle's `define`; undefined when running from source (tests). */
declare const __TOLLGATE_CONSOLE__: Readonly<Record<string, string>> | undefined

const TYPES: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
}

/**
 * Only the API of this origin, only this origin's scripts and styles, no
 * frames, no forms elsewhere: the page cannot send the token or data anywhere
 * but to the gateway that served it.
 */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "x-frame-options": "DENY",
}

interface ConsoleFile {
  readonly type: string
  readonly body: Uint8Array
  readonly gzip: Uint8Array
  readonly etag: string
}

const readFiles = (): Readonly<Record<string, string>> | undefined => {
  if (typeof __TOLLGATE_CONSOLE__ !== "undefined") return __TOLLGATE_CONSOLE__
  // From source: what `npm run build` left in dist/console.
  try {
    const dir = new URL("../../dist/console/", import.meta.url)
    return Object.fromEntries(
      Object.keys(TYPES).map((name) => [name, readFileSync(new URL(name, dir), "utf8")]),
    )
  } catch {
    return undefined
  }
}

const prepare = (files: Readonly<Record<string, string>>): ReadonlyMap<string, ConsoleFile> =>
  new Map(
    Object.entries(TYPES).map(([name, type]) => {
      const body = Buffer.from(files[name] ?? "", "utf8")
      const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`
      return [name, { type, body, gzip: gzipSync(body, { level: 9 }), etag }]
    }),
  )

const NOT_BUILT =
  "the console is not in this build: run `npm run build` (it builds console/ into dist/console/ and the executable)"

/** The console's routes: `/admin/ui` (the router takes `/admin/ui/` for it too) is the page; `/admin/ui/app.js` and `app.css` its code. */
export const consoleRoutes = (): ReadonlyArray<HttpRouter.Route<never, never>> => {
  const files = readFiles()
  const prepared = files === undefined ? undefined : prepare(files)
  const serve = (name: string) =>
    Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
      const file = prepared?.get(name)
      if (file === undefined)
        return HttpServerResponse.text(NOT_BUILT, { status: 503, headers: { "cache-control": "no-store" } })
      const headers: Record<string, string> = {
        ...SECURITY_HEADERS,
        "cache-control": "no-cache",
        etag: file.etag,
        vary: "accept-encoding",
      }
      if (request.headers["if-none-match"] === file.etag)
        return HttpServerResponse.empty({ status: 304, headers })
      const gzip = /\bgzip\b/.test(request.headers["accept-encoding"] ?? "")
      if (gzip) headers["content-encoding"] = "gzip"
      return HttpServerResponse.uint8Array(gzip ? file.gzip : file.body, { contentType: file.type, headers })
    })
  return [
    HttpRouter.route("GET", "/admin/ui", serve("index.html")),
    HttpRouter.route("GET", "/admin/ui/app.js", serve("app.js")),
    HttpRouter.route("GET", "/admin/ui/app.css", serve("app.css")),
  ]
}
