import { useEffect, useRef, useState } from "preact/hooks"
import uPlot from "uplot"

export interface ChartSeries {
  readonly label: string
  /** A CSS custom property of the theme, e.g. `--series-1`. */
  readonly color: string
  readonly values: ReadonlyArray<number>
  readonly bars?: boolean
}

interface Props {
  readonly title: string
  /** Bucket starts, epoch seconds. */
  readonly t: ReadonlyArray<number>
  readonly series: ReadonlyArray<ChartSeries>
  readonly format: (value: number) => string
  /** Whole numbers (counts): the axis ticks only integers. */
  readonly integer?: boolean
  readonly height?: number
}

/** Tick steps of a count axis: 1, 2, 5, 10, 20, 50, … */
const INTEGER_STEPS = Array.from({ length: 30 }, (_, i) => [1, 2, 5][i % 3]! * 10 ** Math.floor(i / 3))

const themeColor = (name: string): string =>
  getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888"

/**
 * A time chart (uPlot: canvas, ~50 KB, draws hundreds of thousands of points
 * in milliseconds). Redrawn when its data or the colour scheme changes;
 * sized to its container.
 */
export const Chart = ({ title, t, series, format, integer = false, height = 220 }: Props) => {
  const holder = useRef<HTMLElement>(null)
  // Colours come from the theme: a change of the system's scheme redraws with the new ones.
  const [scheme, setScheme] = useState(0)
  useEffect(() => {
    const media = matchMedia("(prefers-color-scheme: dark)")
    const changed = () => setScheme((n) => n + 1)
    media.addEventListener("change", changed)
    return () => media.removeEventListener("change", changed)
  }, [])
  useEffect(() => {
    const el = holder.current
    if (el === null) return
    const axis = themeColor("--text-muted")
    const grid = themeColor("--grid")
    const bars = uPlot.paths.bars?.({ size: [0.8, 40] })
    const options: uPlot.Options = {
      title,
      width: Math.max(320, el.clientWidth),
      height,
      scales: {
        x: { time: true },
        y: { range: (_u, _min, max) => [0, Math.max(integer ? 1 : 0, max) * 1.05] },
      },
      axes: [
        { stroke: axis, grid: { stroke: grid } },
        {
          stroke: axis,
          grid: { stroke: grid },
          values: (_u, values) => values.map(format),
          size: 70,
          ...(integer ? { incrs: INTEGER_STEPS } : {}),
        },
      ],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: themeColor(s.color),
          fill: s.bars ? themeColor(s.color) + "80" : undefined,
          width: s.bars ? 0 : 2,
          ...(s.bars && bars !== undefined ? { paths: bars } : {}),
          value: (_u: uPlot, v: number | null) => (v === null ? "—" : format(v)),
        })),
      ],
      legend: { show: true },
      cursor: { drag: { x: true, y: false } },
    }
    const data = [t as Array<number>, ...series.map((s) => s.values as Array<number>)] as uPlot.AlignedData
    const plot = new uPlot(options, data, el)
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(320, el.clientWidth), height }))
    resize.observe(el)
    return () => {
      resize.disconnect()
      plot.destroy()
    }
  }, [t, series, title, height, format, integer, scheme])
  return <figure class="chart" aria-label={title} ref={holder} />
}
