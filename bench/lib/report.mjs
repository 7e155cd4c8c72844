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
  tollgate_usage_db: "tollgate+usage database",
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
  tollgate_messages: "tollgate messages",
  tollgate_bedrock: "tollgate bedrock",
  tollgate_gemini: "tollgate gemini (translated)",
  tollgate_unsticky: "tollgate not sticky",
  tollgate_sticky: "tollgate sticky",
  tollgate_unsticky_redis: "tollgate not sticky (redis)",
  tollgate_sticky_redis: "tollgate sticky (redis)",
}

/**
 * The rows of the API-path phase (after the paired phase; not in the main table), in table order, by
 * group: each group's rows run one after the other, in an order that alternates from round to round. The
 * plain-proxy rows are the main table's plain proxy on another path; each Tollgate row is its own process.
 *   responses    POST /v1/responses through route bench-gpt, and the same body through the plain proxy
 *   translated   POST /v1/chat/completions through the plain proxy, through bench-gpt (passthrough), and
 *                through bench-translated (translated to Anthropic Messages and back)
 *   clouds       POST /v1/messages (Anthropic SDK's shape) through bench-claude (passthrough), through
 *                bench-bedrock (a Bedrock target: SigV4, event-stream frames to SSE) and through
 *                bench-gemini (translate: true to a Gemini target: Messages → Chat → Gemini and back)
 *   sticky       POST /v1/messages through bench-claude and through bench-sticky (the same target,
 *                `sticky: true`: every request's session target is looked up in the store), on the memory
 *                store and on a Redis store (ADR 0073)
 */
export const PATH_GROUPS = {
  responses: ["plain_proxy_responses", "tollgate_responses"],
  translated: ["plain_proxy_chat", "tollgate_chat", "tollgate_translated"],
  clouds: ["tollgate_messages", "tollgate_bedrock", "tollgate_gemini"],
  sticky: ["tollgate_unsticky", "tollgate_sticky", "tollgate_unsticky_redis", "tollgate_sticky_redis"],
}
export const PATH_TARGETS = Object.values(PATH_GROUPS).flat()

/** The ratios the API-path phase reports: `row` ÷ `base`, from the runs of the same round. */
const PATH_COMPARISONS = [
  { name: "responsesOverPlainProxy", row: "tollgate_responses", base: "plain_proxy_responses" },
  { name: "chatOverPlainProxy", row: "tollgate_chat", base: "plain_proxy_chat" },
  { name: "translatedOverPlainProxy", row: "tollgate_translated", base: "plain_proxy_chat" },
  { name: "translatedOverChat", row: "tollgate_translated", base: "tollgate_chat" },
  { name: "bedrockOverMessages", row: "tollgate_bedrock", base: "tollgate_messages" },
  { name: "geminiOverMessages", row: "tollgate_gemini", base: "tollgate_messages" },
  { name: "stickyOverUnsticky", row: "tollgate_sticky", base: "tollgate_unsticky" },
  { name: "stickyRedisOverUnstickyRedis", row: "tollgate_sticky_redis", base: "tollgate_unsticky_redis" },
]

/** The measurements of a row: the fallback row has no SSE run (only JSON throughput and latency). */
export const kindsOf = (target) =>
  target === "tollgate_fallback" ? ["json", "latency"] : ["json", "sse", "latency"]

/**
 * The rows the open-streams phase holds streams through: every server that streams except the fallback
 * row (the scenario header that holds a stream open would also reach its 529 fake and make it answer).
 */
export const holdsStreams = (target) => target !== "direct" && target !== "tollgate_fallback"

/**
 * The rows the paired phase and the open-streams phase put next to the plain proxy, in that order (the
 * Redis row when it runs): the headline figures of #21.
 */
export const PAIRED_ROWS = ["tollgate", "tollgate_limits_redis"]

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
    pairedRows = ["tollgate"],
    rps = null,
    latencyPairS = null,
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
  const paired = {
    ...summarisePairs(pairRuns),
    byRow: Object.fromEntries(pairedRows.map((row) => [row, summarisePairs(pairRuns, { row })])),
  }
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
    latencyPaired: summariseLatencyPairs(pairRuns, { rows: pairedRows, rps, durationS: latencyPairS }),
    openStreams: summariseOpenStreams(targets, openStreams),
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

/** `{ median, min, max, values }` of the numbers in `values`, or null without any. */
const spread = (values) =>
  values.length === 0
    ? null
    : { median: median(values), min: Math.min(...values), max: Math.max(...values), values }

