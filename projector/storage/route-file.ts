// The routing index: which organization each source row belongs to, so that a delete carrying only
// its key reaches the row's file, and an upsert naming another organization than before moves the
// row out of its old file. Written for every upsert, it is the largest of the main thread's writes
// in a load, so it is a file of its own (`routes.db`, beside control.db) that a thread of its own
// may keep while the main thread packs the next batch (lanes/route-thread.ts); the single-threaded
// applier keeps it inline (lanes/apply.ts). Either way a batch's routes are resolved here, by
// `RouteFile.resolve`, from arrays a thread can take without an object per route (`RouteBatch`).
//
// Organizations are stored as small integers. The codes are handed out by whoever packs the
// batches (`OrganizationCodes`, in memory) and recorded here with the batch that first names them,
// so a batch can be packed without asking this file for codes.
import Database from 'better-sqlite3'
import { existsSync } from 'node:fs'
import type { OrganizationTable } from '../../schema/events.ts'
import type { Generation } from '../../src/layout.ts'
import {
  heldTransaction,
  openForWriting,
  setCacheKiB,
  type SqliteDatabase,
} from '../../src/sqlite.ts'
import { boundWal, syncWal, unsyncedLog } from './wal.ts'

/**
 * The code `routes` stores for each organization table. Stored in every routing index (and in
 * control.db's migration 0001): a code is never changed or reused; a new table takes the next one.
 */
export const ROUTED_TABLES: Readonly<Record<OrganizationTable, number>> = {
  providers: 1,
  provider_identifiers: 2,
  provider_groups: 3,
  group_memberships: 4,
  service_locations: 5,
  group_identifiers: 6,
  enrollments: 7,
  enrollment_requirements: 8,
  enrollment_lines_of_business: 9,
  enrollment_location_participations: 10,
  group_enrollments: 11,
  group_enrollment_lines_of_business: 12,
  documents: 13,
}

/** What a batch asks of a row's route (`RouteBatch.kinds`). */
export const RouteKind = {
  /** An upsert's: write the row's organization; found, the one it moved from. */
  Route: 0,
  /** A key-only delete's: read the row's organization. */
  Lookup: 1,
  /**
   * A per-organization rebuild's row of an organization it does not keep: routed only if it is
   * routed already (it may be moving out of one the rebuild keeps), else skipped.
   */
  RouteUnlessNew: 2,
} as const

/** A route's answer when the row had none, or its move or lookup found nothing. */
export const NOT_FOUND = 0
/** A `RouteUnlessNew` route of a row never routed: not written, and its event skipped. */
export const SKIPPED = -1

/**
 * A batch's routes as arrays: route i is row `ids[i]` (a uuid) of table `tables[i]`
 * (ROUTED_TABLES), asked as `kinds[i]` (RouteKind), for organization code `organizations[i]` (0
 * for a lookup). `newOrganizations`: the codes first given in this batch, recorded with it.
 */
export interface RouteBatch {
  ids: string[]
  tables: Uint8Array
  kinds: Uint8Array
  organizations: Int32Array
  newOrganizations: Array<[code: number, organizationId: string]>
}

/**
 * Per route of a batch, in its order: the organization code found (the organization a moved row
 * left, or a lookup's), NOT_FOUND, or SKIPPED.
 */
export type RouteAnswer = Int32Array

/** A batch's routes resolved, and the index's log when the commit was left for the caller to sync. */
export interface ResolvedRoutes {
  found: RouteAnswer
  unsyncedWal: string | undefined
}

export interface RouteFile {
  readonly db: SqliteDatabase
  /**
   * Resolves a batch's routes in one transaction, or in the one `begin` holds. Its commit is left
   * unsynced: the caller syncs the log (`takeUnsyncedWal`) with the organization files' before it
   * reports the batch applied, as control.db's.
   */
  resolve(batch: RouteBatch): RouteAnswer
  /** Every organization code recorded. */
  organizations(): Array<[code: number, organizationId: string]>
  /** Opens a transaction `resolve` joins until `commit` (an initial load's, as control.db's). */
  begin(): void
  commit(): void
  rollback(): void
  takeUnsyncedWal(): string | undefined
  syncWal(): void
  boundWal(maxBytes: number): boolean
  setCacheKiB(kib: number): void
  close(): void
}

/**
 * Opens a routing index (a generation's `routesPath`), first carrying over the routes its
 * control.db (`controlPath`) held, where they were kept until 2026-11-30.
 */
