// How the projector's SQLite page cache budget is shared among its open files. Pure.
//
// Every batch inserts rows at random places of B-trees keyed by uuid (mirror tables, the routing
// index): with SQLite's default 2 MB per connection, most of those pages are read back from the
// OS on each touch (a 1M-event load made 1.9M page reads and half its CPU time in the kernel).
// The budget bounds the memory instead of a size per file, since OPEN_FILES_MAX files may be open.

/** SQLite's default cache per connection: control.db never gets less. */
export const MIN_CACHE_KIB = 2000

/**
 * The least an organization file gets. SQLite's default would let thousands of small files hold
 * their whole selves in memory (3,000 organizations of 20 providers, about 0.3 MB each: 2.1 GB
 * with all open); below the budget's share a file reads its pages back from the OS's cache.
 */
export const MIN_ORGANIZATION_CACHE_KIB = 64

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
    MIN_ORGANIZATION_CACHE_KIB,
    Math.floor((budgetKiB - controlKiB) / Math.max(1, organizationFiles)),
  )
  return { controlKiB, organizationKiB }
}