/**
 * The paired phase's latency runs (`kind: "latency"`, open loop at `rps`, `durationS` each): per row of
 * `rows`, in each pair (`pair`, the round) whose two runs both have percentiles, the row's p50 and p99
 * minus the plain proxy's (ms), and their `spread`; the medians of each server's own p50 and p99. Null
 * without latency runs.
 */
const summariseLatencyPairs = (pairRuns, { rows, rps, durationS, base = "plain_proxy" }) => {
  const latency = pairRuns.filter((r) => r.kind === "latency")
  if (latency.length === 0) return null
  const own = (target) => {
    const results = latency.filter((r) => r.target === target).map((r) => r.result)
    return {
      p50Ms: median(results.map((r) => r.p50Ms)),
      p99Ms: median(results.map((r) => r.p99Ms)),
      achievedRps: median(results.map((r) => r.rate)),
      runs: results.length,
    }
  }
  const byRow = {}
  for (const row of rows) {
    const p50 = []
    const p99 = []
    for (const pair of [...new Set(latency.map((r) => r.pair))]) {
      const of = (target) => latency.find((r) => r.pair === pair && r.target === target)?.result
      const proxy = of(base)
      const tollgate = of(row)
      // A failed run has no percentiles: its pair gives no difference (its failure is in the error count).
      if (typeof proxy?.p99Ms !== "number" || typeof tollgate?.p99Ms !== "number") continue
      // To the µs: the latencies are fractions of a ms (performance.now()), their differences float noise.
      p50.push(Math.round((tollgate.p50Ms - proxy.p50Ms) * 1000) / 1000)
      p99.push(Math.round((tollgate.p99Ms - proxy.p99Ms) * 1000) / 1000)
    }
    const toUs = (d) => (d === null ? null : { ...d, median: Math.round(d.median * 1000) / 1000 })
    byRow[row] = {
      ...own(row),
      pairs: p99.length,
      deltaP50Ms: toUs(spread(p50)),
      deltaP99Ms: toUs(spread(p99)),
    }
  }
  const lags = latency.map((r) => r.result.maxSenderLagMs).filter((v) => typeof v === "number")
  return {
    rps,
    durationS,
    proxy: own(base),
    rows: byRow,
    maxSenderLagMs: lags.length === 0 ? null : Math.max(...lags),
  }
}

/**
 * The open-streams phase against the plain proxy: per Tollgate row that held streams, its RSS with the
 * streams open (`rssMb`, the larger of the two samples), `overIdleMb` (that − its RSS just before),
 * `kbPerStream`, `overProxy` (÷ the plain proxy's `rssMb` in the same phase) and whether it ran right
 * before or after the proxy (`adjacentToProxy`); the proxy's own figures; `order`, the phase's order.
 * Null when the phase did not run.
 */
const summariseOpenStreams = (targets, openStreams) => {
  const held = Object.keys(openStreams)
    .filter((target) => targets[target]?.memory?.openStreams != null)
    .sort((a, b) => openStreams[a].position - openStreams[b].position)
  if (held.length === 0) return null
  const figures = (target) => {
    const o = targets[target].memory.openStreams
    return {
      streams: o.streams,
      open: o.open,
      idleBeforeMb: o.idleBeforeMb,
      rssMb: o.rssMb,
      overIdleMb:
        typeof o.rssMb === "number" && typeof o.idleBeforeMb === "number"
          ? round1(o.rssMb - o.idleBeforeMb)
          : null,
      kbPerStream: o.kbPerStream,
    }
  }
  const proxy = held.includes("plain_proxy") ? figures("plain_proxy") : null
  const proxyAt = openStreams.plain_proxy?.position
  const rows = Object.fromEntries(
    held
      .filter((target) => target !== "plain_proxy")
      .map((target) => {
        const row = figures(target)
        return [
          target,
          {
            ...row,
            overProxy:
              typeof row.rssMb === "number" && typeof proxy?.rssMb === "number" && proxy.rssMb > 0
                ? Math.round((row.rssMb / proxy.rssMb) * 100) / 100
                : null,
            adjacentToProxy: proxyAt !== undefined && Math.abs(openStreams[target].position - proxyAt) === 1,
          },
        ]
      }),
  )
  return { streams: openStreams[held[0]].streams, order: held, proxy, rows }
}

/**
 * The paired phase (`pairRuns`: `{ pair, target, kind, result }[]`): per kind (JSON, SSE), the ratio
 * `row` ÷ `base` (default `tollgate` ÷ plain proxy) of each pair's throughput and of its CPU per
 * response, and their medians and ranges; with `delta`, the median difference of CPU per response; for a
 * row with a store of its own (the Redis row), the median of the store's CPU per response. Null for a kind
 * without complete pairs.
 */
