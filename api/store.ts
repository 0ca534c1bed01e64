// The organization files of one generation, opened read-only on first use and kept in a bounded
// least-recently-used cache of handles, one per organization. A request only ever asks for its
// key's organization, so the only file it can read is that organization's. In a generation of
// files shared by organizations (src/organization-files.ts) the organizations of a file share one
// connection to it, scoped (src/organization-scope.ts) to the organization of each read as it
// begins: reads are synchronous, so no other request's read comes between. A connection of its
// own for each organization held the same statements and schema 30 times over, and served
// 0.61-0.63x the requests over 3,000 organizations in 100 files that it served over seven
// (bench:tenants).
//
// A missing or unreadable file is the replica's fault, not the caller's: 503 api_unavailable.
//
// Each organization's handle carries the cached list pages read for it (page-cache.ts): they go
// when the handle is closed, evicted or retired with its generation.
import Database, { type Statement } from 'better-sqlite3'
import type { Logger } from '../src/log.ts'
import { type Generation, isOrganizationId } from '../src/layout.ts'
import { isSharedFileName, sharedFileOf } from '../src/organization-files.ts'
import {
  NO_ORGANIZATION,
  organizationKeyIn,
  OWN_ORGANIZATION,
  scopeConnection,
  type OrganizationScope,
} from '../src/organization-scope.ts'
import { openForReading, type SqliteDatabase } from '../src/sqlite.ts'
import { unavailable } from './errors.ts'
import type { OrderSql, Sql } from './collections.ts'
import type { Position } from './cursor.ts'
import { DocumentBodies } from './document-bodies.ts'
import { ListOrder } from './list-order.ts'
import { type FilePages, PageCache } from './page-cache.ts'

class UnusableFile extends Error {}

/** The pages of an organization with no rows in its shared file yet: nothing to keep. */
const NO_ROWS_YET = new PageCache(0).forFile()

const DATA_VERSION = 'PRAGMA data_version'
/** The cache of a file opened without one (tests, tools): nothing is kept. */
const NO_CACHE = new PageCache(0)

/** An organization and the file control.db names for it (null: `<organizationId>.db`). */
export interface OrganizationRef {
  readonly organizationId: string
  readonly organizationFile: string | null
}

/**
 * A read-only connection to an organization file and the statements prepared on it, shared by the
 * handles of the organizations the file holds.
 */
class FileConnection {
  readonly db: SqliteDatabase
  readonly statements = new Map<string, Statement>()
  readonly dataVersion: Statement<[], number>
  readonly inTransaction: (read: () => unknown) => unknown
  /** Handles reading through it; closed when the last lets go. */
  users = 0
  readonly #scope: OrganizationScope
  #key: number

  constructor(db: SqliteDatabase) {
    this.db = db
    this.#scope = scopeConnection(db)
    this.#key = this.#scope.key
    this.dataVersion = db.prepare<[], number>(DATA_VERSION).pluck(true)
    // Made once per file: better-sqlite3 prepares its BEGIN and COMMIT with it.
    this.inTransaction = db.transaction((read: () => unknown) => read())
  }

  get shared(): boolean {
    return this.#scope.layout === 'shared'
  }

  /**
   * Scopes the connection to the organization numbered `key` (a file of its own needs nothing).
   * Inside a snapshot the scope is the one its read began with, and must be this organization's.
   */
  enter(key: number): void {
    if (this.#key === key) return
    if (this.db.inTransaction) {
      throw new Error('an organization read inside another organization’s snapshot')
    }
    this.#scope.enter(key)
    this.#key = key
  }
}

export class OrganizationFile {
  /** The file's name as control.db named it when it was opened (null: the default name). */
  readonly name: string | null
  /** List pages read for this organization, valid for one `dataVersion` of its file. */
  readonly pages: FilePages
  readonly #bodies = new Map<string, DocumentBodies>()
  readonly #orders = new Map<string, ListOrder>()
  readonly #connection: FileConnection
  /** The organization's key in its file (src/organization-scope.ts). */
  readonly #key: number

