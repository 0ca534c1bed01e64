// The organization files of one generation, opened read-only on first use and kept in a bounded
// least-recently-used cache of handles. A request only ever asks for its key's organization, so
// the only file it can read is that organization's.
//
// A missing or unreadable file is the replica's fault, not the caller's: 503 api_unavailable.
import Database, { type Statement } from 'better-sqlite3'
import type { Logger } from '../src/log.ts'
import { type Generation, isOrganizationId } from '../src/layout.ts'
import { openForReading, type SqliteDatabase } from '../src/sqlite.ts'
import { unavailable } from './errors.ts'
import type { Sql } from './collections.ts'

class UnusableFile extends Error {}

export class OrganizationFile {
  readonly #db: SqliteDatabase
  readonly #statements = new Map<string, Statement>()
  readonly #inTransaction: (read: () => unknown) => unknown

  constructor(db: SqliteDatabase) {
    this.#db = db
    // Made once per file: better-sqlite3 prepares its BEGIN and COMMIT with it.
    this.#inTransaction = db.transaction((read: () => unknown) => read())
  }

  /**
   * Runs `read` in one read transaction: on a WAL file, all of its statements see the same
   * committed state, whatever the projector commits meanwhile.
   */
  snapshot<T>(read: () => T): T {
    return this.#inTransaction(read) as T
  }

  /** Every row of a query, as arrays of column values. Statements are prepared once. */
  rows(query: Sql): unknown[][] {
    return this.#statement(query.sql).all(...query.args) as unknown[][]
  }

  /** The first column of the first row, or undefined. */
  value(query: Sql): unknown {
    return this.#statement(query.sql)
      .pluck()
      .get(...query.args)
  }

  #statement(sql: string): Statement {
    let statement = this.#statements.get(sql)
    if (statement === undefined) {
      statement = this.#db.prepare(sql).raw(true)
      this.#statements.set(sql, statement)
    }
    return statement
  }

  close(): void {
    this.#db.close()
  }
}

export class OrganizationFiles {
  readonly #generation: Generation
  readonly #max: number
  readonly #log: Logger
  /** Insertion order is recency order: a hit is moved to the end, the first entry is evicted. */
  readonly #open = new Map<string, OrganizationFile>()

  constructor(generation: Generation, max: number, log: Logger) {
    this.#generation = generation
    this.#max = max
    this.#log = log
  }

  get size(): number {
    return this.#open.size
  }

  /**
   * Runs `read` against the organization's file. Any SQLite failure (file missing, not a
   * database, corrupt, schema missing) closes the handle and becomes 503 api_unavailable.
   */
  read<T>(organizationId: string, read: (file: OrganizationFile) => T): T {
    let file = this.#open.get(organizationId)
    try {
      if (file === undefined) {
        file = this.#openFile(organizationId)
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
    }
  }

  #openFile(organizationId: string): OrganizationFile {
    if (!isOrganizationId(organizationId)) throw new UnusableFile('not an organization id')
    let db: SqliteDatabase
    try {
      db = openForReading(this.#generation.organizationPath(organizationId))
    } catch (error) {
      throw new UnusableFile('cannot open the organization file', { cause: error })
    }
    const file = new OrganizationFile(db)
    this.#open.set(organizationId, file)
    while (this.#open.size > this.#max) {
      const [oldest] = this.#open.keys()
      if (oldest === undefined) break
      this.#forget(oldest)
    }
    return file
  }

  #forget(organizationId: string): void {
    const file = this.#open.get(organizationId)
    if (file === undefined) return
    this.#open.delete(organizationId)
    file.close()
  }

  close(): void {
    for (const id of [...this.#open.keys()]) this.#forget(id)
  }
}
