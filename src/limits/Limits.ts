import { Clock, Context, Duration, Effect, Layer } from "effect"
import { LiveConfig } from "../config/LiveConfig.js"
import type { TenantConfig } from "../config/model.js"
import type { Endpoint } from "../domain/endpoint.js"
import { BudgetExceeded, RateLimited, StoreUnavailable, type BudgetName } from "../domain/errors.js"
import { noopTelemetry, Telemetry, type TelemetryService } from "../ops/Telemetry.js"
import { makeMemoryStore } from "./memoryStore.js"
import { makeGate, type Queued } from "./gate.js"
import { makeWindowQueue } from "./waiting.js"
import { rateHeaders, retryAfterMs, type RateHeaders } from "./rateHeaders.js"
import {
  budgetsOf,
  check,
  hasHardBudget,
  isHard,
  refusal,
  requestLimitOnly,
  type AdmissionInput,
} from "./admission.js"
import {
  monthOf,
  Store,
  type Admitted,
  type PeriodBudget,
  type Refused,
  type ResponseOwner,
  type SessionTargetKey,
  type SettleRequest,
  type StoreService,
} from "./Store.js"

export { budgetsOf, type AdmissionInput, type AdmissionKey } from "./admission.js"

/** After a store error, how long each copy uses only its local limits before it tries the store again, ms (ADR 0006). */
export const LOCAL_ONLY_MS = 5_000

/**
 * `refused`: a hard budget has no room (the first, narrowest first);
 * `unavailable`: the store could not be asked (the cutoff errs on the safe side).
 */
export type ExtendResult = "extended" | { readonly refused: BudgetName } | "unavailable"

/** An admitted request: what settle and extend need, and its response headers. */
export interface Admission {
  readonly via: "store" | "local"
  readonly tenant: TenantConfig
  readonly admitted: Admitted
  readonly headers: RateHeaders | undefined
  readonly tokenCost: number
  readonly sessionId: string | undefined
  /** The periodic budgets of the admission, with their periods: settle and extend use the same. */
  readonly budgets: ReadonlyArray<PeriodBudget>
  /** Whether a hard budget applies (a periodic one, or the session's): the stream cutoff watches it. */
  readonly hard: boolean
  /** micro-USD reserved so far (admission plus extensions). */
  reserved: number
  settled: boolean
}

/**
 * Admission, settlement and the stream cutoff's extensions over the Store,
 * with ADR 0006's behaviour when the store fails: tenants with a hard budget
 * get 503; the others are served on this copy's local limits (same values,
 * no spend), and the copy stays local-only for 5 s before it tries the store
 * again.
 */
export class Limits extends Context.Service<
  Limits,
  {
    readonly admit: (
      input: AdmissionInput,
    ) => Effect.Effect<Admission, RateLimited | BudgetExceeded | StoreUnavailable>
    /**
     * Replaces the reservation with `cost` and the token estimate with
     * `tokens`, once per admission. Never fails: a failed settle is logged
     * and leaves the reservation (the safe direction, ADR 0006).
     */
    readonly settle: (admission: Admission, cost: number, tokens: number) => Effect.Effect<void>
    /** Extends the reservation by `amount` if the hard budgets allow it (else names the first that refused). */
    readonly extend: (admission: Admission, amount: number) => Effect.Effect<ExtendResult>
    /**
     * Remembers who made a Responses response, in the store (so every copy
     * agrees). Never fails: a store error is logged, and a later
     * `previous_response_id` to it is routed as if unknown.
     */
    readonly rememberResponse: (id: string, owner: ResponseOwner) => Effect.Effect<void>
    /** Who made response `id`; undefined when unknown, expired, or the store cannot say (logged). */
    readonly responseOwner: (id: string) => Effect.Effect<ResponseOwner | undefined>
    /**
     * The target that served the session's last request on a sticky route
     * (ADR 0073), from the store (so every copy agrees); while the store is
     * failing, from this copy's own memory. Never fails.
     */
    readonly sessionTarget: (key: SessionTargetKey) => Effect.Effect<string | undefined>
    /** Remembers the target that served the session (as `sessionTarget`, never fails). */
    readonly rememberSessionTarget: (key: SessionTargetKey, target: string) => Effect.Effect<void>
    /** False from a store error until a store operation succeeds again. */
    readonly storeOk: () => boolean
    /** `storeOk`, asking the store once more when it was failing (what /readyz reports, also with no traffic). */
    readonly checkStore: Effect.Effect<boolean>
    /**
     * Admission before the body (ADR 0049): refuses, from the headers alone, a
     * tenant over its concurrency cap on this copy, or whose request limit or
     * hard month budget the store's last answers show spent; else counts the
     * request in flight until `leave`.
     */
    readonly enter: (
      tenant: TenantConfig,
      endpoint: Endpoint,
    ) => RateLimited | BudgetExceeded | Queued | undefined
    readonly leave: (tenant: TenantConfig) => void
  }
