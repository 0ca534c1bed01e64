// How the projector's SQLite page cache budget is shared among its open files. Pure.
//
// Every batch inserts rows at random places of B-trees keyed by uuid (mirror tables, the routing
// index): with SQLite's default 2 MB per connection, most of those pages are read back from the
// OS on each touch (a 1M-event load made 1.9M page reads and half its CPU time in the kernel).
// The budget bounds the memory instead of a size per file, since OPEN_FILES_MAX files may be open.

/** SQLite's default cache per connection: control.db and the routing index never get less. */
export const MIN_CACHE_KIB = 2000

/**
 * The least an organization file gets. SQLite's default would let thousands of small files hold
 * their whole selves in memory (3,000 organizations of 20 providers, about 0.3 MB each: 2.1 GB
 * with all open); below the budget's share a file reads its pages back from the OS's cache.
 */
export const MIN_ORGANIZATION_CACHE_KIB = 64

export interface CacheShares {
  /** The routing index (route-file.ts), touched by every event of every organization. */
  routesKiB: number
  /** Each open organization file. */
  organizationKiB: number
}

/**
 * A quarter of the budget for the routing index, the rest split evenly among the organization files, each
 * share rounded down to a step of a geometric series (four steps to a doubling, `shareStep`).
 */
export function cacheShares(budgetBytes: number, organizationFiles: number): CacheShares {
  const budgetKiB = Math.floor(budgetBytes / 1024)
  const routesKiB = Math.max(MIN_CACHE_KIB, Math.floor(budgetKiB / 4))
  const organizationKiB = Math.max(
    MIN_ORGANIZATION_CACHE_KIB,
    shareStep((budgetKiB - routesKiB) / Math.max(1, organizationFiles)),
  )
  return { routesKiB, organizationKiB }
}

/**
 * The largest step at most `kib`: 2^(n/4) KiB, whole. Each file opened changes the even split, and
 * a lane gives every open file the new share (a pragma each): exact, that is every file again at
 * every open, quadratic in the files open until the floor. With `SQLITE_CACHE_MB=4096`, 20,000
 * renames over 3,000 organizations' files (`--from-file`, all opened by the renames) took 16.6 and
 * 18.6 s; in steps 11.7 and 13.1 s (the default budget, whose floor comes after a few hundred
 * files: 12.2 and 14.2 s, in steps 11.3 and 11.9). The share changes about four times for each
 * doubling of the files open, and a file's share is at most 19% below its even split.
 */
export function shareStep(kib: number): number {
  if (kib < 1) return 0
  const step = 2 ** (Math.floor(Math.log2(kib) * 4 + 1e-9) / 4)
  return Math.floor(Math.min(step, kib))
}
