// The stored bodies of one organization's documents of one list view, kept in memory as they were
// last read, each with its version: its id, stamp and stored hash (what a page's ETag is made of,
// api/etag.ts).
//
// Why: a list page that misses the page cache is read from SQLite, and most of that read is the
// bodies. Each provider's row overflows its 4 KB leaf, so a page of 50 walks some 250 database
// pages. The page cache cannot help under live writes: every commit of the projector empties a
// file's pages, so the page customers meet is read afresh. A document's body, though, outlives
// the commits that leave it alone. With the bodies known, a page reads only its rows' ids and
// stamps, from the page's index alone (no row, no body, no overflow page), and is joined here. A
// page with one row not known at its stamp is read whole from the file, as before, and teaches
// its bodies.
//
// Exact, not eventual: in one file an id and a stamp name one body. A stamp is strictly later than
// every stamp the file held before it (projector/storage/stamp.ts), and a body is written only
// with a new stamp when it changes (its hash does). A file replaced by another (a rebuild, a
// repair) is another handle (store.ts), with bodies of its own. So a body is used only when the
// stamp the page's own statement just read is the one it was kept with: the bytes served are those
// the file holds in that state, and the page's versions (its ETag) are those a read of the whole
// page would give.
//
// Isolation: each organization's open handle has bodies of its own (store.ts), learned only from
// its own scoped reads. Memory: the entries draw on the page cache's budget (PAGE_CACHE_MB), in its
// one recency order with the pages. Pure: no I/O.
import type { Position } from './cursor.ts'
import { CacheEntry, type PageCache } from './page-cache.ts'

/** What a body costs the budget beyond its bytes: its map entry, its version (UTF-16), objects. */
const ENTRY_OVERHEAD_BYTES = 160

class KnownBody extends CacheEntry {
  constructor(
    /** `id stamp hash`, as a page's versions list it. */
    readonly version: string,
    /** `id stamp`, as a page's stamps list it. */
    readonly row: string,
    body: Buffer,
    bytes: number,
    forget: () => void,
  ) {
    super(body, bytes, forget)
  }
}

/** A page joined from known bodies: `bodies` in page order, `versions` the page's own rows'. */
export interface KnownPage {
  readonly bodies: readonly Buffer[]
  readonly versions: string
  readonly next: Position | undefined
}

export class DocumentBodies {
  readonly #cache: PageCache
  /**
   * By a hash of the id (`idKey`), not the id: a number is found in a fraction of the time of a
   * string cut out of the page's stamps (8.5 against 28 µs a page of 50). Two ids of one hash
   * share a slot: the second pushes the first out, which costs a read, never a wrong body.
   */
  readonly #byKey = new Map<number, KnownBody>()

  constructor(cache: PageCache) {
    this.#cache = cache
  }

  /** Whether bodies are kept at all (a page cache of 0 bytes keeps nothing). */
  get enabled(): boolean {
    return this.#cache.enabled
  }

  get size(): number {
    return this.#byKey.size
  }

  /**
   * The page of the first `limit` rows of `stamps` (`id stamp` joined by commas, in page order,
   * with rows past the page when others follow it), if every one of their bodies is known at its
   * stamp; undefined otherwise.
   */
  page(stamps: string, limit: number): KnownPage | undefined {
    const bodies: Buffer[] = []
    const versions: string[] = []
    let start = 0
    let last = 0
    while (start < stamps.length && bodies.length < limit) {
      let end = stamps.indexOf(',', start)
      if (end < 0) end = stamps.length
      // Compared as a slice: `startsWith` at an offset took 370 ns a row, three times the rest of
      // the row's work.
      const known = this.#knownAt(idKey(stamps, start), stamps.slice(start, end))
      if (known === undefined) return undefined
      bodies.push(known.body)
      versions.push(known.version)
      last = start
      start = end + 1
    }
    const next = start < stamps.length ? positionOf(stamps, last) : undefined
    return { bodies, versions: versions.join(','), next }
  }

