import type { MirrorChange } from './mirror.ts'

/**
 * One change per row for a whole batch: the version before the batch's first change and the
 * version after its last. Documents are rebuilt once per batch, from these.
 */
export function coalesce(changes: readonly MirrorChange[]): MirrorChange[] {
  if (changes.length < 2) return [...changes]
  const byRow = new Map<string, MirrorChange>()
  for (const change of changes) {
    const key = `${change.table}\u0000${change.id}`
    const seen = byRow.get(key)
    if (seen === undefined) byRow.set(key, { ...change })
    else seen.current = change.current
  }
  return [...byRow.values()].filter((c) => c.previous !== undefined || c.current !== undefined)
}
