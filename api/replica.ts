// The generation the api serves, following the CURRENT pointer of the data directory.
//
// The pointer is re-read at most every `checkIntervalMs` (a tiny file read). When it names a new
// generation, its control file is opened and it becomes current for the requests that start from
// then on; requests already running keep the generation they started with (they hold a
// reference), and the old generation's handles are closed once the last of them has finished.
// So a rebuild's swap fails no request.
import Database, { type Statement } from 'better-sqlite3'
import type { Logger } from '../src/log.ts'
import {
  freshnessOf,
  readFreshness,
  UNKNOWN_FRESHNESS,
  type Freshness,
  type FreshnessRecord,
} from '../src/freshness.ts'
import { currentGenerationName, generation, type Generation } from '../src/layout.ts'
import { sharedFileOf } from '../src/organization-files.ts'
import { openForReading, type SqliteDatabase } from '../src/sqlite.ts'
import { hashKey, type KeyRecord } from './auth.ts'
import { ApiError, temporarilyUnavailable, unavailable } from './errors.ts'
import type { PageCache } from './page-cache.ts'
import { OrganizationFiles } from './store.ts'

type LookupRow = { state: string | null } & { [K in keyof KeyRecord]: KeyRecord[K] | null }

/** What one read of control.db says about a request: may the replica answer, and whose key. */
export interface Lookup {
  readonly notReady: ApiError | undefined
  readonly key: KeyRecord | undefined
  /** How many times freshness.json had been read when this lookup read control.db. */
  readonly freshnessReads: number
}

/** The freshness record is read again after this long (a tiny file read). */
const FRESHNESS_REFRESH_MS = 20

/** Known keys whose lookups are kept between two commits to control.db; more are not kept. */
const KNOWN_KEYS_MAX = 10_000

export class ServedGeneration {
  readonly name: string
  readonly organizations: OrganizationFiles
  readonly #control: SqliteDatabase
  readonly #lookup: Statement<[string], LookupRow>
  /** The file that replaced a shared file's first, by the shared file's key (organization_files). */
  readonly #sharedFileVersion: Statement<[string], string>
  readonly #dataVersion: Statement<[], number>
  readonly #sharedFilesState: Statement<[], string>
  /**
   * Lookups of known keys by raw key, valid for one `PRAGMA data_version` of control.db: any
   * commit to it (a key revoked, an organization switched off, maintenance) empties it, so the
   * next request reads control.db again. Unknown keys are never kept: guessing cannot evict.
   */
  readonly #known = new Map<string, Lookup>()
  #knownVersion: number | undefined
  #references = 0
  #retired = false
  #closed = false
  readonly #dir: string
  #sharedFilesRecorded: number | undefined
  #freshness: FreshnessRecord | undefined
  #freshnessReads = 0
  #freshnessReadAt = -Infinity

