// The order of one list view of one organization's file, held in memory: every row's position
// (stamp, id) in page order, kept in step with the file's commits.
//
// Why: a page that misses the page cache, with its bodies known (document-bodies.ts), still read
// its rows' ids and stamps from the file in one statement: on one thread, 29 µs of the 47 µs such
// a page of 50 providers took (bench/page-read.ts). With the order here, a page is a binary
// search and a slice, and the whole read 23 µs; on bench:api's distinct pages the api spends
// 0.20 ms of CPU a page instead of 0.24-0.27.
//
// In step, exactly: a stamp is strictly later than every stamp the file held before it
// (projector/storage/stamp.ts), so what the projector committed since the order was read is
// exactly the rows after the order's last position, at most one per id. Those are read, each
// one's old position dropped, and appended. A deleted row leaves nothing after the last position:
// the count of rows tells, and the deleted rows are then found by counting halves of the order in
// the file (`#dropDeleted`): no row ever comes back before the last position, so a range that
// holds as many rows in the file as in the order lost none. The rows after, the counts and the
// file's data version are read in one snapshot, and the order is used only while the file's data
// version is that one: a page taken from it is the page the file holds in that state.
//
// Only worth it for a list that is paged: the order is read after `READS_BEFORE_ORDER` pages of
// the view missed the page cache (reading 10,000 positions, about 6 ms, costs what some 200 pages'
// statements do). Only the unfiltered list: a filter (`active`, `status`...) reads its own index
// in SQL. Only a list of up to `ORDER_ROWS_MAX` rows: reading an order stalls the api's thread.
// Memory: the order draws on the page cache's budget (PAGE_CACHE_MB), in its recency list with
// the pages and the bodies, and is dropped whole when the budget needs the room.
import type { OrderReader, OrderSql, PageOrder } from './collections.ts'
import type { Position } from './cursor.ts'
import { idKey, type OrderedRowOf } from './document-bodies.ts'
import { CacheEntry, type PageCache } from './page-cache.ts'

/** Pages of a view that miss the page cache before its order is read into memory. */
export const READS_BEFORE_ORDER = 16
/**
 * The longest list whose order is held. Reading an order takes the api's one thread about 0.6 µs
 * a row: 20,000 rows keep that stall near 12 ms. A longer list reads each page's rows from its
 * index, as every list did before.
 */
export const ORDER_ROWS_MAX = 20_000
/**
 * What the search for deleted rows may spend before it gives up for a read of the whole order, in
 * rows read into the order (about 0.6 µs each): one such read's worth. A count of a range of the
 * index costs about two of them (1.4 µs a statement), plus an eighth of one for each row it counts
 * (0.08 µs). One deletion in 20,000 rows costs about 2,500: each half is counted once, the other
 * inferred.
 */
const COUNT_COST = 2
const COUNTED_ROWS_PER_READ = 8
/** What one row costs the budget: its strings (UTF-16 in the worst case) and its object. */
const ROW_BYTES = 320
const NO_BODY = Buffer.alloc(0)

/** One row's place in its list, with what the known bodies find it by. */
export class OrderedRow implements OrderedRowOf {
  /** `id stamp`, as the known bodies are kept under (document-bodies.ts). */
  readonly row: string
  /** The known bodies' key of the id (`idKey`). */
  readonly key: number

  constructor(
    readonly stamp: string,
    readonly id: string,
  ) {
    this.row = `${id} ${stamp}`
    this.key = idKey(id, 0)
  }
}

export class ListOrder implements PageOrder {
  readonly #cache: PageCache
  readonly #sql: OrderSql
  #rows: OrderedRow[] = []
  /** The data version of the file the rows are in step with; undefined: not held. */
  #version: number | undefined = undefined
  #reads = 0
  #entry: CacheEntry | undefined = undefined

  constructor(cache: PageCache, sql: OrderSql) {
    this.#cache = cache
    this.#sql = sql
  }

  /** Whether the order is held (it may still be behind the file: `rowsAfter` catches it up). */
  get held(): boolean {
    return this.#version !== undefined
  }

