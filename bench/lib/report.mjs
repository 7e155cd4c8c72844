// Turns the per-run results into the summary: medians over rounds, the table, the ratios to the plain
// proxy and to Tollgate without limits or tracing, the latency each row adds over going direct, and each
// server's resident memory (idle after warm-up, and with the open-streams phase's streams open).

/** Every row the bench knows, in table order. A run measures the ones its options enable. */
export const TARGETS = [
  "direct",
  "plain_proxy",
  "tollgate",
  "tollgate_limits_memory",
  "tollgate_limits_redis",
  "tollgate_limits_redis_shared",
  "tollgate_fallback",
  "tollgate_traced",
  "tollgate_traced_sampled",
]
export const LABELS = {
  direct: "direct",
  plain_proxy: "plain proxy",
  tollgate: "tollgate",
  tollgate_limits_memory: "tollgate+limits(memory)",
  tollgate_limits_redis: "tollgate+limits(redis)",
  tollgate_limits_redis_shared: "tollgate+limits(redis)+shared breakers",
  tollgate_fallback: "tollgate fallback (529→ok)",
  tollgate_traced: "tollgate+tracing 1.0",
  tollgate_traced_sampled: "tollgate+tracing 0.1",
  plain_proxy_responses: "plain proxy (responses)",
  tollgate_responses: "tollgate responses",
  plain_proxy_chat: "plain proxy (chat)",
  tollgate_chat: "tollgate chat",
  tollgate_translated: "tollgate translated",
}

/**
 * The rows of the API-path phase (after the paired phase; not in the main table), in table order, by
 * group: each group's rows run one after the other, in an order that alternates from round to round. The
 * plain-proxy rows are the main table's plain proxy on another path; each Tollgate row is its own process.
 *   responses    POST /v1/responses through route bench-gpt, and the same body through the plain proxy
 *   translated   POST /v1/chat/completions through the plain proxy, through bench-gpt (passthrough), and
 *                through bench-translated (translated to Anthropic Messages and back)
 */
export const PATH_GROUPS = {
  responses: ["plain_proxy_responses", "tollgate_responses"],
  translated: ["plain_proxy_chat", "tollgate_chat", "tollgate_translated"],
}
export const PATH_TARGETS = Object.values(PATH_GROUPS).flat()

/** The ratios the API-path phase reports: `row` ÷ `base`, from the runs of the same round. */
const PATH_COMPARISONS = [
  { name: "responsesOverPlainProxy", row: "tollgate_responses", base: "plain_proxy_responses" },
  { name: "chatOverPlainProxy", row: "tollgate_chat", base: "plain_proxy_chat" },
  { name: "translatedOverPlainProxy", row: "tollgate_translated", base: "plain_proxy_chat" },
  { name: "translatedOverChat", row: "tollgate_translated", base: "tollgate_chat" },
]

/** The measurements of a row: the fallback row has no SSE run (only JSON throughput and latency). */
export const kindsOf = (target) =>
  target === "tollgate_fallback" ? ["json", "latency"] : ["json", "sse", "latency"]

/**
 * The rows the open-streams phase holds streams through: every server that streams except the fallback
 * row (the scenario header that holds a stream open would also reach its 529 fake and make it answer).
 */
export const holdsStreams = (target) => target !== "direct" && target !== "tollgate_fallback"

/** The rows compared with `tollgate` (no limits, no tracing) in the second table. */
const VARIANTS = [
  "tollgate_limits_memory",
  "tollgate_limits_redis",
  "tollgate_limits_redis_shared",
  "tollgate_fallback",
  "tollgate_traced",
  "tollgate_traced_sampled",
]

/** The rows whose store is the bench's redis-server (its CPU is measured next to theirs). */
const REDIS_ROWS = ["tollgate_limits_redis", "tollgate_limits_redis_shared"]