  /**
   * A handle on `db`, a connection of its own (tests and tools make one so); `OrganizationFiles`
   * gives the organizations of a shared file one connection.
   */
  constructor(
    db: SqliteDatabase | FileConnection,
    pages: FilePages = NO_CACHE.forFile(),
    name: string | null = null,
    key: number = OWN_ORGANIZATION,
  ) {
    this.name = name
    this.#connection = db instanceof FileConnection ? db : new FileConnection(db)
    this.#connection.users++
    this.pages = pages
    this.#key = key
  }

  /**
   * Runs `read` in one read transaction: on a WAL file, all of its statements see the same
   * committed state, whatever the projector commits meanwhile. Inside a snapshot already, `read`
   * runs in it (a nested transaction would only add a savepoint).
   */
  snapshot<T>(read: () => T): T {
    const connection = this.#connection
    connection.enter(this.#key)
    return connection.db.inTransaction ? read() : (connection.inTransaction(read) as T)
  }

  /**
   * SQLite's `PRAGMA data_version` of this connection: it changes when another connection (the
   * projector) has committed to the file, and inside a snapshot it is that snapshot's.
   */
  dataVersion(): number {
    return this.#connection.dataVersion.get() as number
  }

  /**
   * The list page cached under `key` for the file's current state, else the one `read` makes,
   * kept when it is asked for the second time at this state (page-cache.ts): `read` is told
   * whether its body will be kept, so that one that will not can be built in a reused buffer.
   * The version and the page are read in one snapshot: a body is only ever stored under the
   * version of the state it was read from.
   */
  cachedPage(key: string, read: (kept: boolean) => Buffer): { body: Buffer; hit: boolean } {
    if (this.#connection.db.inTransaction) return this.#keptPage(key, read)
    // A hit needs no snapshot: the version alone says the file is in the state the page was read
    // from. BEGIN and COMMIT cost a cached page about as much as the rest of its lookup.
    const version = this.dataVersion()
    const cached = this.pages.get(version, key)
    if (cached !== undefined) return { body: cached, hit: true }
    // A page read once at this version (most: distinct cursors, a poller's new watermark) is not
    // kept, so no snapshot has to tie it to the version: `read` takes one if it needs one.
    if (!this.pages.askedAgain(version, key)) return { body: read(false), hit: false }
    return this.#keptPage(key, read, version)
  }

  /**
   * The page under `key`, read and kept in one snapshot with the version it is kept under; kept
   * only if that is still `askedAt`, the version it was found asked for again at (if any).
   */
  #keptPage(
    key: string,
    read: (kept: boolean) => Buffer,
    askedAt?: number,
  ): { body: Buffer; hit: boolean } {
    return this.snapshot(() => {
      const version = this.dataVersion()
      const cached = this.pages.get(version, key)
      if (cached !== undefined) return { body: cached, hit: true }
      const kept = askedAt === undefined ? this.pages.askedAgain(version, key) : askedAt === version
      const body = read(kept)
      if (kept) this.pages.set(version, key, body)
      return { body, hit: false }
    })
  }

  /**
   * What is known of the bodies of one list view's documents (`view`: its table and body column),
   * checked against each page's versions, so it outlives the file's versions (document-bodies.ts).
   */
  bodies(view: string): DocumentBodies {
    let bodies = this.#bodies.get(view)
    if (bodies === undefined) {
      bodies = new DocumentBodies(this.pages.cache)
      this.#bodies.set(view, bodies)
    }
    return bodies
  }

  /**
   * The order of one list view, read by `sql` and kept in step with the file's commits once the
   * view is paged often enough (list-order.ts).
   */
  order(sql: OrderSql): ListOrder {
    let order = this.#orders.get(sql.view)
    if (order === undefined) {
      order = new ListOrder(this.pages.cache, sql)
      this.#orders.set(sql.view, order)
    }
    return order
  }

  /**
   * The last position of the list under `key` at the file's current state (undefined: the list is
   * empty), read by `read` once per state, as `cachedPage` reads a page; `hit`: known without
   * reading the file.
   */
  lastPosition(
    key: string,
    read: () => Position | undefined,
  ): { last: Position | undefined; hit: boolean } {
    if (!this.#connection.db.inTransaction) {
      const known = this.pages.lastPosition(this.dataVersion(), key)
      if (known !== undefined) return { last: known ?? undefined, hit: true }
    }
    return this.snapshot(() => {
      const version = this.dataVersion()
      const known = this.pages.lastPosition(version, key)
      if (known !== undefined) return { last: known ?? undefined, hit: true }
      const last = read()
      this.pages.setLastPosition(version, key, last ?? null)
      return { last, hit: false }
    })
  }

  /** Every row of a query, as arrays of column values. Statements are prepared once. */
  rows(query: Sql): unknown[][] {
    this.#connection.enter(this.#key)
    return this.#statement(query.sql, 'rows').all(...query.args) as unknown[][]
  }

  /** The first column of the first row, or undefined. */
  value(query: Sql): unknown {
    this.#connection.enter(this.#key)
    return this.#statement(query.sql, 'value').get(...query.args)
  }

  // One statement per SQL text and use: better-sqlite3's raw and pluck modes exclude each other
  // and stick to the statement, so one shared by rows() and value() would answer in the wrong one.
  #statement(sql: string, use: 'rows' | 'value'): Statement {
    const key = `${use}\u0000${sql}`
    const statements = this.#connection.statements
    let statement = statements.get(key)
    if (statement === undefined) {
      const prepared = this.#connection.db.prepare(sql)
      statement = use === 'rows' ? prepared.raw(true) : prepared.pluck(true)
      statements.set(key, statement)
    }
    return statement
  }

