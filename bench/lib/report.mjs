// Turns the per-run results into the summary: medians over rounds, the table, the ratios Tollgate ÷ plain
// proxy, and the latency Tollgate adds over going direct.

export const TARGETS = ["direct", "plain_proxy", "tollgate"]
export const LABELS = { direct: "direct", plain_proxy: "plain proxy", tollgate: "tollgate" }

const median = (values) => {
  const present = values.filter((v) => typeof v === "number" && Number.isFinite(v)).sort((a, b) => a - b)
  if (present.length === 0) return null
  const mid = Math.floor(present.length / 2)
  return present.length % 2 === 1 ? present[mid] : (present[mid - 1] + present[mid]) / 2
}

const addErrors = (into, errors) => {
  for (const [kind, n] of Object.entries(errors ?? {})) into[kind] = (into[kind] ?? 0) + n
  return into
}

/** CPU µs the server under test spent per completed response, or null (direct, or no /proc). */
const cpuPerResponse = (run) =>
  run.cpuMs === null || run.cpuMs === undefined || run.completed === 0
    ? null
    : (run.cpuMs * 1000) / run.completed

/**
 * Summarises `runs` (`{ target, kind: "json"|"sse"|"latency", result }[]`, several rounds allowed) into
 * `{ targets: { [target]: { json, sse, latency } }, ratios, addedLatencyMs, errorCount, valid }`.
 */
export const summarise = (runs, skipped) => {
  const targets = {}
  let errorCount = 0
  for (const target of TARGETS) {
    if (skipped[target] !== undefined) {
      targets[target] = { skipped: skipped[target] }
      continue
    }
    const of = (kind) =>
      runs.filter((run) => run.target === target && run.kind === kind).map((run) => run.result)
    const throughput = (results) => ({
      perSecond: median(results.map((r) => r.rate)),
      serverCpuUsPerResponse: target === "direct" ? null : median(results.map(cpuPerResponse)),
      eventsPerStream: median(results.map((r) => r.eventsPerStream)),
      errors: results.reduce((acc, r) => addErrors(acc, r.errors), {}),
      runs: results.length,
    })
    const latency = of("latency")
    targets[target] = {
      json: throughput(of("json")),
      sse: throughput(of("sse")),
      latency: {
        p50Ms: median(latency.map((r) => r.p50Ms)),
        p99Ms: median(latency.map((r) => r.p99Ms)),
        achievedRps: median(latency.map((r) => r.rate)),
        maxSenderLagMs: median(latency.map((r) => r.maxSenderLagMs)),
        errors: latency.reduce((acc, r) => addErrors(acc, r.errors), {}),
        runs: latency.length,
      },
    }
    for (const kind of ["json", "sse", "latency"]) {
      errorCount += Object.values(targets[target][kind].errors).reduce((sum, n) => sum + n, 0)
    }
  }
  const ratio = (kind) => {
    const t = targets.tollgate?.[kind]?.perSecond
    const p = targets.plain_proxy?.[kind]?.perSecond
    return typeof t === "number" && typeof p === "number" && p > 0 ? t / p : null
  }
  const added = (target, q) => {
    const a = targets[target]?.latency?.[q]
    const d = targets.direct?.latency?.[q]
    return typeof a === "number" && typeof d === "number" ? a - d : null
  }
  return {
    targets,
    ratios: { tollgateOverPlainProxy: { json: ratio("json"), sse: ratio("sse") } },
    addedLatencyMs: {
      plain_proxy: { p50: added("plain_proxy", "p50Ms"), p99: added("plain_proxy", "p99Ms") },
      tollgate: { p50: added("tollgate", "p50Ms"), p99: added("tollgate", "p99Ms") },
    },
    errorCount,
    valid: errorCount === 0 && Object.keys(skipped).length === 0,
  }
}

const fmt = (value, digits = 0) => (typeof value === "number" ? value.toFixed(digits) : "—")
const signed = (value, digits = 2) =>
  typeof value === "number" ? `${value >= 0 ? "+" : ""}${value.toFixed(digits)}` : "—"

/** The human-readable report, as lines. */
export const formatSummary = (summary, options) => {
  const header = [
    "",
    "JSON req/s",
    "SSE streams/s",
    `p50 ms @${options.rps}`,
    `p99 ms @${options.rps}`,
    "CPU µs/JSON",
    "CPU µs/SSE",
  ]
  const rows = TARGETS.map((target) => {
    const t = summary.targets[target]
    if (t.skipped !== undefined) return [LABELS[target], `skipped: ${t.skipped}`]
    return [
      LABELS[target],
      fmt(t.json.perSecond),
      fmt(t.sse.perSecond),
      fmt(t.latency.p50Ms, 2),
      fmt(t.latency.p99Ms, 2),
      fmt(t.json.serverCpuUsPerResponse),
      fmt(t.sse.serverCpuUsPerResponse),
    ]
  })
  const measured = rows.filter((row) => row.length > 2)
  const widths = header.map((h, i) => Math.max(h.length, ...measured.map((row) => row[i].length)))
  const line = (cells) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join("  ")
      .trimEnd()
  const out = [
    line(header),
    ...rows.map((row) => (row.length === 2 ? `${row[0].padEnd(widths[0])}  ${row[1]}` : line(row))),
  ]
  const { json, sse } = summary.ratios.tollgateOverPlainProxy
  out.push("")
  out.push(`tollgate ÷ plain proxy throughput:  JSON ${fmt(json, 2)}   SSE ${fmt(sse, 2)}`)
  const a = summary.addedLatencyMs
  out.push(
    `added latency vs direct (ms):       tollgate p50 ${signed(a.tollgate.p50)}  p99 ${signed(a.tollgate.p99)}`,
  )
  out.push(
    `                                    plain proxy p50 ${signed(a.plain_proxy.p50)}  p99 ${signed(a.plain_proxy.p99)}`,
  )
  const events = summary.targets.direct.sse?.eventsPerStream
  if (typeof events === "number") out.push(`SSE events per stream (direct): ${events}`)
  out.push("")
  if (summary.valid) {
    out.push("no errors")
  } else {
    const skipped = TARGETS.filter((target) => summary.targets[target].skipped !== undefined)
    const why = [
      ...(summary.errorCount > 0 ? [`${summary.errorCount} failed requests`] : []),
      ...skipped.map((target) => `${LABELS[target]} not measured`),
    ]
    out.push(`RUN NOT VALID: ${why.join(", ")}`)
    for (const target of TARGETS) {
      const t = summary.targets[target]
      if (t.skipped !== undefined) continue
      for (const kind of ["json", "sse", "latency"]) {
        const errors = Object.entries(t[kind].errors)
        if (errors.length > 0) {
          out.push(`  ${LABELS[target]} ${kind}: ${errors.map(([k, n]) => `${k}×${n}`).join(", ")}`)
        }
      }
    }
  }
  return out
}