  /**
   * The page of the first `limit` of `rows` (from the list's order in memory, list-order.ts, with
   * the row after the page when one follows), if every one of their bodies is known at its stamp;
   * undefined otherwise.
   */
  pageOf(rows: readonly OrderedRowOf[], limit: number): KnownPage | undefined {
    const count = Math.min(rows.length, limit)
    const bodies: Buffer[] = []
    const versions: string[] = []
    for (let i = 0; i < count; i++) {
      const { key, row } = rows[i]!
      const known = this.#knownAt(key, row)
      if (known === undefined) return undefined
      bodies.push(known.body)
      versions.push(known.version)
    }
    const last = rows[count - 1]
    const next =
      rows.length > count && last !== undefined ? ([last.stamp, last.id] as Position) : undefined
    return { bodies, versions: versions.join(','), next }
  }

  /**
   * Learns the bodies of a page read from the file: `versions` its rows' (`id stamp hash`, joined
   * by commas), `joined` their bodies joined by commas, `lengths` each body's length in bytes,
   * joined by commas. Each body is copied out of `joined`, which is a response's.
   */
  learn(versions: string, joined: Buffer, lengths: string): void {
    if (!this.#cache.enabled || versions.length === 0) return
    const rows = versions.split(',')
    const sizes = lengths.split(',')
    let at = 0
    for (let i = 0; i < rows.length; i++) {
      const version = rows[i]!
      const size = Number(sizes[i])
      const key = idKey(version, 0)
      if (this.#byKey.get(key)?.version !== version) {
        const body = Buffer.allocUnsafeSlow(size)
        joined.copy(body, 0, at, at + size)
        this.#keep(key, version, body)
      }
      at += size + 1
    }
  }

  /** Forgets every body (the handle is closed). */
  clear(): void {
    for (const known of [...this.#byKey.values()]) known.forget()
  }

  /**
   * The body kept under `key` if it is the one of `row` (`id stamp`): the same id at the same
   * stamp, the only body a page may join (see the header). Marked as used.
   */
  #knownAt(key: number, row: string): KnownBody | undefined {
    const known = this.#byKey.get(key)
    if (known === undefined || known.row !== row) return undefined
    this.#cache.touch(known)
    return known
  }

  #keep(key: number, version: string, body: Buffer): void {
    const row = version.slice(0, version.lastIndexOf(' '))
    const bytes = body.length + (version.length + row.length) * 2 + ENTRY_OVERHEAD_BYTES
    if (!this.#cache.admits(bytes)) return
    this.#byKey.get(key)?.forget()
    const known = new KnownBody(version, row, body, bytes, () => {
      if (this.#byKey.get(key) === known) this.#byKey.delete(key)
      this.#cache.remove(known)
    })
    this.#byKey.set(key, known)
    this.#cache.add(known)
  }
}

/** A row of a list's order in memory (list-order.ts `OrderedRow`), as a page is joined from it. */
export interface OrderedRowOf {
  readonly stamp: string
  readonly id: string
  /** `id stamp`. */
  readonly row: string
  /** `idKey(id, 0)`. */
  readonly key: number
}

/**
 * FNV-1a of the id that starts at `start` in `text` and ends at the next space, folded to 30 bits
 * (a small integer to V8: no number object made), read in place.
 */
export function idKey(text: string, start: number): number {
  let hash = 0x811c9dc5
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === SPACE) break
    hash = Math.imul(hash ^ c, 0x01000193)
  }
  return hash & 0x3fffffff
}

const SPACE = 0x20

/** The position `[stamp, id]` of the row whose `id stamp` starts at `start` in `stamps`. */
function positionOf(stamps: string, start: number): Position {
  const idEnd = stamps.indexOf(' ', start)
  let stampEnd = stamps.indexOf(',', idEnd)
  if (stampEnd < 0) stampEnd = stamps.length
  return [stamps.slice(idEnd + 1, stampEnd), stamps.slice(start, idEnd)]
}
