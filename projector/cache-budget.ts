// How the projector's SQLite page cache budget is shared among its open files. Pure.
//
// Every batch inserts rows at random places of B-trees keyed by uuid (mirror tables, the routing
// index): with SQLite's default 2 MB per connection, most of those pages are read back from the
// OS on each touch (a 1M-event load made 1.9M page reads and half its CPU time in the kernel).
// The budget bounds the memory instead of a size per file, since OPEN_FILES_MAX files may be open.

/** SQLite's default cache per connection: no file gets less. */
export const MIN_CACHE_KIB = 2000

export interface CacheShares {
  /** control.db: the routing index is touched by every event of every organization. */
  controlKiB: number
  /** Each open organization file. */
  organizationKiB: number
}

/** A quarter of the budget for control.db, the rest split evenly among the organization files. */
export function cacheShares(budgetBytes: number, organizationFiles: number): CacheShares {
  const budgetKiB = Math.floor(budgetBytes / 1024)
  const controlKiB = Math.max(MIN_CACHE_KIB, Math.floor(budgetKiB / 4))
  const organizationKiB = Math.max(
    MIN_CACHE_KIB,
    Math.floor((budgetKiB - controlKiB) / Math.max(1, organizationFiles)),
  )
  return { controlKiB, organizationKiB }
}