const median = (values) => {
  const present = values.filter((v) => typeof v === "number" && Number.isFinite(v)).sort((a, b) => a - b)
  if (present.length === 0) return null
  const mid = Math.floor(present.length / 2)
  return present.length % 2 === 1 ? present[mid] : (present[mid - 1] + present[mid]) / 2
}

const round1 = (value) =>
  typeof value === "number" && Number.isFinite(value) ? Math.round(value * 10) / 10 : null
const maxOf = (...values) => {
  const present = values.filter((v) => typeof v === "number" && Number.isFinite(v))
  return present.length === 0 ? null : Math.max(...present)
}

const addErrors = (into, errors) => {
  for (const [kind, n] of Object.entries(errors ?? {})) into[kind] = (into[kind] ?? 0) + n
  return into
}

/** CPU µs per completed response from `ms` CPU ms, or null (direct, or no /proc). */
const perResponse = (ms, run) =>
  ms === null || ms === undefined || run.completed === 0 ? null : (ms * 1000) / run.completed

/**
 * Summarises `runs` (`{ target, kind: "json"|"sse"|"latency", result }[]`, several rounds allowed) for
 * the rows `enabled` into `{ targets: { [target]: { json, sse, latency } | { skipped, optional } },
 * ratios, latencyVsTollgateMs, addedLatencyMs, errorCount, valid }`. `skipped` rows (a target that could
 * not start or failed its smoke test) make the run not valid; `unavailable` rows (an optional tool such
 * as redis-server is missing) are shown but do not.
 */
