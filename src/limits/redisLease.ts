/**
 * Redis leases (ADR 0063, 0065): what one admission may count for several
 * requests of a copy, and which requests one lease may cover.
 */
import { MINUTE_MS, type AdmitRequest, type Admitted, type PeriodBudget } from "./Store.js"

/** Requests one lease covers (ADR 0063). */
export const LEASE_REQUESTS = 32
/** A lease is granted only while this many leases would still fit under every limit and budget. */
export const LEASE_MARGIN = 64
/**
 * A lease's tokens and reservation: this many times its requests' worth at
 * the granting request's size, so that larger requests than that one still
 * fit in it (the requests count ends a lease first when sizes are alike).
 */
export const LEASE_SLACK = 2

/**
 * What a lease has left (ADR 0063): requests the copy may still admit
 * without asking Redis, with the tokens and reservation Redis already
 * counted for them, in the minute and budget periods of its grant.
 */
export interface Lease {
  readonly tenant: string
  readonly minute: number
  readonly budgets: ReadonlyArray<PeriodBudget>
  /** The grant's answer, the answer of every request the lease admits. */
  readonly admitted: Admitted
  requests: number
  tokens: number
  money: number
  timer: ReturnType<typeof setTimeout> | undefined
}

/**
 * The requests a lease may cover: same tenant, minute, limits and budget
 * periods and checks, tokens counted or not alike. Their sessions, if any,
 * have no budget (ADR 0065): each request's session is written when it settles.
 */
export const leaseId = (request: AdmitRequest): string => {
  let id = `${request.tenant}\n${Math.floor(request.now / MINUTE_MS)}\n${request.requestsPerMinute ?? ""}\n${request.tokensPerMinute ?? ""}\n${request.tokenCost > 0}`
  for (const b of request.budgets) {
    id += `\n${b.key ?? ""}\t${b.name}\t${b.period}\t${b.check?.limit ?? ""}\t${b.check?.hard ?? ""}`
  }
  return id
}