const summarisePairs = (pairRuns, { row = "tollgate", base = "plain_proxy", delta = false } = {}) => {
  const byKind = {}
  for (const kind of ["json", "sse"]) {
    const throughput = []
    const cpu = []
    const cpuDelta = []
    const storeCpu = []
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
      const store = perResponse(tollgate.extraCpuMs, tollgate)
      if (typeof store === "number") storeCpu.push(store)
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
            ...(storeCpu.length > 0 ? { storeCpuUsPerResponseMedian: median(storeCpu) } : {}),
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
  const held = summary.openStreams
  if (held != null) {
    out.push(
      "",
      `RSS with ${held.streams} open streams (open-streams phase, in this order; RSS: the larger of the two samples; ÷ proxy: RSS ÷ the plain proxy's):`,
      ...table(
        ["", "idle MB", "at open", "1 s later", "RSS MB", "RSS − idle", "KB/stream", "÷ proxy", "open in ms"],
        held.order.map((target) => {
          const o = summary.targets[target].memory.openStreams
          return [
            LABELS[target],
            fmt(o.idleBeforeMb),
            fmt(o.rssAtOpenMb),
            fmt(o.rssAfterHoldMb),
            fmt(o.rssMb),
            signed(held.rows[target]?.overIdleMb ?? held.proxy?.overIdleMb, 1),
            fmt(o.kbPerStream, 1),
            fmt(held.rows[target]?.overProxy, 2),
            `${fmt(o.openMs)} (${o.open} open)`,
          ]
        }),
      ),
    )
  }
  if (summary.paths !== undefined) out.push("", ...formatPaths(summary.paths, options))
  out.push(...formatPaired(summary, options))
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

/**
 * The headline block: each row of PAIRED_ROWS against the plain proxy, from the paired phase (throughput
 * and CPU ratios, Δp50 and Δp99) and the open-streams phase (RSS, ÷ the proxy's), then the proxy's own
 * latency and RSS in the same runs. No lines when neither phase gave a figure.
 */
const formatPaired = (summary, options) => {
  const byRow = summary.ratios.paired?.byRow ?? {}
  const latency = summary.latencyPaired
  const held = summary.openStreams
  const rows = PAIRED_ROWS.filter(
    (row) =>
      byRow[row]?.json != null ||
      byRow[row]?.sse != null ||
      latency?.rows[row] != null ||
      held?.rows[row] != null,
  )
  if (rows.length === 0) return []
  const ratio = (p) =>
    p == null ? "—" : `${fmt(p.median, 2)} (${fmt(p.min, 2)}–${fmt(p.max, 2)}, ${p.pairs})`
  const delta = (d) =>
    d == null ? "—" : `${signed(d.median)} (${signed(d.min)}–${signed(d.max)}, ${d.values.length})`
  const rps = latency?.rps ?? options.rps
  const out = [
    "",
    "paired against the plain proxy (adjacent runs, order alternating; median (min–max, n); Δ = row − proxy, ms):",
    ...table(
      [
        "",
        "JSON ÷proxy",
        "SSE ÷proxy",
        "CPU ÷proxy JSON/SSE",
        `Δp50 @${rps}`,
        `Δp99 @${rps}`,
        `RSS MB ${held?.streams ?? options.streams} SSE (÷proxy)`,
      ],
      rows.map((row) => {
        const p = byRow[row]
        const l = latency?.rows[row]
        const m = held?.rows[row]
        return [
          LABELS[row],
          ratio(p?.json),
          ratio(p?.sse),
          `${fmt(p?.json?.cpuPerResponseMedian, 2)} / ${fmt(p?.sse?.cpuPerResponseMedian, 2)}`,
          signed(l?.deltaP50Ms?.median),
          delta(l?.deltaP99Ms),
          m == null ? "—" : `${fmt(m.rssMb)} (${fmt(m.overProxy, 2)})`,
        ]
      }),
    ),
  ]
  const proxy = [
    ...(latency == null
      ? []
      : [
          `p50 ${fmt(latency.proxy.p50Ms, 2)} ms, p99 ${fmt(latency.proxy.p99Ms, 2)} ms at ${rps} req/s ` +
            `(medians of ${latency.proxy.runs} runs of ${latency.durationS} s)`,
        ]),
    ...(held?.proxy == null
      ? []
      : [
          `RSS ${fmt(held.proxy.rssMb)} MB with ${held.streams} streams open ` +
            `(${fmt(held.proxy.idleBeforeMb)} idle, ${fmt(held.proxy.kbPerStream, 1)} KB/stream)`,
        ]),
  ]
  if (proxy.length > 0) out.push(`  plain proxy in the same runs: ${proxy.join("; ")}`)
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
