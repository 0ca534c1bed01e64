// What a refresh did, by document kind: the counts the projector's metrics and a rebuild's report
// carry. A document row counts once (a provider's two variants are one row).

/** A served document variant with its own hash and stamp (providers have two). */
export type DocumentKind =
  | 'provider'
  | 'sensitiveProvider'
  | 'providerGroup'
  | 'enrollment'
  | 'groupEnrollment'
  | 'document'
  | 'expirable'

/** One row per resource: counts are per document row (a provider counts once). */
export type ResourceKind = Exclude<DocumentKind, 'sensitiveProvider'>

export interface RefreshStats {
  rewritten: number
  unchanged: number
  removed: number
}

export interface DetailedRefreshStats extends RefreshStats {
  byKind: Record<ResourceKind, RefreshStats>
}

/** What refreshing one document did; `absent`: nothing to remove, nothing written. */
export type Outcome = 'rewritten' | 'unchanged' | 'removed' | 'absent'

const resourceKinds: readonly ResourceKind[] = [
  'provider',
  'providerGroup',
  'enrollment',
  'groupEnrollment',
  'document',
  'expirable',
]

export function emptyStats(): DetailedRefreshStats {
  const byKind = {} as Record<ResourceKind, RefreshStats>
  for (const kind of resourceKinds) byKind[kind] = { rewritten: 0, unchanged: 0, removed: 0 }
  return { rewritten: 0, unchanged: 0, removed: 0, byKind }
}

export function count(stats: DetailedRefreshStats, kind: ResourceKind, outcome: Outcome): void {
  if (outcome === 'absent') return
  stats[outcome]++
  stats.byKind[kind][outcome]++
}

/** Adds `from`'s counts to `into`'s. */
export function addStats(into: DetailedRefreshStats, from: DetailedRefreshStats): void {
  into.rewritten += from.rewritten
  into.unchanged += from.unchanged
  into.removed += from.removed
  for (const kind of resourceKinds) {
    into.byKind[kind].rewritten += from.byKind[kind].rewritten
    into.byKind[kind].unchanged += from.byKind[kind].unchanged
    into.byKind[kind].removed += from.byKind[kind].removed
  }
}
