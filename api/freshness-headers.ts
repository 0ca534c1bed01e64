// The freshness headers every response of an organization carries (docs/freshness.md).
//
// No standard header says how current a replica's answer is. Peers use their own: Consul's
// `X-Consul-LastContact` (ms since the server heard from its leader), Fauna's `x-txn-time`
// (the transaction time the answer reflects). These follow the same two ideas, without the
// deprecated `X-` prefix (RFC 6648): the instant, and the lag in milliseconds.
import type { Freshness } from '../src/freshness.ts'

/** The PostgreSQL commit instant the organization's data is complete through (RFC 3339, UTC). */
export const COMPLETE_THROUGH_HEADER = 'replica-complete-through'
/** Milliseconds from that instant to the response. */
export const LAG_HEADER = 'replica-lag-ms'
/** Either header's value when the instant is not known: said, not guessed. */
export const UNKNOWN = 'unknown'

export function freshnessHeaders(freshness: Freshness): Record<string, string> {
  const { completeThroughMs, lagMs } = freshness
  return {
    [COMPLETE_THROUGH_HEADER]:
      completeThroughMs === undefined ? UNKNOWN : new Date(completeThroughMs).toISOString(),
    [LAG_HEADER]: lagMs === undefined ? UNKNOWN : String(lagMs),
  }
}
