/**
 * The console's only way out of the browser: the admin API of the gateway
 * that served the page, with the admin token the user typed. The token is
 * kept in this tab's sessionStorage (so a reload keeps the session) and
 * removed at sign-out or when the API refuses it; nothing else is stored.
 */

const TOKEN_KEY = "tollgate.admin-token"

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param?: string,
  ) {
    super(message)
  }
}

let token: string | undefined = sessionStorage.getItem(TOKEN_KEY) ?? undefined
const signedOutListeners = new Set<() => void>()

export const signedIn = (): boolean => token !== undefined

/** Called when the API refuses the token (it was changed on the gateway): the session ends. */
export const onSignedOut = (listener: () => void): (() => void) => {
  signedOutListeners.add(listener)
  return () => signedOutListeners.delete(listener)
}

export const signOut = (): void => {
  token = undefined
  sessionStorage.removeItem(TOKEN_KEY)
  for (const listener of signedOutListeners) listener()
}

const request = async (method: string, path: string, body?: unknown, using = token): Promise<Response> => {
  if (using === undefined) throw new ApiError(401, "not signed in")
  const headers: Record<string, string> = { authorization: `Bearer ${using}` }
  if (body !== undefined) headers["content-type"] = "application/json"
  let response: Response
  try {
    response = await fetch(path, {
      method,
      headers,
      cache: "no-store",
      credentials: "omit",
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
  } catch {
    throw new ApiError(0, "the gateway could not be reached")
  }
  if (response.ok) return response
  let message = `${response.status} ${response.statusText}`
  let param: string | undefined
  try {
    const parsed = (await response.json()) as { error?: { message?: string; param?: string } }
    if (parsed.error?.message !== undefined) message = parsed.error.message
    param = parsed.error?.param
  } catch {
    // Not JSON: the status line says enough.
  }
  if (response.status === 401 && using === token) signOut()
  throw new ApiError(response.status, message, param)
}

/** Checks `candidate` against the API; keeps it only when the API accepts it. */
export const signIn = async (candidate: string): Promise<void> => {
  await request("GET", "/admin/tenants", undefined, candidate)
  token = candidate
  sessionStorage.setItem(TOKEN_KEY, candidate)
}

export const get = async <T>(path: string): Promise<T> => (await request("GET", path)).json() as Promise<T>

/** Whose usage records an answer holds: the fleet's (`database`), this copy's (`file`), or not said. */
export type UsageSource = "database" | "file" | undefined

/** `get`, with the answer's `x-tollgate-usage-source`. */
export const getUsage = async <T>(path: string): Promise<{ value: T; source: UsageSource }> => {
  const response = await request("GET", path)
  const header = response.headers.get("x-tollgate-usage-source")
  const source = header === "database" || header === "file" ? header : undefined
  return { value: (await response.json()) as T, source }
}

export const send = async <T>(method: "POST" | "DELETE", path: string, body?: unknown): Promise<T> =>
  (await request(method, path, body)).json() as Promise<T>

/** Fetches `path` and hands it to the browser as a download named by the answer. */
export const download = async (path: string, fallbackName: string): Promise<void> => {
  const response = await request("GET", path)
  const disposition = response.headers.get("content-disposition") ?? ""
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? fallbackName
  const url = URL.createObjectURL(await response.blob())
  const link = document.createElement("a")
  link.href = url
  link.download = name
  document.body.append(link)
  link.click()
  link.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

/** A query string of the defined, non-empty values. */
export const query = (params: Record<string, string | undefined>): string => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params))
    if (value !== undefined && value !== "") search.set(key, value)
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}