  /**
   * Lets go of the handle: its pages, bodies and orders, and its file's connection once no handle
   * uses it.
   */
  close(): void {
    this.pages.clear()
    for (const bodies of this.#bodies.values()) bodies.clear()
    for (const order of this.#orders.values()) order.clear()
    if (--this.#connection.users === 0) this.#connection.db.close()
  }

  /** Whether the handle's connection is closed (the last handle on it let go). */
  get closed(): boolean {
    return !this.#connection.db.open
  }
}

export class OrganizationFiles {
  readonly #generation: Generation
  readonly #max: number
  readonly #log: Logger
  readonly #pages: PageCache
  readonly #sharedFiles: () => number
  /** Insertion order is recency order: a hit is moved to the end, the first entry is evicted. */
  readonly #open = new Map<string, OrganizationFile>()
  /** The connections to shared files, by name, while a handle uses them. */
  readonly #shared = new Map<string, FileConnection>()
  /** Handles in `#open` with a connection of their own, counted as they come and go: `size` is
   * read with every response. */
  #ownConnections = 0

  /** `sharedFiles`: the files the generation's organizations share (0: each has its own). */
  constructor(
    generation: Generation,
    max: number,
    log: Logger,
    pages: PageCache,
    sharedFiles: () => number = () => 0,
  ) {
    this.#generation = generation
    this.#max = max
    this.#log = log
    this.#pages = pages
    this.#sharedFiles = sharedFiles
  }

  /** Connections open: one per organization with a file of its own, one per shared file. */
  get size(): number {
    return this.#ownConnections + this.#shared.size
  }

  /**
   * Runs `read` against the organization's file. Any SQLite failure (file missing, not a
   * database, corrupt, schema missing) closes the handle and becomes 503 api_unavailable.
   *
   * A per-organization rebuild points the organization at a new file (control.db, read with the
   * key on every request): a handle on the file it replaced is closed and the new one opened.
   * Reads are synchronous, so no request is still reading the old handle.
   */
  read<T>(organization: OrganizationRef, read: (file: OrganizationFile) => T): T {
    const { organizationId } = organization
    const organizationFile = this.#fileOf(organization)
    let file = this.#open.get(organizationId)
    if (file !== undefined && file.name !== organizationFile) {
      this.#forget(organizationId)
      file = undefined
    }
    let passing: OrganizationFile | undefined
    try {
      if (file === undefined) {
        file = this.#openFile(organizationId, organizationFile)
        if (this.#open.get(organizationId) !== file) passing = file
      } else {
        this.#open.delete(organizationId)
        this.#open.set(organizationId, file)
      }
      return read(file)
    } catch (error) {
      if (!(error instanceof Database.SqliteError || error instanceof UnusableFile)) throw error
      this.#log.error(
        { err: error, organizationId, generation: this.#generation.name },
        'organization file unusable',
      )
      this.#forget(organizationId)
      throw unavailable('the data of this organization is unavailable; try again later')
    } finally {
      passing?.close()
      if (passing?.closed === true && passing.name !== null) this.#shared.delete(passing.name)
    }
  }

  /** The organization's file: its own as control.db names it, or the one it shares. */
  #fileOf({ organizationId, organizationFile }: OrganizationRef): string | null {
    if (organizationFile !== null) return organizationFile
    const sharedFiles = this.#sharedFiles()
    return sharedFiles > 0 ? sharedFileOf(organizationId, sharedFiles) : null
  }

  #openFile(organizationId: string, name: string | null): OrganizationFile {
    if (!isOrganizationId(organizationId)) throw new UnusableFile('not an organization id')
    let file: OrganizationFile
    try {
      file =
        name !== null && isSharedFileName(name)
          ? this.#inSharedFile(organizationId, name)
          : new OrganizationFile(
              openForReading(this.#generation.organizationPath(organizationId, name)),
              this.#pages.forFile(),
              name,
            )
    } catch (error) {
      if (error instanceof UnusableFile) throw error
      throw new UnusableFile('cannot open the organization file', { cause: error })
    }
    // An organization with no rows in its shared file yet sees none: its handle is not kept, so
    // that the next request, after its first rows, finds its key.
    if (file.pages === NO_ROWS_YET) return file
    this.#open.set(organizationId, file)
    if (!inSharedFile(file)) this.#ownConnections++
    while (this.#open.size > this.#max) {
      const [oldest] = this.#open.keys()
      if (oldest === undefined) break
      this.#forget(oldest)
    }
    return file
  }

  /** A handle on a shared file's connection (opened if none is), scoped to the organization. */
  #inSharedFile(organizationId: string, name: string): OrganizationFile {
    let connection = this.#shared.get(name)
    if (connection === undefined || !connection.db.open) {
      const db = openForReading(this.#generation.sharedPath(name))
      try {
        connection = new FileConnection(db)
      } catch (error) {
        db.close()
        throw error
      }
      if (!connection.shared) {
        db.close()
        throw new UnusableFile(`${name} is not a shared file`)
      }
      this.#shared.set(name, connection)
    }
    const key = organizationKeyIn(connection.db, organizationId)
    if (key === undefined)
      return new OrganizationFile(connection, NO_ROWS_YET, name, NO_ORGANIZATION)
    return new OrganizationFile(connection, this.#pages.forFile(), name, key)
  }

  #forget(organizationId: string): void {
    const file = this.#open.get(organizationId)
    if (file === undefined) return
    this.#open.delete(organizationId)
    file.close()
    if (!inSharedFile(file)) this.#ownConnections--
    else if (file.closed) this.#shared.delete(file.name!)
  }

  close(): void {
    for (const id of [...this.#open.keys()]) this.#forget(id)
  }
}

function inSharedFile(file: OrganizationFile): boolean {
  return file.name !== null && isSharedFileName(file.name)
}