  /**
   * Up to `count` rows after `from`, in page order, as the file holds them now; undefined when
   * the order is not held (not yet asked for enough, or larger than the budget), and the caller
   * reads the file.
   */
  rowsAfter(file: OrderReader, from: Position, count: number): readonly OrderedRow[] | undefined {
    if (!this.#cache.enabled) return undefined
    if (this.#version === undefined && ++this.#reads < READS_BEFORE_ORDER) return undefined
    if (this.#version !== file.dataVersion() && !this.#catchUp(file)) return undefined
    if (this.#entry !== undefined) this.#cache.touch(this.#entry)
    const start = firstAfter(this.#rows, from)
    return this.#rows.slice(start, start + count)
  }

  /** Drops the order (the file's handle is closed). */
  clear(): void {
    this.#entry?.forget()
    this.#drop()
  }

  /** Brings the order in step with the file's current state; false when it cannot be held. */
  #catchUp(file: OrderReader): boolean {
    return file.snapshot(() => {
      const version = file.dataVersion()
      if (version !== this.#version) {
        // Counted first (SQLite counts a table from its index's pages, not its rows): a list too
        // long, or larger than the whole budget, is never read into memory.
        const count = file.value(this.#sql.count) as number
        if (count > ORDER_ROWS_MAX || !this.#cache.admits(count * ROW_BYTES)) {
          this.clear()
          return false
        }
        let inStep = false
        if (this.#version !== undefined) {
          this.#append(file)
          inStep = this.#dropDeleted(file, count)
        }
        if (!inStep) this.#readAll(file)
        this.#version = version
      }
      return this.#account()
    })
  }

  /** Appends what was committed since (each changed row moves to the end). */
  #append(file: OrderReader): void {
    const last = this.#rows.at(-1)
    const changed = file.rows(
      this.#sql.after(last === undefined ? ['', ''] : [last.stamp, last.id]),
    )
    if (changed.length > 0) {
      const rows = this.#rows
      removeIds(rows, new Set(changed.map((row) => row[1] as string)))
      for (const [stamp, id] of changed) rows.push(new OrderedRow(stamp as string, id as string))
    }
  }

  /**
   * Drops the rows the file no longer holds, `count` being how many it holds: the order's halves
   * are counted in the file, down to the rows missing. False when that would count more rows than
   * reading the order again (many deletions), or when the counts contradict the order (a row
   * before the last position that the order lacks): then the caller reads it whole.
   */
  #dropDeleted(file: OrderReader, count: number): boolean {
    const rows = this.#rows
    if (rows.length === count) return true
    if (rows.length < count) return false
    const deleted = new Set<string>()
    let budget = rows.length
    // `missing` of the rows from `low` to `high` (excluded) are gone from the file.
    const search = (low: number, high: number, missing: number): boolean => {
      if (missing === 0) return true
      if (missing < 0 || missing > high - low) return false
      if (missing === high - low) {
        for (let i = low; i < high; i++) deleted.add(rows[i]!.id)
        return true
      }
      const middle = (low + high) >>> 1
      budget -= COUNT_COST + (middle - low) / COUNTED_ROWS_PER_READ
      if (budget < 0) return false
      const first = rows[low]!
      const last = rows[middle - 1]!
      const held = file.value(
        this.#sql.between([first.stamp, first.id], [last.stamp, last.id]),
      ) as number
      const missingLeft = middle - low - held
      return search(low, middle, missingLeft) && search(middle, high, missing - missingLeft)
    }
    if (!search(0, rows.length, rows.length - count)) return false
    removeIds(rows, deleted)
    return true
  }

  #readAll(file: OrderReader): void {
    this.#rows = file
      .rows(this.#sql.all)
      .map(([stamp, id]) => new OrderedRow(stamp as string, id as string))
  }

  /** Accounts for the order in the budget at its current size; false (and dropped) if over it. */
  #account(): boolean {
    const bytes = this.#rows.length * ROW_BYTES
    const previous = this.#entry
    if (previous?.bytes === bytes) return true
    if (previous !== undefined) {
      this.#entry = undefined
      this.#cache.remove(previous)
    }
    if (!this.#cache.admits(bytes)) {
      this.#drop()
      return false
    }
    const entry = new CacheEntry(NO_BODY, bytes, () => {
      if (this.#entry === entry) this.#drop()
      this.#cache.remove(entry)
    })
    this.#entry = entry
    this.#cache.add(entry)
    return true
  }

  #drop(): void {
    this.#entry = undefined
    this.#rows = []
    this.#version = undefined
    this.#reads = 0
  }
}

/**
 * Removes the rows of `ids` from `rows` in place, keeping the others' order. Found by the ids'
 * numeric keys first (a number is found in a fraction of a string's time), and not copied into a
 * new array: for 20,000 rows at every commit, that cost 1.2 ms.
 */
function removeIds(rows: OrderedRow[], ids: ReadonlySet<string>): void {
  const keys = new Set<number>()
  for (const id of ids) keys.add(idKey(id, 0))
  let kept = 0
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    if (keys.has(row.key) && ids.has(row.id)) continue
    if (kept !== i) rows[kept] = row
    kept++
  }
  rows.length = kept
}

/** The index of the first row after `from` in `(stamp, id)` order (rows.length: none). */
function firstAfter(rows: readonly OrderedRow[], from: Position): number {
  const stamp = from[0] ?? ''
  const id = from[1] ?? ''
  let low = 0
  let high = rows.length
  while (low < high) {
    const middle = (low + high) >>> 1
    const row = rows[middle]!
    if (row.stamp < stamp || (row.stamp === stamp && row.id <= id)) low = middle + 1
    else high = middle
  }
  return low
}
