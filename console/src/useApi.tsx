import { useCallback, useEffect, useState } from "preact/hooks"
import { ApiError, getUsage, type UsageSource } from "./api.js"

export interface Loaded<T> {
  readonly data: T | undefined
  readonly error: string | undefined
  readonly loading: boolean
  readonly reload: () => void
  /** Whose usage records the last answer held (usage answers say it in a header). */
  readonly source: UsageSource
}

/** GETs `path` (again when it changes, and every `everyMs` when given, while the tab is visible). */
export const useApi = <T,>(path: string | undefined, everyMs?: number): Loaded<T> => {
  const [data, setData] = useState<T | undefined>()
  const [error, setError] = useState<string | undefined>()
  const [loading, setLoading] = useState(false)
  const [source, setSource] = useState<UsageSource>()
  const [tick, setTick] = useState(0)
  const reload = useCallback(() => setTick((n) => n + 1), [])
  useEffect(() => {
    if (path === undefined) return
    let live = true
    setLoading(true)
    getUsage<T>(path).then(
      ({ value, source: from }) => {
        if (!live) return
        setData(value)
        setSource(from)
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
  return { data, error, loading, reload, source }
}

/** One line saying whose records a usage page shows. */
export const UsageSourceNote = ({ source }: { source: UsageSource }) =>
  source === undefined ? null : (
    <p class="muted" data-testid="usage-source">
      {source === "database"
        ? "Records of every copy of the gateway, from the usage database."
        : "Records of this copy only, from its usage file; other copies keep their own (usage.database gives one view of the fleet)."}
    </p>
  )

export const Problem = ({ error }: { error: string | undefined }) =>
  error === undefined ? null : (
    <p class="error" role="alert">
      {error}
    </p>
  )
