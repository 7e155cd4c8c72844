import { useCallback, useEffect, useState } from "preact/hooks"
import { ApiError, get } from "./api.js"

export interface Loaded<T> {
  readonly data: T | undefined
  readonly error: string | undefined
  readonly loading: boolean
  readonly reload: () => void
}

/** GETs `path` (again when it changes, and every `everyMs` when given, while the tab is visible). */
export const useApi = <T,>(path: string | undefined, everyMs?: number): Loaded<T> => {
  const [data, setData] = useState<T | undefined>()
  const [error, setError] = useState<string | undefined>()
  const [loading, setLoading] = useState(false)
  const [tick, setTick] = useState(0)
  const reload = useCallback(() => setTick((n) => n + 1), [])
  useEffect(() => {
    if (path === undefined) return
    let live = true
    setLoading(true)
    get<T>(path).then(
      (value) => {
        if (!live) return
        setData(value)
        setError(undefined)
        setLoading(false)
      },
      (e: unknown) => {
        if (!live) return
        setError(e instanceof ApiError || e instanceof Error ? e.message : String(e))
        setLoading(false)
      },
    )
    return () => {
      live = false
    }
  }, [path, tick])
  useEffect(() => {
    if (everyMs === undefined) return
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") reload()
    }, everyMs)
    return () => clearInterval(timer)
  }, [everyMs, reload])
  return { data, error, loading, reload }
}

export const Problem = ({ error }: { error: string | undefined }) =>
  error === undefined ? null : (
    <p class="error" role="alert">
      {error}
    </p>
  )
