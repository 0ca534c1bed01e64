// Lag told from drift document by document, under steady writes.
//
// After the wait (lag.ts) the live file holds everything before the snapshot, and maybe changes
// made after it: the projector does not stop. A document that differs from PostgreSQL's is drift
// only if no change after the snapshot can explain it:
//   - differing or extra in the replica: its stamp says when its served content last changed
//     (stamps move only when the content does). Older than the snapshot (less a clock margin):
//     nothing after the snapshot changed it, so it is drift. Newer: it is changing;
//   - missing in the replica: no stamp to read; drift if the file applied nothing that Kafka got
//     after the snapshot began (its offsets), else changing.
// A changing document is checked again with a new snapshot, and settles as equal or drift there;
// one still changing after every pass is reported as such (not counted as drift, exit 1). The
// other documents settle in the pass that first saw them: they are not re-judged later, so a
// write elsewhere in the organization never holds up its verdict.
import type { ComparedResource, IdSample, ResourceDifferences } from '../documents/index.ts'

/** A document that changed after the snapshot: what it was found as, and its stamp if any. */
export interface Changing {
  id: string
  kind: 'differing' | 'missing' | 'extra'
  stamp?: string
}

/** One pass's verdict on a resource's documents: the ids of each kind. */
export interface Classified {
  resource: ComparedResource
  equal: number
  differing: string[]
  missing: string[]
  extra: string[]
  /** Changed after the snapshot: to check again. */
  changing: Changing[]
}

/**
 * Sorts one pass's differences into drift and changing: `changedSince` is the snapshot's instant
 * less the clock margin (ISO 8601, as stamps are), `ahead` whether the file applied anything
 * Kafka received after the snapshot began.
 */
export function classify(
  diff: ResourceDifferences,
  changedSince: string,
  ahead: boolean,
): Classified {
  const changing: Changing[] = []
  /** The drifted ones; those stamped after `changedSince` go to `changing`. */
  const byStamp = (docs: ResourceDifferences['differing'], kind: 'differing' | 'extra') => {
    const drifted: string[] = []
    for (const d of docs) {
      if (d.stamp >= changedSince) changing.push({ id: d.id, kind, stamp: d.stamp })
      else drifted.push(d.id)
    }
    return drifted
  }
  const differing = byStamp(diff.differing, 'differing')
  const extra = byStamp(diff.extra, 'extra')
  const missing = ahead ? [] : diff.missing
  if (ahead) changing.push(...diff.missing.map((id) => ({ id, kind: 'missing' as const })))
  return { resource: diff.resource, equal: diff.equal, differing, missing, extra, changing }
}

/**
 * The verdict so far with a later pass's: each document still changing takes its new verdict;
 * the others keep theirs. A document whose stamp did not move since the earlier pass did not
 * change in between, so the later pass saw it exactly as of its snapshot: it settles there, as
 * drift if it still differs.
 */
export function settleAgain(so: Classified, later: Classified): Classified {
  const drift = new Map<string, 'differing' | 'missing' | 'extra'>()
  for (const k of ['differing', 'missing', 'extra'] as const) {
    for (const id of later[k]) drift.set(id, k)
  }
  const stillChanging = new Map(later.changing.map((c) => [c.id, c]))
  const next: Classified = {
    ...so,
    differing: [...so.differing],
    missing: [...so.missing],
    extra: [...so.extra],
    changing: [],
  }
  for (const before of so.changing) {
    const kind = drift.get(before.id)
    const now = stillChanging.get(before.id)
    if (kind !== undefined) next[kind].push(before.id)
    else if (now === undefined) next.equal++
    else if (now.stamp !== undefined && now.stamp === before.stamp) next[now.kind].push(now.id)
    else next.changing.push(now)
  }
  for (const k of ['differing', 'missing', 'extra'] as const) next[k].sort()
  return next
}

export function sample(ids: readonly string[], limit: number): IdSample {
  return { count: ids.length, ids: [...ids].sort().slice(0, limit) }
}