export function openRouteFile(path: string, controlPath?: string): RouteFile {
  // Every commit is left to a sync of the log: the caller's, with a live batch's files, or
  // `commit`'s, for a held transaction (synchronous=FULL's fsync at each commit, made here only
  // when the transaction wrote: a live batch of known rows writes nothing).
  const db = openForWriting(path, 'routes', 'wal', 'byWriter')
  if (controlPath !== undefined) carryOverFromControl(db, path, controlPath)
  // Rows' uuids as their 16 bytes, their table and organization as small integers
  // (schema/control-db.ts `rowRoutes`): the conversions are SQL's, so statements take text.
  const get = db.prepare<[string, number], number>(
    `SELECT organization FROM routes WHERE id = unhex(replace(?, '-', '')) AND source_table = ?`,
  )
  get.pluck()
  const add = db.prepare<[string, number, number]>(
    `INSERT INTO routes (id, source_table, organization) VALUES (unhex(replace(?, '-', '')), ?, ?)
     ON CONFLICT (id, source_table) DO NOTHING`,
  )
  const put = db.prepare<[string, number, number]>(
    `INSERT INTO routes (id, source_table, organization) VALUES (unhex(replace(?, '-', '')), ?, ?)
     ON CONFLICT (id, source_table) DO UPDATE SET organization = excluded.organization`,
  )
  const addOrganization = db.prepare<[number, string]>(
    'INSERT OR IGNORE INTO route_organizations (organization, organization_id) VALUES (?, ?)',
  )
  const readOrganizations = db.prepare<[], [number, string]>(
    'SELECT organization, organization_id FROM route_organizations ORDER BY organization',
  )
  readOrganizations.raw()

  /** Whether the transaction wrote anything: a batch of known rows only (live renames) did not. */
  let wrote = false

  /** Writes a row's route; the organization it moved from, else NOT_FOUND. */
  const route = (id: string, table: number, organization: number): number => {
    // A new row (most of a snapshot) is one insert; only a known row is looked up.
    if (add.run(id, table, organization).changes > 0) {
      wrote = true
      return NOT_FOUND
    }
    const routed = get.get(id, table)
    if (routed === organization || routed === undefined) return NOT_FOUND
    put.run(id, table, organization)
    wrote = true
    return routed
  }

  const resolveAll = (batch: RouteBatch): RouteAnswer => {
    const { ids, tables, kinds, organizations } = batch
    for (const [code, organizationId] of batch.newOrganizations) {
      if (addOrganization.run(code, organizationId).changes > 0) wrote = true
    }
    const found = new Int32Array(ids.length)
    for (const i of inKeyOrder(ids)) {
      const id = ids[i]!
      const table = tables[i]!
      switch (kinds[i]) {
        case RouteKind.Lookup:
          found[i] = get.get(id, table) ?? NOT_FOUND
          break
        case RouteKind.RouteUnlessNew:
          found[i] =
            get.get(id, table) === undefined ? SKIPPED : route(id, table, organizations[i]!)
          break
        default:
          found[i] = route(id, table, organizations[i]!)
      }
    }
    return found
  }

  const { joinable, ...held } = heldTransaction(db, () => {})
  const inTransaction = joinable(resolveAll)
  const log = unsyncedLog(path)

  /** Commits the held transaction, and syncs its log when it wrote (as FULL's commit would). */
  const commit = (): void => {
    const holding = db.inTransaction
    held.commit()
    if (!holding || !wrote) return
    log.appended()
    log.sync()
  }

  return {
    db,
    resolve(batch) {
      // Nothing to ask (a batch of heartbeats, or of control tables): no transaction, no sync.
      if (batch.ids.length === 0 && batch.newOrganizations.length === 0) return new Int32Array(0)
      const own = !db.inTransaction
      if (own) wrote = false
      const found = inTransaction(batch)
      // Its own commit is the caller's to sync; a held one's is synced by `commit`.
      if (own && wrote) log.appended()
      return found
    },
    organizations: () => readOrganizations.all(),
    begin() {
      if (!db.inTransaction) wrote = false
      held.begin()
    },
    commit,
    rollback: () => held.rollback(),
    takeUnsyncedWal: log.take,
    syncWal: log.sync,
    boundWal: (maxBytes) => boundWal(db, path, maxBytes),
    setCacheKiB: (kib) => setCacheKiB(db, kib),
    close() {
      // Synced whatever it holds: the files it routes to may have committed already.
      commit()
      log.sync()
      db.close()
    },
  }
}

/**
 * A batch's routes in the order of their row ids. Random uuids make each route a random B-tree
 * insert; in key order, neighbours share pages (a million routes in batches of 5,000: about a
 * third less time). A row's own routes keep their order (ties go by position), so every route
 * finds what resolving the batch one by one would have found.
 */
function inKeyOrder(ids: readonly string[]): number[] {
  const order = Array.from(ids, (_, i) => i)
  return order.sort((a, b) => {
    const x = ids[a]!
    const y = ids[b]!
    return x < y ? -1 : x > y ? 1 : a - b
  })
}

/**
 * Moves the routes a generation's control.db holds (every generation made before 2026-11-30)
 * into its routing index: copied and committed first, then removed from control.db, so a crash
 * between the two copies them again (the copy skips what is there) and loses none.
 */
