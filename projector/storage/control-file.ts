// control.db as the projector writes it: organizations and API keys (the api's first stop on
// every request), the files that replaced organizations' first ones, and the replica's readiness.
// The routing index (source row -> organization) is a file of its own (route-file.ts).
import Database from 'better-sqlite3'
import { existsSync } from 'node:fs'
import * as tables from '../../schema/control-db.ts'
import type { ControlTable } from '../../schema/events.ts'
import {
  heldTransaction,
  openForWriting,
  setCacheKiB,
  type SqliteDatabase,
} from '../../src/sqlite.ts'
import type { RowChange } from '../decode/decode.ts'
import { createMirror, type MirrorChange } from './mirror.ts'
import { applyOnce, appliedOffsets, type Origin, type Tally } from './applied-offsets.ts'
import { boundWal, unsyncedLog } from './wal.ts'

export interface ControlEvent {
  change: RowChange & { table: ControlTable }
  origin: Origin
}

export interface ControlFile {
  /**
   * Runs `work` in one transaction of control.db: a batch's control events (`applyEvents`) commit
   * together, before any organization file. Its commit is synced before it returns, unless `commits` is `byCaller`: then the caller syncs the log (`takeUnsyncedWal`)
   * with the organization files' before it reports the batch applied.
   */
  transaction<T>(work: () => T, commits?: 'synced' | 'byCaller'): T
  /** control.db's log when a `byCaller` transaction left it unsynced, once; else undefined. */
  takeUnsyncedWal(): string | undefined
  /** Syncs what `takeUnsyncedWal` would hand over, now. */
  syncWal(): void
  /**
   * Opens a transaction that `transaction` calls join until `commit`: an initial load commits
   * every few batches, not every batch (see apply.ts). A failure inside it leaves the batch half
   * written: the caller then rolls the whole transaction back.
   */
  begin(): void
  /** Commits the transaction `begin` opened; nothing if none is open. */
  commit(): void
  /** Rolls back the transaction `begin` opened, and what this handle remembers of it. */
  rollback(): void
  /**
   * Applies the control tables' changes (inside `transaction`). Returns the organizations whose
   * rows changed, so their files can be created.
   */
  applyEvents(
    events: readonly ControlEvent[],
    offsetGuard: boolean,
    tally: Tally,
  ): { organizations: string[] }
  /**
   * The file of `fileKey` (an organization's id, or a shared file's key: src/organization-files.ts
   * `fileKeyOf`) when a per-organization rebuild replaced its first one (src/layout.ts);
   * undefined: the first one, `<organizationId>.db` or `shared-<k>.db`.
   */
  organizationFile(fileKey: string): string | undefined
  /** Points the key at another file, in one statement (handover.ts). */
  setOrganizationFile(fileKey: string, file: string): void
  /**
   * The files the generation's organizations share (src/organization-files.ts); 0: each has its
   * own. Recorded once, when the generation is made (`recordSharedFiles`); undefined until then.
   */
  sharedFiles(): number | undefined
  recordSharedFiles(files: number): void
  /** Records, once, that the replica has caught up with its source. */
  markCaughtUp(now: Date): void
  caughtUpAt(): string | undefined
  /** The Kafka consumer group that feeds this generation. */
  consumerGroup(): string | undefined
  recordConsumerGroup(groupId: string): void
  boundWal(maxBytes: number): boolean
  /** Sizes the file's SQLite page cache. */
  setCacheKiB(kib: number): void
  close(): void
  readonly db: SqliteDatabase
}

/**
 * The files that replaced a first one (organization_files), by key (an organization's id, or a
 * shared file's key), read once from a generation's control.db.
 */