export const summarise = (
  runs,
  {
    enabled,
    skipped,
    unavailable,
    pairRuns = [],
    rssAfterWarmup = {},
    openStreams = {},
    pathRows = [],
    pathRuns = [],
    pathRounds = 0,
  },
) => {
  const targets = {}
  let errorCount = 0
  for (const target of enabled) {
    if (skipped[target] !== undefined || unavailable[target] !== undefined) {
      targets[target] = { skipped: skipped[target] ?? unavailable[target], optional: !skipped[target] }
      continue
    }
    const kinds = kindsOf(target)
    const of = (kind) =>
      runs.filter((run) => run.target === target && run.kind === kind).map((run) => run.result)
    const throughput = (kind) => {
      if (!kinds.includes(kind)) return null
      const results = of(kind)
      return {
        perSecond: median(results.map((r) => r.rate)),
        serverCpuUsPerResponse:
          target === "direct" ? null : median(results.map((r) => perResponse(r.cpuMs, r))),
        storeCpuUsPerResponse: median(results.map((r) => perResponse(r.extraCpuMs, r))),
        eventsPerStream: median(results.map((r) => r.eventsPerStream)),
        errors: results.reduce((acc, r) => addErrors(acc, r.errors), {}),
        runs: results.length,
      }
    }
    const latency = of("latency")
    targets[target] = {
      json: throughput("json"),
      sse: throughput("sse"),
      latency: {
        p50Ms: median(latency.map((r) => r.p50Ms)),
        p99Ms: median(latency.map((r) => r.p99Ms)),
        achievedRps: median(latency.map((r) => r.rate)),
        maxSenderLagMs: median(latency.map((r) => r.maxSenderLagMs)),
        errors: latency.reduce((acc, r) => addErrors(acc, r.errors), {}),
        runs: latency.length,
      },
    }
    for (const kind of kinds) {
      errorCount += Object.values(targets[target][kind].errors).reduce((sum, n) => sum + n, 0)
    }
    const held = openStreams[target]
    targets[target].memory = {
      idleAfterWarmupMb: round1(rssAfterWarmup[target]?.rss),
      openStreams:
        held === undefined
          ? null
          : {
              streams: held.streams,
              open: held.open,
              openMs: held.openMs,
              idleBeforeMb: round1(held.idleRssMb),
              rssMb: round1(maxOf(held.rssAtOpenMb, held.rssAfterHoldMb)),
              rssAtOpenMb: round1(held.rssAtOpenMb),
              rssAfterHoldMb: round1(held.rssAfterHoldMb),
              hwmMb: round1(held.hwmMb),
              kbPerStream:
                typeof held.idleRssMb === "number" && held.open > 0
                  ? round1(
                      ((maxOf(held.rssAtOpenMb, held.rssAfterHoldMb) - held.idleRssMb) * 1024) / held.open,
                    )
                  : null,
              errors: held.errors,
            },
    }
    if (held !== undefined) errorCount += Object.values(held.errors).reduce((sum, n) => sum + n, 0)
  }
  const ratio = (target, base, kind) => {
    const t = targets[target]?.[kind]?.perSecond
    const b = targets[base]?.[kind]?.perSecond
    return typeof t === "number" && typeof b === "number" && b > 0 ? t / b : null
  }
  const diff = (a, b) => (typeof a === "number" && typeof b === "number" ? a - b : null)
  const measured = enabled.filter((target) => targets[target]?.skipped === undefined)
  const tollgates = measured.filter((target) => target.startsWith("tollgate"))
  const byTarget = (list, f) => Object.fromEntries(list.map((target) => [target, f(target)]))
  const base = targets.tollgate
  const paired = summarisePairs(pairRuns)
  errorCount += [...pairRuns, ...pathRuns].reduce(
    (sum, run) => sum + Object.values(run.result.errors ?? {}).reduce((a, n) => a + n, 0),
    0,
  )
  return {
    targets,
    ratios: {
      tollgateOverPlainProxy: {
        json: ratio("tollgate", "plain_proxy", "json"),
        sse: ratio("tollgate", "plain_proxy", "sse"),
      },
      paired,
      overPlainProxy: byTarget(tollgates, (t) => ({
        json: ratio(t, "plain_proxy", "json"),
        sse: ratio(t, "plain_proxy", "sse"),
      })),
      overTollgate: byTarget(
        tollgates.filter((t) => VARIANTS.includes(t)),
        (t) => ({ json: ratio(t, "tollgate", "json"), sse: ratio(t, "tollgate", "sse") }),
      ),
      ...(REDIS_ROWS.every((t) => measured.includes(t)) ? { sharedOverRedis: sharedOverRedis(targets) } : {}),
    },
    latencyVsTollgateMs: byTarget(
      tollgates.filter((t) => VARIANTS.includes(t)),
      (t) => ({
        p50: diff(targets[t].latency.p50Ms, base?.latency?.p50Ms),
        p99: diff(targets[t].latency.p99Ms, base?.latency?.p99Ms),
        cpuUsPerJson: diff(targets[t].json.serverCpuUsPerResponse, base?.json?.serverCpuUsPerResponse),
        cpuUsPerSse: diff(targets[t].sse?.serverCpuUsPerResponse, base?.sse?.serverCpuUsPerResponse),
      }),
    ),
    addedLatencyMs: byTarget(
      measured.filter((t) => t !== "direct"),
      (t) => ({
        p50: diff(targets[t].latency.p50Ms, targets.direct?.latency?.p50Ms),
        p99: diff(targets[t].latency.p99Ms, targets.direct?.latency?.p99Ms),
      }),
    ),
    ...(pathRows.length === 0
      ? {}
      : { paths: summarisePaths(pathRuns, { pathRows, skipped, rssAfterWarmup, rounds: pathRounds }) }),
    errorCount,
    valid: errorCount === 0 && Object.keys(skipped).length === 0,
  }
}

/**
 * What `breaker.shared: true` adds to the Redis row, from the two rows of the table (not paired): the
 * throughput of `tollgate_limits_redis_shared` ÷ `tollgate_limits_redis`'s, and the difference of CPU µs
 * per response, Tollgate's (`cpuUs…`) and redis-server's (`storeCpuUs…`), row − Redis row.
 */