function carryOverFromControl(db: SqliteDatabase, path: string, controlPath: string): void {
  if (!existsSync(controlPath)) return
  db.prepare('ATTACH DATABASE ? AS control').run(controlPath)
  try {
    const kept = db
      .prepare(
        `SELECT 1 FROM control.sqlite_master WHERE type = 'table' AND name = 'route_organizations'`,
      )
      .get()
    if (kept === undefined) return
    if (db.prepare('SELECT 1 FROM control.route_organizations LIMIT 1').get() === undefined) return
    db.transaction(() => {
      db.exec(`INSERT OR IGNORE INTO main.route_organizations (organization, organization_id)
                 SELECT organization, organization_id FROM control.route_organizations;
               INSERT OR IGNORE INTO main.routes (id, source_table, organization)
                 SELECT id, source_table, organization FROM control.routes`)
    })()
    // On disk before control.db's copy goes.
    syncWal(`${path}-wal`)
    db.transaction(() => {
      db.exec('DELETE FROM control.routes; DELETE FROM control.route_organizations')
    })()
  } finally {
    db.prepare('DETACH DATABASE control').run()
  }
}

/**
 * The organizations a generation routed rows to, read on a connection of its own (a rebuild's or
 * a verify's, beside the live projector); from control.db for a generation not opened since its
 * routes moved.
 */
export function readRoutedOrganizations(generation: Generation): string[] {
  const routed = (path: string): string[] => {
    const db = new Database(path, { readonly: true, fileMustExist: true })
    try {
      return db.prepare<[], string>(ROUTED_ORGANIZATIONS).pluck().all()
    } finally {
      db.close()
    }
  }
  if (existsSync(generation.routesPath)) {
    const organizations = routed(generation.routesPath)
    if (organizations.length > 0) return organizations
  }
  return existsSync(generation.controlPath) ? routed(generation.controlPath) : []
}

const ROUTED_ORGANIZATIONS = 'SELECT organization_id FROM route_organizations'

/**
 * Organizations' codes, held by whoever packs batches: a code is given as a batch first names the
 * organization, and recorded in the routing index with that batch (`RouteBatch.newOrganizations`).
 * Until a batch recorded it (`recorded`), every batch that names it lists it again: a batch that
 * never reached the file (a bad line ended a file run first) must not leave a code unrecorded. After
 * a rollback the codes are read back from the file (`reload`).
 */
export class OrganizationCodes {
  readonly #codes = new Map<string, number>()
  readonly #ids = new Map<number, string>()
  readonly #unrecorded = new Set<number>()
  #next = 1

  constructor(recorded: Iterable<readonly [number, string]>) {
    this.reload(recorded)
  }

  reload(recorded: Iterable<readonly [number, string]>): void {
    this.#codes.clear()
    this.#ids.clear()
    this.#unrecorded.clear()
    this.#next = 1
    for (const [code, organizationId] of recorded) {
      this.#codes.set(organizationId, code)
      this.#ids.set(code, organizationId)
      this.#next = Math.max(this.#next, code + 1)
    }
  }

  codeOf(organizationId: string): number {
    let code = this.#codes.get(organizationId)
    if (code === undefined) {
      code = this.#next++
      this.#codes.set(organizationId, code)
      this.#ids.set(code, organizationId)
      this.#unrecorded.add(code)
    }
    return code
  }

  /** Whether a batch naming the code must list it (`RouteBatch.newOrganizations`). */
  unrecorded(code: number): boolean {
    return this.#unrecorded.has(code)
  }

  /** A batch's routes were resolved: the codes it listed are in the file. */
  recorded(batch: RouteBatch): void {
    for (const [code] of batch.newOrganizations) this.#unrecorded.delete(code)
  }

  idOf(code: number): string {
    const id = this.#ids.get(code)
    if (id === undefined) throw new Error(`route to unknown organization code ${code}`)
    return id
  }

  /** Every organization a row was routed to. */
  organizations(): string[] {
    return [...this.#codes.keys()]
  }
}

/** A batch's routes, as the packer asks for them (`RouteBatch`). */
export class RouteBatchBuilder {
  readonly #ids: string[] = []
  readonly #tables: number[] = []
  readonly #kinds: number[] = []
  readonly #organizations: number[] = []
  readonly #listed = new Map<number, string>()

  constructor(readonly codes: OrganizationCodes) {}

  get size(): number {
    return this.#ids.length
  }

  /** Adds a route (an organization: `Route` or `RouteUnlessNew`; none: a `Lookup`): its index. */
  add(table: OrganizationTable, id: string, kind: number, organizationId?: string): number {
    let code = 0
    if (organizationId !== undefined) {
      code = this.codes.codeOf(organizationId)
      if (this.codes.unrecorded(code)) this.#listed.set(code, organizationId)
    }
    this.#ids.push(id)
    this.#tables.push(ROUTED_TABLES[table])
    this.#kinds.push(kind)
    this.#organizations.push(code)
    return this.#ids.length - 1
  }

  build(): RouteBatch {
    return {
      ids: this.#ids,
      tables: Uint8Array.from(this.#tables),
      kinds: Uint8Array.from(this.#kinds),
      organizations: Int32Array.from(this.#organizations),
      newOrganizations: [...this.#listed],
    }
  }
}
