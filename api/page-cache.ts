// Complete list-page response bodies, kept for as long as the organization file they were read
// from has not changed. Joining a page of 50 providers in SQLite and copying it into the response
// costs more than the whole rest of the request, and clients that poll ask for the same pages
// (the first ones, `updated_since` a watermark) again and again between two commits to their
// organization's file.
//
// One `PageCache` holds the byte budget of the whole process; each open organization file has
// its own `FilePages` of it (store.ts), so a request can only ever find pages of its own
// organization's file, of the generation it is served from, and closing the file drops them.
//
// Validity: the version a file's pages belong to is SQLite's `PRAGMA data_version` of the api's
// read connection, read in the same read transaction as the page. It changes whenever another
// connection (the projector) has committed to the file; a lookup with another version than the
// stored one drops every page of that file first. Pure: no I/O, the caller gives the version.
//
// Admission: a page is kept on its second miss at the same version of its file, not its first.
// Most pages read are never asked for again before the file changes: a poller's `updated_since`
// is new on every poll, and pages past a cursor are walked once. Kept on their first miss, each
// cost a body of its own (about 130 KB for 50 providers, fresh memory, copied once more than a
// response built in a reused buffer) and pushed out pages that are asked for again. A page asked
// for twice (the first page many clients poll) is kept from its second read on.
//
// Quiet polls: each file also remembers, per list (its filters but `updated_since`), where the
// list ends at the file's current version. A poll whose `updated_since` is past that end (most
// polls: nothing changed since the last) has an empty page, known without reading one.

import type { Position } from './cursor.ts'

/** Keys a file remembers as read once (`FilePages.askedAgain`): some 100 bytes each. */
const MISSED_ONCE_MAX = 1024
/** Lists (list, view and filters) whose last position a file remembers: a handful in practice. */
const LAST_POSITIONS_MAX = 64

/**
 * What the budget holds: a page, or a document's body (document-bodies.ts), in the budget's
 * recency list. `forget` removes it from where it is kept and from the budget.
 */
export class CacheEntry {
  /** Its neighbours in the recency list (PageCache's alone to change). */
  older: CacheEntry | undefined = undefined
  newer: CacheEntry | undefined = undefined
  listed = false

  constructor(
    readonly body: Buffer,
    /** What the entry costs the budget. */
    readonly bytes: number,
    readonly forget: () => void,
  ) {}
}

export class PageCache {
  readonly maxBytes: number
  #bytes = 0
  #entries = 0
  /**
   * Every entry of every file in a list, least recently used first: a hit moves its entry to the
   * end. A list of its own, not a Set's order: a Set deletes by leaving a hole that a lookup of
   * the same key walks past until the table is rebuilt, so moving one hot entry again and again in
   * a Set of 10,000 cost 30 µs a move (node 20), a page cache hit's whole time.
   */
  #oldest: CacheEntry | undefined = undefined
  #newest: CacheEntry | undefined = undefined

  /** `maxBytes` 0 disables the cache: nothing is stored, every lookup misses. */
  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  get enabled(): boolean {
    return this.maxBytes > 0
  }

  /** Bytes held by every file's pages and bodies. */
  get bytes(): number {
    return this.#bytes
  }

  get entries(): number {
    return this.#entries
  }

  /** The pages of one open file, drawing on this budget. */
  forFile(): FilePages {
    return new FilePages(this)
  }

  // add, touch, remove and admits are for FilePages and DocumentBodies: they make the entries.

  /** Whether an entry of `bytes` may be stored at all (one larger than the budget never is). */
  admits(bytes: number): boolean {
    return this.enabled && bytes <= this.maxBytes
  }