const sharedOverRedis = (targets) => {
  const row = targets.tollgate_limits_redis_shared
  const base = targets.tollgate_limits_redis
  const over = (a, b) => (typeof a === "number" && typeof b === "number" && b > 0 ? a / b : null)
  const minus = (a, b) => (typeof a === "number" && typeof b === "number" ? a - b : null)
  return {
    json: over(row.json.perSecond, base.json.perSecond),
    sse: over(row.sse.perSecond, base.sse.perSecond),
    cpuUsPerJson: minus(row.json.serverCpuUsPerResponse, base.json.serverCpuUsPerResponse),
    cpuUsPerSse: minus(row.sse.serverCpuUsPerResponse, base.sse.serverCpuUsPerResponse),
    storeCpuUsPerJson: minus(row.json.storeCpuUsPerResponse, base.json.storeCpuUsPerResponse),
    storeCpuUsPerSse: minus(row.sse.storeCpuUsPerResponse, base.sse.storeCpuUsPerResponse),
  }
}

/**
 * The API-path phase (`pathRuns`: `{ pair, target, kind, result }[]`, `pair` being the round): per row of
 * `pathRows` the median throughput and CPU per response over its rounds (or why it was skipped), and the
 * ratios of PATH_COMPARISONS whose rows both ran, paired by round like the paired phase.
 */
const summarisePaths = (pathRuns, { pathRows, skipped, rssAfterWarmup, rounds }) => {
  const targets = {}
  for (const target of pathRows) {
    if (skipped[target] !== undefined) {
      targets[target] = { skipped: skipped[target], optional: false }
      continue
    }
    const throughput = (kind) => {
      const results = pathRuns.filter((r) => r.target === target && r.kind === kind).map((r) => r.result)
      return {
        perSecond: median(results.map((r) => r.rate)),
        serverCpuUsPerResponse: median(results.map((r) => perResponse(r.cpuMs, r))),
        eventsPerStream: median(results.map((r) => r.eventsPerStream)),
        errors: results.reduce((acc, r) => addErrors(acc, r.errors), {}),
        runs: results.length,
      }
    }
    targets[target] = {
      json: throughput("json"),
      sse: throughput("sse"),
      memory: { idleAfterWarmupMb: round1(rssAfterWarmup[target]?.rss) },
    }
  }
  const ratios = {}
  for (const { name, row, base } of PATH_COMPARISONS) {
    if ([row, base].some((target) => targets[target] === undefined || targets[target].skipped !== undefined))
      continue
    ratios[name] = { row, base, ...summarisePairs(pathRuns, { row, base, delta: true }) }
  }
  return { rounds, targets, ratios }
}

/**
 * The paired phase (`pairRuns`: `{ pair, target, kind, result }[]`): per kind, the ratio Tollgate ÷ plain
 * proxy of each pair's throughput and of its CPU per response, and their medians and ranges; null for a
 * kind without complete pairs.
 */
const summarisePairs = (pairRuns, { row = "tollgate", base = "plain_proxy", delta = false } = {}) => {
  const byKind = {}
  for (const kind of ["json", "sse"]) {
    const throughput = []
    const cpu = []
    const cpuDelta = []
    const pairs = [...new Set(pairRuns.filter((r) => r.kind === kind).map((r) => r.pair))]
    for (const pair of pairs) {
      const of = (target) =>
        pairRuns.find((r) => r.kind === kind && r.pair === pair && r.target === target)?.result
      const proxy = of(base)
      const tollgate = of(row)
      // A pair with a failed run (no rate) has no ratio; its failure is in the error count.
      if (proxy === undefined || tollgate === undefined || !(proxy.rate > 0) || !(tollgate.rate > 0)) continue
      throughput.push(tollgate.rate / proxy.rate)
      const p = perResponse(proxy.cpuMs, proxy)
      const t = perResponse(tollgate.cpuMs, tollgate)
      if (typeof p === "number" && typeof t === "number" && p > 0) cpu.push(t / p)
      if (typeof p === "number" && typeof t === "number") cpuDelta.push(t - p)
    }
    byKind[kind] =
      throughput.length === 0
        ? null
        : {
            pairs: throughput.length,
            median: median(throughput),
            min: Math.min(...throughput),
            max: Math.max(...throughput),
            ratios: throughput,
            cpuPerResponseMedian: median(cpu),
            ...(delta ? { cpuUsDeltaMedian: median(cpuDelta) } : {}),
          }
  }
  return byKind
}