>()("tollgate/limits/Limits") {}

/** The default of `sessions.max_per_tenant`: the most live sessions a tenant keeps. */
export const DEFAULT_MAX_SESSIONS = 10_000

/** The gate's and the window queue's timers and the gateway-wide cap (ADR 0057); tests without queues leave it out. */
export interface QueueOptions {
  /** Runs `f` after `ms` on the gateway's clock; returns a canceler. */
  readonly after: (ms: number, f: () => void) => () => void
  /** `server.max_concurrent_requests` now. */
  readonly maxConcurrent: () => number | undefined
}

/**
 * The limits over `store`. `maxSessions` (`sessions.max_per_tenant`) caps
 * each tenant's live sessions: an admission that starts a new one at the cap
 * evicts the least recently used, counted by `telemetry.sessionsEvicted`
 * (never logged: a flood of new sessions must not flood the log).
 */
export const make = (
  store: StoreService,
  now: () => number,
  telemetry: TelemetryService = noopTelemetry,
  maxSessions: number | (() => number) = DEFAULT_MAX_SESSIONS,
  queues?: QueueOptions,
): Limits["Service"] => {
  // A reload may change the cap (ADR 0052): read it when used.
  const maxSessionsNow = typeof maxSessions === "function" ? maxSessions : () => maxSessions
  const local = makeMemoryStore()
  let localUntil = 0
  /** False from a store error until the next store operation succeeds (what /readyz reports). */
  let healthy = true

  const markDown = (message: string) =>
    Effect.sync(() => {
      localUntil = now() + LOCAL_ONLY_MS
      healthy = false
      telemetry.storeError()
    }).pipe(
      Effect.andThen(
        Effect.logWarning("limit store error; using local limits for 5 s").pipe(
          Effect.annotateLogs("error", message),
        ),
      ),
    )

  const admitLocal = (input: AdmissionInput, t: number) =>
    Effect.gen(function* () {
      if (hasHardBudget(input) && !requestLimitOnly(input)) return yield* new StoreUnavailable()
      const result = yield* local
        .admit({
          tenant: input.tenant.name,
          now: t,
          requestsPerMinute: input.tenant.limits.requestsPerMinute,
          tokensPerMinute: input.tenant.limits.tokensPerMinute,
          tokenCost: input.tokenCost,
          reserve: 0,
          budgets: [],
          session: undefined,
          maxSessions: maxSessionsNow(),
        })
        .pipe(Effect.orDie)
      return { via: "local" as const, result }
    })

  const queueHooks = { queueEntered: telemetry.queueEntered, queueLeft: telemetry.queueLeft }
  const gate = makeGate(now, {
    after: queues?.after ?? (() => () => {}),
    maxConcurrent: queues?.maxConcurrent ?? (() => undefined),
    ...queueHooks,
  })
  const windows = makeWindowQueue({ now, ...queueHooks })

  /** What the gate keeps of a store's refusal (ADR 0049). */
  const learn = (
    tenant: TenantConfig,
    refused: Refused,
    error: RateLimited | BudgetExceeded,
    t: number,
  ): void => {
    // The month and the window as the store read them at `t`, not when the answer arrived.
    if (refused.monthSpend !== undefined) gate.learnMonthSpend(tenant, monthOf(t), refused.monthSpend)
    if (refused.reason === "requests" && error._tag === "RateLimited") {
      // A millisecond early rather than late: the store, not the gate, refuses at the boundary.
      gate.learnRequestLimit(
        tenant,
        error,
        t + Math.max(0, Math.floor(retryAfterMs(refused.requests!, 1)) - 1),
      )
    }
  }

  /** The admission of an answered store (or local) call: a refusal fails, soft budgets passed are logged. */
  const conclude = (
    input: AdmissionInput,
    via: "store" | "local",
    result: Admitted | Refused,
    t: number,
    budgets: ReadonlyArray<PeriodBudget> = [],
  ): Effect.Effect<Admission, RateLimited | BudgetExceeded> => {
    if (result._tag === "Refused") {
      const error = refusal(result, input)
      if (via === "store") learn(input.tenant, result, error, t)
      return Effect.fail(error)
    }
    if (via === "store") gate.learnMonthSpend(input.tenant, result.month, result.monthSpend)
    if (result.sessionsEvicted > 0) telemetry.sessionsEvicted(input.tenant.name, result.sessionsEvicted)
    const admission: Admission = {
      via,
      tenant: input.tenant,
      admitted: result,
      headers: rateHeaders(result.requests, result.tokens),
      tokenCost: input.tokenCost,
      sessionId: input.sessionId,
      budgets,
      hard:
        budgets.some((b) => b.check?.hard === true) ||
        (input.sessionId !== undefined && !requestLimitOnly(input) && isHard(input.tenant.budgets.session)),
      reserved: via === "store" ? input.reserve : 0,
      settled: false,
    }
    if (result.softExceeded.length === 0) return Effect.succeed(admission)
    return Effect.as(
      Effect.forEach(
        result.softExceeded,
        (budget) =>
          Effect.logWarning("soft budget exceeded").pipe(
            Effect.annotateLogs({ tenant: input.tenant.name, budget, session: input.sessionId ?? null }),
          ),
        { discard: true },
      ),
      admission,
    )
  }

  const fallBackToLocal = (input: AdmissionInput, t: number, message: string) =>
    Effect.andThen(
      markDown(message),
      Effect.flatMap(admitLocal(input, t), (outcome) => conclude(input, "local", outcome.result, t)),
    )

  // Plain combinators rather than a generator: this runs once per request, and each generator step is a few
  // more operations of the request fiber.
  const admit = (
    input: AdmissionInput,
  ): Effect.Effect<Admission, RateLimited | BudgetExceeded | StoreUnavailable> =>
    Effect.suspend(() => {
      const t = now()
      if (t < localUntil)
        return Effect.flatMap(admitLocal(input, t), (outcome) => conclude(input, "local", outcome.result, t))
      const tenant = input.tenant
      // count_tokens (no tokens, no money) answers to the request limit only: no budget can refuse it.
      const budgets = budgetsOf(tenant, input.key, t, requestLimitOnly(input))
      return Effect.matchEffect(
        store.admit({
          tenant: tenant.name,
          now: t,
          requestsPerMinute: tenant.limits.requestsPerMinute,
          tokensPerMinute: tenant.limits.tokensPerMinute,
          tokenCost: input.tokenCost,
          reserve: input.reserve,
          budgets,
          session:
            input.sessionId === undefined || requestLimitOnly(input)
              ? undefined
              : { id: input.sessionId, budget: check(tenant.budgets.session) },
          maxSessions: maxSessionsNow(),
        }),
        {
          onFailure: (error) => fallBackToLocal(input, t, error.message),
          onSuccess: (result) => {
            healthy = true
            return conclude(input, "store", result, t, budgets)
          },
        },
      )
    })

  /** Sessions a deferred settlement evicted (ADR 0066), counted as an admission's are. */
  const reportEvicted = (tenant: string, count: number): void => telemetry.sessionsEvicted(tenant, count)
  const settleRequest = (admission: Admission, cost: number, tokens: number): SettleRequest => {
    const store = admission.via === "store"
    const unreserved = admission.admitted.sessionAtSettle
    return {
      tenant: admission.tenant.name,
      now: now(),
      minute: admission.admitted.minute,
      budgets: admission.budgets,
      sessionId: store ? admission.sessionId : undefined,
      reserved: admission.reserved,
      cost: store ? cost : 0,
      tokenDelta: tokens - admission.tokenCost,
      // A lease admitted it (ADR 0065): the session is written now.
      sessionAtSettle:
        store && unreserved !== undefined && admission.sessionId !== undefined
          ? { unreserved, maxSessions: maxSessionsNow() }
          : undefined,
      leased: store && admission.admitted.leased === true,
      evicted: reportEvicted,
    }
  }

  const settleFailed = (admission: Admission, message: string) =>
    Effect.logWarning("settle failed; the reservation stays until the end of its period").pipe(
      Effect.annotateLogs({ tenant: admission.tenant.name, error: message }),
    )

  const settle = (admission: Admission, cost: number, tokens: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (admission.settled) return Effect.void
      admission.settled = true
      return (admission.via === "store" ? store : local).settle(settleRequest(admission, cost, tokens)).pipe(
        Effect.map((evicted) => {
          if (evicted > 0) telemetry.sessionsEvicted(admission.tenant.name, evicted)
        }),
        Effect.catch((error) => settleFailed(admission, error.message)),
      )
    })

  const extend = (admission: Admission, amount: number): Effect.Effect<ExtendResult> =>
    Effect.suspend(() => {
      if (admission.via === "local") return Effect.succeed("unavailable" as const)
      const tenant = admission.tenant
      return store
        .extend({
          tenant: tenant.name,
          now: now(),
          budgets: admission.budgets,
          session:
            admission.sessionId === undefined
              ? undefined
              : { id: admission.sessionId, budget: check(tenant.budgets.session) },
          amount,
        })
        .pipe(
          Effect.map((refusedBy): ExtendResult => {
            if (refusedBy !== undefined) return { refused: refusedBy }
            admission.reserved += amount
            return "extended"
          }),
          Effect.catch((error) => Effect.as(markDown(error.message), "unavailable" as const)),
        )
    })

  const checkStore: Effect.Effect<boolean> = Effect.suspend(() => {
    if (healthy) return Effect.succeed(true)
    return store.tenantState("tollgate-readiness-probe", now()).pipe(
      Effect.as(true),
      Effect.tap(() =>
        Effect.sync(() => {
          healthy = true
          localUntil = 0
        }),
      ),
      Effect.orElseSucceed(() => false),
    )
  })

  const rememberResponse = (id: string, owner: ResponseOwner): Effect.Effect<void> =>
    store
      .rememberResponse(id, owner, now())
      .pipe(
        Effect.catch((error) =>
          Effect.logWarning("could not remember a response's provider").pipe(
            Effect.annotateLogs("error", error.message),
          ),
        ),
      )

  const responseOwner = (id: string): Effect.Effect<ResponseOwner | undefined> =>
    store
      .responseOwner(id, now())
      .pipe(
        Effect.catch((error) =>
          Effect.as(
            Effect.logWarning("could not look up a response's provider; routing as usual").pipe(
              Effect.annotateLogs("error", error.message),
            ),
            undefined,
          ),
        ),
      )

  // While the store fails, this copy's sessions keep their targets here (ADR 0073); a store error marks it down.
  const sessionTarget = (key: SessionTargetKey): Effect.Effect<string | undefined> => {
    const t = now()
    const max = maxSessionsNow()
    if (t < localUntil) return Effect.orDie(local.sessionTarget(key, t, max))
    return store
      .sessionTarget(key, t, max)
      .pipe(
        Effect.catch((error) =>
          Effect.andThen(markDown(error.message), Effect.orDie(local.sessionTarget(key, t, max))),
        ),
      )
  }

  const rememberSessionTarget = (key: SessionTargetKey, target: string): Effect.Effect<void> => {
    const t = now()
    const max = maxSessionsNow()
    const locally = Effect.orDie(local.rememberSessionTarget(key, target, t, max))
    if (t < localUntil) return locally
    return store
      .rememberSessionTarget(key, target, t, max)
      .pipe(Effect.catch((error) => Effect.andThen(markDown(error.message), locally)))
  }

  return {
    enter: gate.enter,
    leave: gate.leave,
    admit: (input) =>
      input.waitUntil === undefined
        ? admit(input)
        : windows.admit(input.tenant, input.waitUntil, admit(input)),
    settle,
    extend,
    rememberResponse,
    responseOwner,
    sessionTarget,
    rememberSessionTarget,
    storeOk: () => healthy,
    checkStore,
  }
}

export const layer = Layer.effect(
  Limits,
  Effect.gen(function* () {
    const store = yield* Store
    const clock = yield* Clock.Clock
    const telemetry = yield* Telemetry
    const live = yield* LiveConfig
    // Queue timers run on the layer's clock (TestClock in tests).
    const run = Effect.runForkWith(yield* Effect.context<never>())
    const after = (ms: number, f: () => void) => {
      const fiber = run(Effect.andThen(Effect.sleep(Duration.millis(ms)), Effect.sync(f)))
      return () => fiber.interruptUnsafe()
    }
    return make(
      store,
      () => clock.currentTimeMillisUnsafe(),
      telemetry,
      () => live.get().sessions.maxPerTenant,
      { after, maxConcurrent: () => live.get().server.maxConcurrentRequests },
    )
  }),
)