  constructor(
    gen: Generation,
    control: SqliteDatabase,
    openFilesMax: number,
    log: Logger,
    pages: PageCache,
  ) {
    this.name = gen.name
    this.#dir = gen.dir
    this.#control = control
    // One statement (one read of control.db) per request: the replica's state, and the key with
    // its organization. Preparing reads the schema: a file that is not (yet) a control database
    // fails here.
    this.#lookup = control.prepare(
      `SELECT (SELECT group_concat(key) FROM replica_state
                WHERE key IN ('caught_up_at', 'maintenance')) AS state,
              k.id AS id, k.organization_id AS organizationId, f.file AS organizationFile,
              k.scopes AS scopes,
              k.expires_at AS expiresAt, k.revoked_at AS revokedAt,
              o.api_enabled AS apiEnabled, o.billing_status AS billingStatus
         FROM (SELECT 1) LEFT JOIN api_keys k ON k.key_hash = ?
              LEFT JOIN organizations o ON o.id = k.organization_id
              LEFT JOIN organization_files f ON f.organization_id = k.organization_id`,
    )
    this.#sharedFileVersion = control
      .prepare<[string], string>('SELECT file FROM organization_files WHERE organization_id = ?')
      .pluck()
    this.#dataVersion = control.prepare<[], number>('PRAGMA data_version').pluck(true)
    // Prepared once: a generation that does not record it (one made before files were shared)
    // reads it on every request, and preparing it each time was a tenth of a request's CPU.
    this.#sharedFilesState = control
      .prepare<[], string>(`SELECT value FROM replica_state WHERE key = 'organization_files'`)
      .pluck()
    this.organizations = new OrganizationFiles(gen, openFilesMax, log, pages, () =>
      this.#sharedFiles(),
    )
  }

  /**
   * The files the generation's organizations share (src/organization-files.ts), as its control.db
   * records them; read until recorded (the projector records it as it first opens a new
   * generation, before anything is served from it), then kept: it never changes.
   */
  #sharedFiles(): number {
    if (this.#sharedFilesRecorded !== undefined) return this.#sharedFilesRecorded
    const value = this.#controlRead(() => this.#sharedFilesState.get())
    if (value === undefined) return 0
    this.#sharedFilesRecorded = Number(value)
    return this.#sharedFilesRecorded
  }

  /**
   * `lookup` for the raw key of a request (undefined: none or malformed), kept for known keys
   * until control.db changes. Hashing the key and reading control.db were a fifth of the CPU time
   * of a cached list page; reading `data_version` is a tenth of that.
   */
  lookupRaw(rawKey: string | undefined): Lookup {
    const version = this.#controlRead(() => this.#dataVersion.get() as number)
    if (version !== this.#knownVersion) {
      this.#known.clear()
      this.#knownVersion = version
    }
    if (rawKey === undefined) return this.lookup('')
    const kept = this.#known.get(rawKey)
    if (kept !== undefined) return kept
    const found = this.lookup(hashKey(rawKey))
    if (found.key !== undefined && this.#known.size < KNOWN_KEYS_MAX) this.#known.set(rawKey, found)
    return found
  }

  /**
   * Whether the replica may answer (a 503 ApiError when it may not) and the record of the key
   * whose hash is given, if any.
   */
  lookup(keyHash: string): Lookup {
    const row = this.#controlRead(() => this.#lookup.get(keyHash)) as LookupRow
    const sharedFiles = row.organizationId === null ? 0 : this.#sharedFiles()
    if (row.organizationId !== null && sharedFiles > 0) {
      // A shared file's row is its key's, not the organization's (schema/control-db.ts): the
      // version a rebuild swapped in, or null for its first file. Read with the key, so a swap
      // is seen by the next request, as an own file's is.
      const fileKey = sharedFileOf(row.organizationId, sharedFiles)
      row.organizationFile = this.#controlRead(() => this.#sharedFileVersion.get(fileKey)) ?? null
    }
    const state = (row.state ?? '').split(',')
    const notReady = state.includes('maintenance')
      ? unavailable('the API is down for maintenance; try again later')
      : state.includes('caught_up_at')
        ? undefined
        : temporarilyUnavailable('the replica is loading its first snapshot; try again shortly')
    const { state: _state, ...key } = row
    // organizationFile is nullable in KeyRecord: null stands for the default file.
    return {
      notReady,
      key: row.id === null ? undefined : (key as KeyRecord),
      freshnessReads: this.#freshnessReads,
    }
  }

  /**
   * The generation's freshness record (src/freshness.ts), read again every FRESHNESS_REFRESH_MS:
   * one read earlier than needed claims less, never more. undefined: none yet.
   */
  freshnessRecord(nowMs: number): FreshnessRecord | undefined {
    if (nowMs - this.#freshnessReadAt >= FRESHNESS_REFRESH_MS) this.#readFreshness(nowMs)
    return this.#freshness
  }

  /**
   * What a response of the key's organization says about its freshness, read after the lookup
   * that chose its file: for a file a rebuild swapped in, the record must have been read after
   * that lookup, since the projector writes the file's hold before it commits the swap
   * (docs/freshness.md), and an older record would not hold it back.
   */
  freshnessFor(lookup: Lookup, nowMs: number, skewed?: () => void): Freshness {
    const key = lookup.key
    if (key === undefined) return UNKNOWN_FRESHNESS
    const file = key.organizationFile
    if (file !== null && this.#freshnessReads <= lookup.freshnessReads) this.#readFreshness(nowMs)
    else this.freshnessRecord(nowMs)
    const subject = { organizationId: key.organizationId, file }
    return freshnessOf(this.#freshness, subject, nowMs, skewed)
  }

  #readFreshness(nowMs: number): void {
    this.#freshness = readFreshness(this.#dir)
    this.#freshnessReads++
    this.#freshnessReadAt = nowMs
  }

  #controlRead<T>(read: () => T): T {
    try {
      return read()
    } catch (error) {
      if (error instanceof Database.SqliteError) {
        throw unavailable('the replica is unavailable; try again later')
      }
      throw error
    }
  }

  get openFiles(): number {
    return this.#closed ? 0 : this.organizations.size + 1
  }

  acquire(): void {
    this.#references++
  }

  release(): void {
    this.#references--
    this.#closeIfIdle()
  }

  retire(): void {
    this.#retired = true
    this.#closeIfIdle()
  }

  #closeIfIdle(): void {
    if (!this.#retired || this.#references > 0 || this.#closed) return
    this.#closed = true
    this.organizations.close()
    this.#control.close()
  }
}

export interface ReplicaOptions {
  dataDir: string
  openFilesMax: number
  log: Logger
  /** How often the CURRENT pointer is re-read, at most. */
  checkIntervalMs: number
  /** The list-page cache every generation's open files share (page-cache.ts). */
  pages: PageCache
  /** Monotonic milliseconds. */
  monotonicNow?: () => number
}

export class Replica {
  readonly #options: ReplicaOptions
  readonly #now: () => number
  #current: ServedGeneration | undefined
  /** Why there is no current generation (503), when there is none. */
  #problem: ApiError = temporarilyUnavailable('the replica is not ready yet; try again shortly')
  #lastCheck = -Infinity
  /** Retired generations still serving requests. */
  readonly #draining = new Set<ServedGeneration>()

  constructor(options: ReplicaOptions) {
    this.#options = options
    this.#now = options.monotonicNow ?? (() => performance.now())
  }

  /**
   * The generation a request is served from, with a reference the caller must give back with
   * `release` once the response is done. Throws a 503 ApiError when there is none.
   */
  acquire(): ServedGeneration {
    this.#refresh()
    const current = this.#current
    if (current === undefined) throw this.#problem
    current.acquire()
    return current
  }

  release(served: ServedGeneration): void {
    served.release()
    if (served.openFiles === 0) this.#draining.delete(served)
  }

  /** Whether the control file and the data directory are usable (readiness probe). */
  usable(): boolean {
    this.#refresh()
    return this.#current !== undefined
  }

  get openFiles(): number {
    let n = this.#current?.openFiles ?? 0
    for (const served of this.#draining) n += served.openFiles
    return n
  }

  /**
   * How far behind its source the served generation is, in milliseconds (docs/freshness.md);
   * undefined while unknown (no heartbeat applied yet, or no generation).
   */
  stalenessMs(nowMs: number): number | undefined {
    const current = this.#current
    if (current === undefined) return undefined
    return freshnessOf(current.freshnessRecord(nowMs), undefined, nowMs).lagMs
  }

  get generationName(): string | undefined {
    return this.#current?.name
  }

  #refresh(): void {
    const now = this.#now()
    if (now - this.#lastCheck < this.#options.checkIntervalMs) return
    this.#lastCheck = now
    const { dataDir, log } = this.#options
    let name: string | undefined
    try {
      name = currentGenerationName(dataDir)
    } catch (error) {
      log.error({ err: error }, 'cannot read the CURRENT generation pointer')
      this.#fail(unavailable('the replica is unavailable; try again later'))
      return
    }
    if (name === undefined) {
      this.#fail(temporarilyUnavailable('the replica has no data yet; try again shortly'))
      return
    }
    if (name === this.#current?.name) return
    const opened = this.#open(name)
    if (opened instanceof ApiError) {
      // Keep serving the previous generation, if any, until the new one is usable.
      if (this.#current === undefined) this.#problem = opened
      return
    }
    const previous = this.#current
    this.#current = opened
    log.info({ generation: name, previous: previous?.name }, 'serving generation')
    if (previous !== undefined) this.#retire(previous)
  }

  #open(name: string): ServedGeneration | ApiError {
    const { log } = this.#options
    let gen: Generation
    try {
      gen = generation(this.#options.dataDir, name)
    } catch (error) {
      log.error({ err: error, generation: name }, 'invalid generation name in CURRENT')
      return unavailable('the replica is unavailable; try again later')
    }
    let control: SqliteDatabase | undefined
    try {
      control = openForReading(gen.controlPath)
      return new ServedGeneration(
        gen,
        control,
        this.#options.openFilesMax,
        log,
        this.#options.pages,
      )
    } catch (error) {
      control?.close()
      const code = (error as { code?: string }).code
      if (code === 'SQLITE_CANTOPEN' || /no such table/.test(String(error))) {
        log.info({ generation: name }, 'control file not ready yet')
        return temporarilyUnavailable('the replica is not ready yet; try again shortly')
      }
      log.error({ err: error, generation: name }, 'control file unusable')
      return unavailable('the replica is unavailable; try again later')
    }
  }

  #fail(problem: ApiError): void {
    this.#problem = problem
    if (this.#current !== undefined) {
      this.#retire(this.#current)
      this.#current = undefined
    }
  }

  #retire(served: ServedGeneration): void {
    this.#draining.add(served)
    served.retire()
    if (served.openFiles === 0) this.#draining.delete(served)
  }

  close(): void {
    if (this.#current !== undefined) this.#retire(this.#current)
    this.#current = undefined
  }
}