export function readOrganizationFiles(path: string): Map<string, string> {
  if (!existsSync(path)) return new Map()
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    const hasTable = db
      .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'organization_files'`)
      .get()
    if (hasTable === undefined) return new Map()
    const rows = db.prepare('SELECT organization_id, file FROM organization_files').all() as Array<{
      organization_id: string
      file: string
    }>
    return new Map(rows.map((r) => [r.organization_id, r.file]))
  } finally {
    db.close()
  }
}

/** replica_state's record of the files the generation's organizations share. */
const SHARED_FILES_STATE = 'organization_files'

/** The files a generation's organizations share, read from its control.db: 0 if none. */
export function readSharedFiles(path: string): number {
  return recordedSharedFiles(path) ?? 0
}

/** The organizations control.db holds (their rows, whether or not they have others yet). */
export function readOrganizationCount(path: string): number {
  if (!existsSync(path)) return 0
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    return db.prepare<[], number>('SELECT count(*) FROM organizations').pluck().get() ?? 0
  } finally {
    db.close()
  }
}

/**
 * The files a generation's organizations share as its control.db records them; undefined for a
 * generation not made yet (no control.db, or nothing recorded: the projector records it as it
 * first opens the generation).
 */
export function recordedSharedFiles(path: string): number | undefined {
  if (!existsSync(path)) return undefined
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    const hasState = db
      .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'replica_state'`)
      .get()
    if (hasState === undefined) return undefined
    const value = db
      .prepare<[string], string>('SELECT value FROM replica_state WHERE key = ?')
      .pluck()
      .get(SHARED_FILES_STATE)
    return value === undefined ? undefined : Number(value)
  } finally {
    db.close()
  }
}

export function openControlFile(path: string): ControlFile {
  const db = openForWriting(path, 'control')
  const mirror = createMirror(db, { organizations: tables.organizations, api_keys: tables.apiKeys })
  const getState = db.prepare<[string], { value: string }>(
    'SELECT value FROM replica_state WHERE key = ?',
  )
  const putStateOnce = db.prepare<[string, string]>(
    'INSERT INTO replica_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING',
  )

  const getOrganizationFile = db.prepare<[string], string>(
    'SELECT file FROM organization_files WHERE organization_id = ?',
  )
  getOrganizationFile.pluck()
  const putOrganizationFile = db.prepare<[string, string]>(
    `INSERT INTO organization_files (organization_id, file) VALUES (?, ?)
     ON CONFLICT (organization_id) DO UPDATE SET file = excluded.file`,
  )

  const offsets = appliedOffsets(db)

  const applyEvents = (events: readonly ControlEvent[], offsetGuard: boolean, tally: Tally) => {
    const changes: MirrorChange[] = []
    applyOnce(events, offsets, offsetGuard, tally, (event) => mirror.apply(event.change, changes))

    const organizations = new Set<string>()
    for (const c of changes) {
      const row = c.current ?? c.previous
      if (c.table === 'organizations') organizations.add(c.id)
      else if (row !== undefined) organizations.add(row.organizationId as string)
    }
    return { organizations: [...organizations] }
  }

  /** The transaction an initial load holds across batches (apply.ts). */
  const { joinable, ...held } = heldTransaction(db, forgetUncommitted)
  const inTransaction = joinable(<T>(work: () => T): T => work())
  const log = unsyncedLog(path)

  return {
    db,
    transaction(work, commits = 'synced') {
      // A live batch's control events commit unsynced, and are synced with its files' logs, off
      // the main thread (lanes/lanes.ts): a synced commit here held each batch back from the
      // lanes by an fsync. Every other commit of control.db stays synced (synchronous=FULL).
      const byCaller = commits === 'byCaller' && !db.inTransaction
      if (byCaller) db.pragma('synchronous = NORMAL')
      try {
        const result = inTransaction(work)
        if (byCaller) log.appended()
        return result
      } catch (error) {
        // Rolled back (inside `begin`'s transaction, the caller rolls all of it back): forget the
        // offsets it would have recorded.
        forgetUncommitted()
        throw error
      } finally {
        if (byCaller) db.pragma('synchronous = FULL')
      }
    },
    takeUnsyncedWal: log.take,
    syncWal: log.sync,
    ...held,
    applyEvents,
    organizationFile: (organizationId) => getOrganizationFile.get(organizationId),
    setOrganizationFile: (fileKey, file) => void putOrganizationFile.run(fileKey, file),
    sharedFiles() {
      const value = getState.get(SHARED_FILES_STATE)?.value
      return value === undefined ? undefined : Number(value)
    },
    recordSharedFiles: (files) => void putStateOnce.run(SHARED_FILES_STATE, String(files)),
    markCaughtUp(now) {
      putStateOnce.run('caught_up_at', now.toISOString())
    },
    caughtUpAt: () => getState.get('caught_up_at')?.value,
    consumerGroup: () => getState.get('consumer_group')?.value,
    recordConsumerGroup: (groupId) => void putStateOnce.run('consumer_group', groupId),
    boundWal: (maxBytes) => boundWal(db, path, maxBytes),
    setCacheKiB: (kib) => setCacheKiB(db, kib),
    close() {
      held.commit()
      log.sync()
      db.close()
    },
  }

  function forgetUncommitted(): void {
    offsets.readBack()
  }
}