  add(entry: CacheEntry): void {
    this.#append(entry)
    this.#bytes += entry.bytes
    this.#entries++
    while (this.#bytes > this.maxBytes && this.#oldest !== undefined) this.#oldest.forget()
  }

  touch(entry: CacheEntry): void {
    if (!entry.listed || entry === this.#newest) return
    this.#unlink(entry)
    this.#append(entry)
  }

  remove(entry: CacheEntry): void {
    if (!entry.listed) return
    this.#unlink(entry)
    this.#bytes -= entry.bytes
    this.#entries--
  }

  #append(entry: CacheEntry): void {
    entry.older = this.#newest
    entry.newer = undefined
    if (this.#newest === undefined) this.#oldest = entry
    else this.#newest.newer = entry
    this.#newest = entry
    entry.listed = true
  }

  #unlink(entry: CacheEntry): void {
    if (entry.older === undefined) this.#oldest = entry.newer
    else entry.older.newer = entry.newer
    if (entry.newer === undefined) this.#newest = entry.older
    else entry.newer.older = entry.older
    entry.older = entry.newer = undefined
    entry.listed = false
  }
}

/** The cached pages of one open organization file, all of one version of it. */
export class FilePages {
  /** The budget these pages draw on (the documents' bodies of the same file draw on it too). */
  readonly cache: PageCache
  readonly #entries = new Map<string, CacheEntry>()
  /** Keys read once at the current version and not kept (`askedAgain`). */
  readonly #missedOnce = new Set<string>()
  /** Each list's last position at the current version (null: the list is empty). */
  readonly #lastPositions = new Map<string, Position | null>()
  #version: number | undefined

  constructor(cache: PageCache) {
    this.cache = cache
  }

  get enabled(): boolean {
    return this.cache.enabled
  }

  get size(): number {
    return this.#entries.size
  }

  /**
   * Whether a page is stored under `key`, of whatever version: when none is, a lookup needs no
   * version to know it misses (a poll's `updated_since` is new on every poll).
   */
  has(key: string): boolean {
    return this.#entries.has(key)
  }

  /**
   * The body stored under `key`, if it was read from the file at `version`. A new version drops
   * every page of the file: any commit can change any page (a new row moves every page after it).
   */
  get(version: number, key: string): Buffer | undefined {
    this.#settle(version)
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.cache.touch(entry)
    return entry.body
  }

  /**
   * Whether the page under `key`, read now from the file at `version`, was read once before at
   * that version without being kept: then it is worth keeping (`set`). Records the read otherwise.
   */
  askedAgain(version: number, key: string): boolean {
    if (!this.cache.enabled) return false
    this.#settle(version)
    if (this.#missedOnce.delete(key)) return true
    // Bounded: a file read at one version by thousands of distinct pages forgets the oldest.
    if (this.#missedOnce.size >= MISSED_ONCE_MAX) {
      const [oldest] = this.#missedOnce
      if (oldest !== undefined) this.#missedOnce.delete(oldest)
    }
    this.#missedOnce.add(key)
    return false
  }

  /**
   * Stores `body`, read from the file at `version`, under `key`. The body must be owned by the
   * cache from now on: never a reused response slab, never written to again.
   */
  set(version: number, key: string, body: Buffer): void {
    this.#settle(version)
    const bytes = body.length + key.length * 2
    if (!this.cache.admits(bytes)) return
    this.#entries.get(key)?.forget()
    const entry = new CacheEntry(body, bytes, () => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key)
      this.cache.remove(entry)
    })
    this.#entries.set(key, entry)
    this.cache.add(entry)
  }

  /**
   * The last position of the list under `key` as read from the file at `version`: null when the
   * list was empty then, undefined when it is not known at that version.
   */
  lastPosition(version: number, key: string): Position | null | undefined {
    this.#settle(version)
    return this.#lastPositions.get(key)
  }

  /** Remembers the last position of the list under `key`, read from the file at `version`. */
  setLastPosition(version: number, key: string, position: Position | null): void {
    if (!this.cache.enabled) return
    this.#settle(version)
    if (this.#lastPositions.size >= LAST_POSITIONS_MAX) this.#lastPositions.clear()
    this.#lastPositions.set(key, position)
  }

  /** Drops every page (the file is closed). */
  clear(): void {
    for (const entry of [...this.#entries.values()]) entry.forget()
    this.#missedOnce.clear()
    this.#lastPositions.clear()
    this.#version = undefined
  }

  #settle(version: number): void {
    if (version === this.#version) return
    this.clear()
    this.#version = version
  }
}