const fmt = (value, digits = 0) => (typeof value === "number" ? value.toFixed(digits) : "—")
const signed = (value, digits = 2) =>
  typeof value === "number" ? `${value >= 0 ? "+" : ""}${value.toFixed(digits)}` : "—"

/** Lines of a table: first column left-aligned, the others right-aligned; rows of length 2 are notes. */
const table = (header, rows) => {
  const measured = rows.filter((row) => row.length > 2)
  const widths = header.map((h, i) => Math.max(h.length, ...measured.map((row) => row[i].length)))
  const line = (cells) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join("  ")
      .trimEnd()
  return [
    line(header),
    ...rows.map((row) => (row.length === 2 ? `${row[0].padEnd(widths[0])}  ${row[1]}` : line(row))),
  ]
}

/** The human-readable report, as lines. */
export const formatSummary = (summary, options) => {
  const shown = TARGETS.filter((target) => summary.targets[target] !== undefined)
  const out = table(
    [
      "",
      "JSON req/s",
      "SSE streams/s",
      `p50 ms @${options.rps}`,
      `p99 ms @${options.rps}`,
      "CPU µs/JSON",
      "CPU µs/SSE",
      "RSS MB idle",
      `RSS MB ${options.streams} SSE`,
    ],
    shown.map((target) => {
      const t = summary.targets[target]
      if (t.skipped !== undefined) return [LABELS[target], `skipped: ${t.skipped}`]
      return [
        LABELS[target],
        fmt(t.json.perSecond),
        fmt(t.sse?.perSecond),
        fmt(t.latency.p50Ms, 2),
        fmt(t.latency.p99Ms, 2),
        fmt(t.json.serverCpuUsPerResponse),
        fmt(t.sse?.serverCpuUsPerResponse),
        fmt(t.memory?.idleAfterWarmupMb),
        fmt(t.memory?.openStreams?.rssMb),
      ]
    }),
  )
  const overProxy = summary.ratios.overPlainProxy
  const relative = Object.keys(overProxy)
  if (relative.length > 1) {
    out.push("")
    out.push(
      "relative to plain proxy (÷proxy) and to tollgate without limits or tracing (÷tollgate, Δ = row − tollgate):",
    )
    out.push(
      ...table(
        [
          "",
          "JSON ÷proxy",
          "SSE ÷proxy",
          "JSON ÷tollgate",
          "SSE ÷tollgate",
          "Δp50 ms",
          "Δp99 ms",
          "ΔCPU µs/JSON",
          "ΔCPU µs/SSE",
        ],
        relative.map((target) => {
          const vs = summary.ratios.overTollgate[target]
          const d = summary.latencyVsTollgateMs[target]
          return [
            LABELS[target],
            fmt(overProxy[target].json, 2),
            fmt(overProxy[target].sse, 2),
            fmt(vs?.json, 2),
            fmt(vs?.sse, 2),
            signed(d?.p50),
            signed(d?.p99),
            signed(d?.cpuUsPerJson, 0),
            signed(d?.cpuUsPerSse, 0),
          ]
        }),
      ),
    )
  }
  const { json, sse } = summary.ratios.tollgateOverPlainProxy
  out.push("")
  out.push(`tollgate ÷ plain proxy throughput:  JSON ${fmt(json, 2)}   SSE ${fmt(sse, 2)}   (the rows above)`)
  const paired = summary.ratios.paired
  if (paired?.json != null || paired?.sse != null) {
    const cell = (p) =>
      p == null
        ? "—"
        : `${fmt(p.median, 2)} (${fmt(p.min, 2)}–${fmt(p.max, 2)}, ${p.pairs} pair${p.pairs === 1 ? "" : "s"})`
    const cpu = (p) => (p == null ? "—" : fmt(p.cpuPerResponseMedian, 2))
    out.push(
      `${"  paired, median (min–max, n):".padEnd(36)}JSON ${cell(paired.json)}   SSE ${cell(paired.sse)}` +
        "   (adjacent proxy/tollgate runs)",
    )
    out.push(
      `${"  paired, CPU per response ratio:".padEnd(36)}JSON ${cpu(paired.json)}   SSE ${cpu(paired.sse)}`,
    )
  }
  const added = summary.addedLatencyMs
  const addedRows = Object.keys(added).sort((a, b) => TARGETS.indexOf(a) - TARGETS.indexOf(b))
  addedRows.forEach((target, i) => {
    const prefix = i === 0 ? "added latency vs direct (ms):" : ""
    out.push(
      `${prefix.padEnd(36)}${LABELS[target]} p50 ${signed(added[target].p50)}  p99 ${signed(added[target].p99)}`,
    )
  })
  const redisRows = REDIS_ROWS.filter((target) => summary.targets[target]?.json != null)
  redisRows.forEach((target, i) => {
    const redis = summary.targets[target]
    const prefix = i === 0 ? "redis-server CPU per response:" : ""
    out.push(
      `${prefix.padEnd(36)}${LABELS[target]} µs/JSON ${fmt(redis.json.storeCpuUsPerResponse)}, ` +
        `µs/SSE ${fmt(redis.sse.storeCpuUsPerResponse)}` +
        (i === 0 ? " (its own process: not in the CPU columns above)" : ""),
    )
  })
  const shared = summary.ratios.sharedOverRedis
  if (shared !== undefined) {
    out.push(
      `${"shared breakers ÷ redis row:".padEnd(36)}JSON ${fmt(shared.json, 2)}   SSE ${fmt(shared.sse, 2)}` +
        `   ΔCPU µs/JSON ${signed(shared.cpuUsPerJson, 0)}, µs/SSE ${signed(shared.cpuUsPerSse, 0)}` +
        `   (redis-server ${signed(shared.storeCpuUsPerJson, 0)}, ${signed(shared.storeCpuUsPerSse, 0)}; the rows above, not paired)`,
    )
  }
  const overloaded = shown.filter((target) => {
    const perSecond = summary.targets[target].json?.perSecond
    return typeof perSecond === "number" && perSecond < options.rps * 1.2
  })
  if (overloaded.length > 0) {
    out.push(
      `warning: JSON req/s of ${overloaded.map((t) => LABELS[t]).join(", ")} is below 1.2 × ${options.rps}: ` +
        `at ${options.rps} req/s their p50/p99 are mostly queueing; lower BENCH_RPS to compare latencies`,
    )
  }
  const events = summary.targets.direct?.sse?.eventsPerStream
  if (typeof events === "number") out.push(`SSE events per stream (direct): ${events}`)
  const held = shown.filter((target) => summary.targets[target].memory?.openStreams != null)
  held.forEach((target, i) => {
    const o = summary.targets[target].memory.openStreams
    const prefix = i === 0 ? `RSS with ${options.streams} open streams (MB):` : ""
    out.push(
      `${prefix.padEnd(36)}${LABELS[target]} ${fmt(o.idleBeforeMb)} idle → ${fmt(o.rssAtOpenMb)} at open, ` +
        `${fmt(o.rssAfterHoldMb)} 1 s later (${fmt(o.kbPerStream, 1)} KB/stream; ${o.open} open in ${fmt(o.openMs)} ms)`,
    )
  })
  if (summary.paths !== undefined) out.push("", ...formatPaths(summary.paths, options))
  out.push("")
  if (summary.valid) {
    out.push("no errors")
  } else {
    const pathTargets = summary.paths?.targets ?? {}
    const skipped = [
      ...shown.filter((t) => summary.targets[t].skipped !== undefined && !summary.targets[t].optional),
      ...Object.keys(pathTargets).filter((t) => pathTargets[t].skipped !== undefined),
    ]
    const why = [
      ...(summary.errorCount > 0 ? [`${summary.errorCount} failed requests`] : []),
      ...skipped.map((target) => `${LABELS[target]} not measured`),
    ]
    out.push(`RUN NOT VALID: ${why.join(", ")}`)
    for (const target of shown) {
      const t = summary.targets[target]
      if (t.skipped !== undefined) continue
      for (const kind of kindsOf(target)) {
        const errors = Object.entries(t[kind].errors)
        if (errors.length > 0) {
          out.push(`  ${LABELS[target]} ${kind}: ${errors.map(([k, n]) => `${k}×${n}`).join(", ")}`)
        }
      }
      const held = Object.entries(t.memory?.openStreams?.errors ?? {})
      if (held.length > 0) {
        out.push(`  ${LABELS[target]} open streams: ${held.map(([k, n]) => `${k}×${n}`).join(", ")}`)
      }
    }
    for (const [target, t] of Object.entries(pathTargets)) {
      if (t.skipped !== undefined) {
        out.push(`  ${LABELS[target]}: ${t.skipped}`)
        continue
      }
      for (const kind of ["json", "sse"]) {
        const errors = Object.entries(t[kind].errors)
        if (errors.length > 0) {
          out.push(`  ${LABELS[target]} ${kind}: ${errors.map(([k, n]) => `${k}×${n}`).join(", ")}`)
        }
      }
    }
  }
  return out
}

/** The API-path phase's lines: its rows' medians, then the paired ratios. */
const formatPaths = (paths, options) => {
  const rows = PATH_TARGETS.filter((target) => paths.targets[target] !== undefined)
  const out = [
    `other API paths (${paths.rounds} rounds of adjacent runs, ${options.pairS} s each, order alternating; cells: medians of the rounds):`,
    ...table(
      ["", "JSON req/s", "SSE streams/s", "CPU µs/JSON", "CPU µs/SSE", "RSS MB idle"],
      rows.map((target) => {
        const t = paths.targets[target]
        if (t.skipped !== undefined) return [LABELS[target], `skipped: ${t.skipped}`]
        return [
          LABELS[target],
          fmt(t.json.perSecond),
          fmt(t.sse.perSecond),
          fmt(t.json.serverCpuUsPerResponse),
          fmt(t.sse.serverCpuUsPerResponse),
          fmt(t.memory.idleAfterWarmupMb),
        ]
      }),
    ),
  ]
  const compared = Object.values(paths.ratios)
  if (compared.length === 0) return out
  const cell = (p) =>
    p == null ? "—" : `${fmt(p.median, 2)} (${fmt(p.min, 2)}–${fmt(p.max, 2)}, ${p.pairs})`
  out.push(
    "",
    "  paired by round, throughput median (min–max, n), CPU per response ratio and Δ (row − base, medians):",
    ...table(
      ["", "JSON ÷", "SSE ÷", "CPU/JSON ÷", "CPU/SSE ÷", "ΔCPU µs/JSON", "ΔCPU µs/SSE"],
      compared.map(({ row, base, json, sse }) => [
        `  ${LABELS[row]} ÷ ${LABELS[base]}`,
        cell(json),
        cell(sse),
        fmt(json?.cpuPerResponseMedian, 2),
        fmt(sse?.cpuPerResponseMedian, 2),
        signed(json?.cpuUsDeltaMedian, 0),
        signed(sse?.cpuUsDeltaMedian, 0),
      ]),
    ),
  )
  return out
}
